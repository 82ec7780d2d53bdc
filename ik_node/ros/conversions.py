# SPDX-License-Identifier: Apache-2.0

"""Message <-> numpy conversions, with the validation the node applies to input."""

import math
from typing import Callable, Optional, Tuple

from geometry_msgs.msg import PointStamped, Pose, PoseStamped, TwistStamped
from ik_node.core.model.frames import FrameError, LinkFrames
from ik_node.core.rotations import matrix_to_quaternion, MIN_QUAT_NORM, multiply, \
    quaternion_to_matrix
import numpy as np
from sensor_msgs.msg import JointState


# Coordinates at or beyond this (metres) are refused as absurd (a robot arm's
# workspace is metres; 1e300 would overflow the solver's squares).
MAX_ABS_POSITION_M = 1e6
# Twist components at or beyond this (m/s, rad/s) are refused as absurd: no arm
# moves so; the joint limits would slow any real one to a crawl behind it.
MAX_TWIST = 1e3
_IDENTITY = np.eye(4)


class RejectedMessage(ValueError):
    """A message the node refuses; ``reason`` is a short key for the diagnostics count."""

    def __init__(self, reason: str, detail: str):
        """Keep the reason key and the readable detail."""
        super().__init__(detail)
        self.reason = reason


def pose_to_matrix(pose: Pose) -> np.ndarray:
    """Return the 4x4 transform of a geometry_msgs/Pose (metres)."""
    p, q = pose.position, pose.orientation
    x, y, z, w = q.x, q.y, q.z, q.w
    t = np.eye(4)
    t[:3, :3] = [[1 - 2 * (y * y + z * z), 2 * (x * y - w * z), 2 * (x * z + w * y)],
                 [2 * (x * y + w * z), 1 - 2 * (x * x + z * z), 2 * (y * z - w * x)],
                 [2 * (x * z - w * y), 2 * (y * z + w * x), 1 - 2 * (x * x + y * y)]]
    t[:3, 3] = [p.x, p.y, p.z]
    return t


def pose_msg(position, quaternion) -> Pose:
    """Return a geometry_msgs/Pose of a position (3,) in metres and a quaternion (x, y, z, w)."""
    pose = Pose()
    pose.position.x, pose.position.y, pose.position.z = (float(v) for v in position)
    (pose.orientation.x, pose.orientation.y, pose.orientation.z,
     pose.orientation.w) = (float(v) for v in quaternion)
    return pose


def pose_matrix(position, quaternion) -> np.ndarray:
    """Return the 4x4 pose of a position (3,) and a unit quaternion (x, y, z, w)."""
    pose = np.eye(4)
    pose[:3, :3] = quaternion_to_matrix(quaternion)
    pose[:3, 3] = position
    return pose


def matrix_to_pose(t: np.ndarray) -> Pose:
    """Return the geometry_msgs/Pose of a 4x4 transform (the inverse of pose_to_matrix)."""
    return pose_msg(t[:3, 3], matrix_to_quaternion(t[:3, :3]))


def frames_at(frames: LinkFrames, q) -> Callable[[str], np.ndarray]:
    """Return frame_id -> its pose (4, 4) in the base frame at joints q; RejectedMessage if none.

    '' means the base frame (ROS convention for "the frame of the robot's base").
    """
    def resolve(frame: str) -> np.ndarray:
        try:
            return frames.pose(frame, q)
        except FrameError as exc:
            raise RejectedMessage('wrong_frame', str(exc)) from None
    return resolve


def base_frame_only(base_link: str) -> Callable[[str], np.ndarray]:
    """Return a resolver that knows only '' and ``base_link`` (the identity)."""
    def resolve(frame: str) -> np.ndarray:
        if frame not in ('', base_link):
            raise RejectedMessage('wrong_frame', f"frame_id '{frame}' is neither empty nor "
                                  f"the base link '{base_link}'")
        return _IDENTITY
    return resolve


