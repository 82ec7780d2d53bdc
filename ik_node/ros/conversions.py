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

from geometry_msgs.msg import Pose, PoseStamped
from ik_node.core.rotations import MIN_QUAT_NORM
import numpy as np
from sensor_msgs.msg import JointState


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


def check_target(msg: PoseStamped, base_link: str) -> Tuple[np.ndarray, np.ndarray]:
    """Validate a target pose; return (position (3,), unit quaternion (4,) x y z w).

    Raises:
        RejectedMessage: non-finite numbers, a quaternion of norm below
            MIN_QUAT_NORM, or a frame_id other than '' or ``base_link`` (tf2 is
            not a dependency: targets must be given in the base frame).

    """
    frame = msg.header.frame_id
    if frame not in ('', base_link):
        raise RejectedMessage('wrong_frame', f"frame_id '{frame}' is neither empty nor the base "
                              f"link '{base_link}' (no tf2: send targets in the base frame)")
    p, q = msg.pose.position, msg.pose.orientation
    values = (p.x, p.y, p.z, q.x, q.y, q.z, q.w)
    if not all(math.isfinite(v) for v in values):
        raise RejectedMessage('not_finite', f'pose has NaN or inf: {values}')
    norm = math.sqrt(q.x * q.x + q.y * q.y + q.z * q.z + q.w * q.w)
    if norm < MIN_QUAT_NORM:
        raise RejectedMessage('zero_quaternion', f'orientation norm {norm:.3g} is ~0')
    if not all(abs(v) < 1e6 for v in values[:3]):
        raise RejectedMessage('absurd_position', f'position {values[:3]} beyond 1e6 m')
    return np.array(values[:3]), np.array(values[3:]) / norm


def check_point(x: float, y: float, z: float) -> np.ndarray:
    """Validate a pole point; raises RejectedMessage when not finite."""
    if not all(math.isfinite(v) and abs(v) < 1e6 for v in (x, y, z)):
        raise RejectedMessage('not_finite', f'point ({x}, {y}, {z}) is not finite')
    return np.array([x, y, z])


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
