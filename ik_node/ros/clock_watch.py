# SPDX-License-Identifier: Apache-2.0
"""The node's clock, watched at each tick: late ticks and jumps, counted and logged.

Times are seconds on the node's clock (ROS time, sim time under
use_sim_time), counted from its start.
"""

from typing import Optional

from ik_node.core.motion.stream import CLOCK_JUMP_S


class ClockWatch:
    """Late ticks and clock jumps of one node (counted for /diagnostics, logged).

    What the plan does about a jump is the session's rule
    (:class:`ik_node.core.motion.session.MotionSession`); this only tells.

    Args:
        period: the tick period, s.
        logger: the node's logger.

    """

    def __init__(self, period: float, logger):
        """No tick seen yet."""
        self._period = period
        self._logger = logger
        self._last_tick: Optional[float] = None
        self.late_ticks = self.jumps_back = self.jumps_forward = 0

    def see(self, now: float, planning: bool) -> None:
        """Count late ticks and clock jumps at the tick of ``now`` (s); log the jumps.

        ``planning``: a robot model is loaded (a jump changes a plan). A clock
        that goes back (a simulator reset under use_sim_time) re-bases the
        plan (CommandStream.clock_jumped: a controlled stop, then on toward the
        target); a jump forward of more than CLOCK_JUMP_S is not motion time
        (joint_trajectory brakes along the tail, position_array continues
        from where the hardware is, joint_states from the state it had).
        """
        last, self._last_tick = self._last_tick, now
        if last is None:
            return
        if now - last > 2.0 * self._period:
            self.late_ticks += 1
        if now < last and planning:
            self.jumps_back += 1
            self._logger.warning(f'the clock went back by {last - now:.3f} s (a simulation '
                                 'reset?): a controlled stop, then on toward the target on the '
                                 'new clock')
        elif now - last > CLOCK_JUMP_S and planning:
            self.jumps_forward += 1
            self._logger.warning(f'the clock jumped forward by {now - last:.3f} s: not taken as '
                                 'motion time', throttle_duration_sec=5.0)