def check_target(msg: PoseStamped, resolve) -> Tuple[np.ndarray, np.ndarray]:
    """Validate a target pose; return it in the base frame: (position (3,), unit quaternion (4,)).

    Args:
        msg: the target, in ``msg.header.frame_id``.
        resolve: frame_id -> (4, 4) pose of that frame in the base frame
            (``frames_at``, ``base_frame_only``); raises RejectedMessage.

    Raises:
        RejectedMessage: an unknown frame (checked first), non-finite numbers,
            a quaternion of norm below MIN_QUAT_NORM, an absurd position.

    """
    frame = resolve(msg.header.frame_id)
    p, q = msg.pose.position, msg.pose.orientation
    values = (p.x, p.y, p.z, q.x, q.y, q.z, q.w)
    if not all(math.isfinite(v) for v in values):
        raise RejectedMessage('not_finite', f'pose has NaN or inf: {values}')
    # Scaled norm: components of 1e300 would overflow a plain sum of squares
    # (norm inf, the quaternion divided down to zero).
    scale = max(abs(v) for v in values[3:])
    scaled = [v / scale for v in values[3:]] if scale > 0.0 else [0.0] * 4
    root = math.sqrt(sum(v * v for v in scaled))
    norm = scale * root  # inf for components near the float maximum: fine here
    if norm < MIN_QUAT_NORM:
        raise RejectedMessage('zero_quaternion', f'orientation norm {norm:.3g} is ~0')
    _check_not_absurd(values[:3], 'position')
    quaternion = np.array(scaled) / root
    if frame is _IDENTITY:
        return np.array(values[:3]), quaternion
    position = frame[:3, :3] @ np.array(values[:3]) + frame[:3, 3]
    return position, multiply(matrix_to_quaternion(frame[:3, :3]), quaternion)


def _check_not_absurd(xyz, what: str) -> None:
    if not all(abs(v) < MAX_ABS_POSITION_M for v in xyz):
        raise RejectedMessage('absurd_position',
                              f'{what} {tuple(xyz)} beyond {MAX_ABS_POSITION_M:.0e} m')


def check_point(msg: PointStamped, resolve) -> np.ndarray:
    """Validate a pole point; return it (3,) in metres, base frame.

    Raises:
        RejectedMessage: wrong_frame, not_finite or absurd_position (as check_target).

    """
    frame = resolve(msg.header.frame_id)
    xyz = (msg.point.x, msg.point.y, msg.point.z)
    if not all(math.isfinite(v) for v in xyz):
        raise RejectedMessage('not_finite', f'point {xyz} is not finite')
    _check_not_absurd(xyz, 'point')
    return frame[:3, :3] @ np.array(xyz) + frame[:3, 3]


def check_twist(msg: TwistStamped, resolve,
                tip_link: str) -> Tuple[np.ndarray, np.ndarray, bool]:
    """Validate a twist; return (linear m/s (3,), angular rad/s (3,), in the tip frame?).

    In the tip link's frame the twist is a body twist (both vectors in the
    tip frame); in any other frame both vectors are rotated into the base
    frame (a world twist of the tip).

    Raises:
        RejectedMessage: wrong_frame, not_finite, or absurd_twist (a speed of
            MAX_TWIST or more: m/s or rad/s).

    """
    frame = resolve(msg.header.frame_id)
    lin = (msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z)
    ang = (msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z)
    if not all(math.isfinite(v) for v in lin + ang):
        raise RejectedMessage('not_finite', f'twist has NaN or inf: {lin} {ang}')
    if not all(abs(v) < MAX_TWIST for v in lin + ang):
        raise RejectedMessage('absurd_twist', f'twist {lin} {ang} has a component of '
                              f'{MAX_TWIST:g} (m/s or rad/s) or more')
    if msg.header.frame_id == tip_link:
        return np.array(lin), np.array(ang), True
    rotation = frame[:3, :3]
    return rotation @ np.array(lin), rotation @ np.array(ang), False


def joint_state(names, q: np.ndarray, velocity: Optional[np.ndarray], stamp,
                msg: Optional[JointState] = None) -> JointState:
    """Fill a JointState (positions rad/m, velocities rad/s or m/s).

    ``msg`` is reused when given (the node publishes one per tick; publishing
    serialises it, so refilling it afterwards is safe).
    """
    if msg is None:
        msg = JointState()
    msg.header.stamp = stamp
    if msg.name != list(names):
        msg.name = list(names)
    msg.position = np.asarray(q, dtype=np.float64).tolist()
    msg.velocity = [] if velocity is None else np.asarray(velocity, dtype=np.float64).tolist()
    return msg
