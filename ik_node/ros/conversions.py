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


"""Message <-> numpy conversions, with the validation the node applies to input."""

import math
from typing import Optional, Tuple

from geometry_msgs.msg import PointStamped, Pose, PoseStamped
from ik_node.core.rotations import matrix_to_quaternion, MIN_QUAT_NORM
import numpy as np
from sensor_msgs.msg import JointState


# Coordinates at or beyond this (metres) are refused as absurd (a robot arm's
# workspace is metres; 1e300 would overflow the solver's squares).
MAX_ABS_POSITION_M = 1e6


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


def matrix_to_pose(t: np.ndarray) -> Pose:
    """Return the geometry_msgs/Pose of a 4x4 transform (the inverse of pose_to_matrix)."""
    return pose_msg(t[:3, 3], matrix_to_quaternion(t[:3, :3]))


def check_target(msg: PoseStamped, base_link: str) -> Tuple[np.ndarray, np.ndarray]:
    """Validate a target pose; return (position (3,), unit quaternion (4,) x y z w).

    Raises:
        RejectedMessage: non-finite numbers, a quaternion of norm below
            MIN_QUAT_NORM, or a frame_id other than '' or ``base_link`` (tf2 is
            not a dependency: targets must be given in the base frame).

    """
    _check_frame(msg.header.frame_id, base_link)
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
    return np.array(values[:3]), np.array(scaled) / root


def _check_not_absurd(xyz, what: str) -> None:
    if not all(abs(v) < MAX_ABS_POSITION_M for v in xyz):
        raise RejectedMessage('absurd_position',
                              f'{what} {tuple(xyz)} beyond {MAX_ABS_POSITION_M:.0e} m')


def _check_frame(frame: str, base_link: str) -> None:
    if frame not in ('', base_link):
        raise RejectedMessage('wrong_frame', f"frame_id '{frame}' is neither empty nor the base "
                              f"link '{base_link}' (no tf2: send targets in the base frame)")


def check_point(msg: PointStamped, base_link: str) -> np.ndarray:
    """Validate a pole point; return it (3,) in metres, base frame.

    Raises:
        RejectedMessage: wrong_frame, not_finite or absurd_position (as check_target).

    """
    _check_frame(msg.header.frame_id, base_link)
    xyz = (msg.point.x, msg.point.y, msg.point.z)
    if not all(math.isfinite(v) for v in xyz):
        raise RejectedMessage('not_finite', f'point {xyz} is not finite')
    _check_not_absurd(xyz, 'point')
    return np.array(xyz)


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
