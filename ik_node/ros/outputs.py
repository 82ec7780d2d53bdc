# SPDX-License-Identifier: Apache-2.0
"""The command outputs: one encoder per output, from the command stream to its message.

``joint_states`` (sensor_msgs/JointState, the node is its own robot: the
command at the tick, chain order), ``joint_trajectory``
(trajectory_msgs/JointTrajectory for joint_trajectory_controller: the
stream's horizon with positions, velocities and accelerations) and
``position_array`` (std_msgs/Float64MultiArray for
forward_position_controller: the plan's positions at the instant of
sending). Times are seconds on the node's clock counted from its epoch
(nanoseconds of ROS time); joints in ``order`` (chain indices, the
command_joint_order).
"""

from typing import Dict, Optional, Sequence, Tuple

from builtin_interfaces.msg import Duration
from ik_node.core.motion.stream import CommandStream
from ik_node.ros.conversions import joint_state
import numpy as np
from rclpy.time import Time
from sensor_msgs.msg import JointState
from std_msgs.msg import Float64MultiArray
from trajectory_msgs.msg import JointTrajectory, JointTrajectoryPoint

# Command outputs: message type and default topic (the ros2_control controllers' own).
OUTPUTS: Dict[str, Tuple[type, str]] = {
    'joint_states': (JointState, 'joint_states'),
    'joint_trajectory': (JointTrajectory, '/joint_trajectory_controller/joint_trajectory'),
    'position_array': (Float64MultiArray, '/forward_position_controller/commands'),
}


class JointStatesEncoder:
    """joint_states: the command at the tick (positions, velocities), chain order.

    The chain's mimic joints follow, each ``multiplier * leader + offset``
    (velocity ``multiplier * leader's``), as a robot's joint_state_broadcaster
    reports them; the controller outputs carry the free joints only.
    """

    def __init__(self, names: Sequence[str], order: Sequence[int], epoch_ns: int, clock_type,
                 mimics: Sequence[Tuple[str, int, float, float]] = ()):
        """Keep the joint names (chain order, then mimics); one message, refilled each tick."""
        self._names = list(names) + [m[0] for m in mimics]
        self._leaders = np.array([m[1] for m in mimics], dtype=np.int64)
        self._scale = np.array([m[2] for m in mimics], dtype=np.float64)
        self._shift = np.array([m[3] for m in mimics], dtype=np.float64)
        self._msg = JointState()

    def message(self, stream: CommandStream, stamp: Time, now: float) -> JointState:
        """Return the JointState of the command at ``now``, stamped ``stamp``."""
        q, v, _ = stream.sample(now)
        if len(self._leaders):
            q = np.concatenate((q, self._scale * q[self._leaders] + self._shift))
            v = np.concatenate((v, self._scale * v[self._leaders]))
        return joint_state(self._names, q, v, stamp.to_msg(), self._msg)


class JointTrajectoryEncoder:
    """joint_trajectory: the stream's horizon, stamped with its first point's instant."""

    def __init__(self, names: Sequence[str], order: Sequence[int], epoch_ns: int, clock_type,
                 mimics: Sequence[Tuple[str, int, float, float]] = ()):
        """Keep the command order, the epoch (ns) and the clock type of the stamps."""
        self._order = list(order)
        self._names = [names[k] for k in order]
        self._epoch_ns = epoch_ns
        self._clock_type = clock_type

    def message(self, stream: CommandStream, stamp: Time, now: float) -> JointTrajectory:
        """Return the JointTrajectory of the horizon from ``now`` (each point's q, v, a)."""
        points = stream.horizon(now)
        order = self._order
        msg = JointTrajectory(joint_names=list(self._names))
        start_ns = self._epoch_ns + int(round(points[0].time * 1e9))
        msg.header.stamp = Time(nanoseconds=start_ns, clock_type=self._clock_type).to_msg()
        for p in points:
            offset = int(round(p.time * 1e9)) + self._epoch_ns - start_ns
            msg.points.append(JointTrajectoryPoint(
                positions=[float(p.q[k]) for k in order],
                velocities=[float(p.v[k]) for k in order],
                accelerations=[float(p.a[k]) for k in order],
                time_from_start=Duration(sec=offset // 1_000_000_000,
                                         nanosec=offset % 1_000_000_000)))
        return msg


class PositionArrayEncoder:
    """position_array: the plan's positions at the instant of sending, command order."""

    def __init__(self, names: Sequence[str], order: Sequence[int], epoch_ns: int, clock_type,
                 mimics: Sequence[Tuple[str, int, float, float]] = ()):
        """Keep the command order (mimic joints are not commanded)."""
        self._order = list(order)

    def message(self, stream: CommandStream, stamp: Time, now: float,
                due: Optional[float] = None) -> Float64MultiArray:
        """Return the Float64MultiArray of the positions sent at ``now`` (CommandStream.send).

        ``due``: the instant the array timer was due (the plan is sampled there).
        """
        q = stream.send(now, due)
        return Float64MultiArray(data=[float(q[k]) for k in self._order])


ENCODERS = {'joint_states': JointStatesEncoder, 'joint_trajectory': JointTrajectoryEncoder,
            'position_array': PositionArrayEncoder}
