# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""The node's clock, watched at each tick: late ticks and jumps, counted and logged.

Times are seconds on the node's clock (ROS time, sim time under
use_sim_time), counted from its start.
"""

from typing import Optional

from ik_node.core.motion.stream import CLOCK_JUMP_S, CommandStream


class ClockWatch:
    """Late ticks and clock jumps of one node (counted for /diagnostics, logged).

    Args:
        period: the tick period, s.
        logger: the node's logger.
        own_robot: True for the joint_states output (the node simulates the arm).

    """

    def __init__(self, period: float, logger, own_robot: bool):
        """No tick seen yet."""
        self._period = period
        self._logger = logger
        self._own_robot = own_robot
        self._last_tick: Optional[float] = None
        self.late_ticks = self.jumps_back = self.jumps_forward = 0

    def see(self, now: float, stream: Optional[CommandStream]) -> None:
        """Count late ticks and clock jumps at the tick of ``now`` (s); own robot: skip a jump.

        A clock that goes back (a simulator reset under use_sim_time) would
        leave the whole plan in the future. The stream re-bases itself
        (CommandStream.clock_jumped: a controlled stop from the command it
        was giving, then on toward the target) and the feedback policy forgets
        the states of the old clock; here the jump is logged and counted. A
        jump forward of more than CLOCK_JUMP_S is not motion time:
        joint_trajectory brakes along the tail (the stream's late-tick rule),
        position_array continues from where the hardware is (the stream), and
        joint_states goes on from the state it had (here).
        """
        last, self._last_tick = self._last_tick, now
        if last is None:
            return
        if now - last > 2.0 * self._period:
            self.late_ticks += 1
        if now < last and stream is not None:
            self.jumps_back += 1
            self._logger.warning(f'the clock went back by {last - now:.3f} s (a simulation '
                                 'reset?): a controlled stop, then on toward the target on the '
                                 'new clock')
        elif now - last > CLOCK_JUMP_S and stream is not None:
            self.jumps_forward += 1
            self._logger.warning(f'the clock jumped forward by {now - last:.3f} s: not taken as '
                                 'motion time', throttle_duration_sec=5.0)
            if self._own_robot:
                # The arm the node simulates does not move through the gap: the
                # plan goes on from the state it had, one tick on.
                q, v, _ = stream.sample(last + self._period)
                stream.restart(now, q, v)
