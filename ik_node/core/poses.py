# SPDX-License-Identifier: Apache-2.0

"""Poses and their errors: the one home of the containers and the residual.

A pose is a 4x4 homogeneous transform (base frame, metres); the kernels take
it as a row-major rotation 9-tuple and a position 3-tuple (split_pose,
pose_matrix, rotation9). The residual of a pose T from a target T_t is
``[p_t - p; rotation vector of R_t R^T]`` (6,), metres and radians, base
frame: pose_residual (through the kernels, as the Jacobian solver uses it)
and pose_residual_of_matrices (numpy, for the local steps); its norms are
pose_error (of two poses) and residual_norms (of a residual).
"""

import math
from typing import Tuple

from ik_node.core.kernels import base as kernels
from ik_node.core.kernels.base import quat_to_matrix, rotation_vector
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def pose_matrix(r, p) -> FloatArray:
    """Return the 4x4 transform of a rotation 9-tuple (row-major) and a position 3-tuple."""
    return np.array(((r[0], r[1], r[2], p[0]), (r[3], r[4], r[5], p[1]),
                     (r[6], r[7], r[8], p[2]), (0.0, 0.0, 0.0, 1.0)))


def rotation9(quaternion: FloatArray) -> Tuple[float, ...]:
    """Row-major rotation 9-tuple of a unit quaternion (x, y, z, w)."""
    x, y, z, w = quaternion.tolist()
    return quat_to_matrix(x, y, z, w)


def split_pose(T: FloatArray):
    """Return the rotation 9-tuple and position 3-tuple of a 4x4 pose (kernels' layout)."""
    rows = T.tolist()
    return kernels.rotation_of_rows(rows), kernels.translation_of_rows(rows)


def pose_residual(T_target: FloatArray, T: FloatArray) -> FloatArray:
    """Residual ``[p_t - p; 2 log(q_t q^-1)]`` (6,), metres and radians, base frame."""
    return np.array(kernels.pose_residual(*split_pose(T_target), *split_pose(T)))


def pose_residual_of_matrices(target: FloatArray, pose: FloatArray) -> FloatArray:
    """Return (6,): target position minus pose position, and the rotation vector of R_t R^T.

    Both in the base frame, so that the geometric Jacobian maps joint steps
    onto it to first order.
    """
    turn = rotation_vector(tuple((target[:3, :3] @ pose[:3, :3].T).ravel()))
    return np.concatenate((target[:3, 3] - pose[:3, 3], turn))


def pose_error(T_target: FloatArray, T: FloatArray) -> Tuple[float, float]:
    """Position error (m) and orientation error (rad, in [0, pi]) of pose T from T_target.

    The one definition used by the solvers, the trajectory and the node
    (kernels.pose_error): |p_t - p| and the angle of R_t R^T, both (4, 4) in
    the same frame.
    """
    a, b = T_target.tolist(), T.tolist()
    return kernels.pose_error(kernels.rotation_of_rows(a), kernels.translation_of_rows(a),
                              kernels.rotation_of_rows(b), kernels.translation_of_rows(b))


def residual_norms(r: FloatArray) -> Tuple[float, float]:
    """Position (m) and orientation (rad) norms of a pose residual (6,)."""
    x, y, z, rx, ry, rz = r.tolist()
    return math.sqrt(x * x + y * y + z * z), math.sqrt(rx * rx + ry * ry + rz * rz)
