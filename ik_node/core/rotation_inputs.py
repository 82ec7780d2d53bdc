# SPDX-License-Identifier: Apache-2.0

"""Rotations as they arrive: checked at the public edge, and single ones parsed for the fast path.

:mod:`ik_node.core.rotations` validates every input here: quaternions
(``(..., 4)``, ``(x, y, z, w)``, any non-zero norm; normalised), vectors
(``(..., 3)``) and rotation matrices (``(..., 3, 3)``, orthonormal,
determinant +1), raising :class:`~ik_node.core.errors.InvalidInputError` or
:class:`~ik_node.core.errors.ZeroNormError` with what was received. The
``single_*`` functions recognise one valid element as plain floats (for the
kernels' ~1 us path) and return None for anything else, so that the batch
path raises the detailed error.
"""

import math
from typing import Tuple

from ik_node.core.errors import InvalidInputError, ZeroNormError
from ik_node.core.kernels import base as kernels
from ik_node.core.kernels.base import ORTHONORMAL_TOL
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# A quaternion shorter than this has no meaningful direction: its rounding
# noise (~1e-16 per component) would be amplified past 1e-10 by normalising.
MIN_QUAT_NORM = 1e-6


# ---------------------------------------------------------------------------
# Validation at the public edge
# ---------------------------------------------------------------------------

def as_float_array(value, name: str, last_shape: Tuple[int, ...]) -> FloatArray:
    """Return ``value`` as float64 with trailing shape ``last_shape``, finite."""
    try:
        arr = np.asarray(value, dtype=np.float64)
    except (TypeError, ValueError) as exc:
        raise InvalidInputError(
            f'{name}: expected an array of numbers with trailing shape {last_shape}, '
            f'received {type(value).__name__} ({exc})') from None
    k = len(last_shape)
    if arr.ndim < k or arr.shape[arr.ndim - k:] != last_shape:
        raise InvalidInputError(
            f'{name}: expected trailing shape {last_shape}, received shape {arr.shape}')
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f'{name}: expected finite numbers, received NaN or inf')
    return arr


def check_quaternion(q, name: str = 'q') -> FloatArray:
    """Validate and normalise quaternion(s).

    Args:
        q: (..., 4) quaternion(s), (x, y, z, w), any non-zero norm.
        name: argument name used in error messages.

    Returns:
        (..., 4) float64 unit quaternion(s) (a new array).

    Raises:
        InvalidInputError: wrong shape or non-finite values.
        ZeroNormError: a norm below ``MIN_QUAT_NORM``.

    """
    arr = as_float_array(q, name, (4,))
    norm = np.linalg.norm(arr, axis=-1, keepdims=True)
    if np.any(norm < MIN_QUAT_NORM):
        smallest = float(np.min(norm))
        raise ZeroNormError(
            f'{name}: quaternion norm {smallest:.3g} is below {MIN_QUAT_NORM:g}; '
            'a rotation needs a non-zero quaternion (x, y, z, w)')
    return arr / norm


def check_vector3(v, name: str = 'v') -> FloatArray:
    """Validate (..., 3) finite vector(s); returns a float64 array."""
    return as_float_array(v, name, (3,))


def check_rotation_matrix(matrix, name: str = 'R') -> FloatArray:
    """Validate (..., 3, 3) rotation matrices (orthonormal, determinant +1).

    Raises:
        InvalidInputError: wrong shape, non-finite, not orthonormal to
            ``ORTHONORMAL_TOL`` or a reflection (determinant -1).

    """
    arr = as_float_array(matrix, name, (3, 3))
    gram = np.matmul(np.swapaxes(arr, -1, -2), arr)
    gram -= np.eye(3)
    err = np.max(np.abs(gram), axis=(-2, -1), initial=0.0)
    if np.any(err > ORTHONORMAL_TOL):
        raise InvalidInputError(
            f'{name}: expected an orthonormal rotation matrix, max |R^T R - I| is '
            f'{float(np.max(err)):.3g} (tolerance {ORTHONORMAL_TOL:g})')
    # det = r0 . (r1 x r2), elementwise (np.linalg.det is 10x slower here).
    r0, r1, r2 = arr[..., 0, :], arr[..., 1, :], arr[..., 2, :]
    det = (r0[..., 0] * (r1[..., 1] * r2[..., 2] - r1[..., 2] * r2[..., 1])
           + r0[..., 1] * (r1[..., 2] * r2[..., 0] - r1[..., 0] * r2[..., 2])
           + r0[..., 2] * (r1[..., 0] * r2[..., 1] - r1[..., 1] * r2[..., 0]))
    if np.any(det < 0.0):
        raise InvalidInputError(f'{name}: determinant is -1, a reflection, not a rotation')
    return arr


# ---------------------------------------------------------------------------
# Single-element fast paths
# ---------------------------------------------------------------------------
# A numpy call on a 3- or 4-element array costs about a microsecond, so a
# single rotation pushed through the vectorised kernels costs 20-150 us. The
# public functions therefore send one quaternion / vector / matrix through
# the plain-float kernels below (about 1 us) and batches through numpy.
# Both paths are pinned to each other by a property test.

def single_floats(value, n: int):
    """Return ``value`` as a list of n finite floats if it is one n-vector, else None.

    None also for anything invalid, so that the vectorised path raises the
    detailed error.
    """
    if isinstance(value, np.ndarray):
        if value.shape != (n,):
            return None
        vals = value.tolist()
    elif isinstance(value, (list, tuple)) and len(value) == n:
        vals = list(value)
    else:
        return None
    for v in vals:
        if not isinstance(v, (float, int)) or isinstance(v, bool) or not math.isfinite(v):
            return None
    return vals


def single_unit_quaternion(value):
    """Return one valid quaternion normalised as 4 floats, else None."""
    vals = single_floats(value, 4)
    if vals is None:
        return None
    x, y, z, w = vals
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if norm < MIN_QUAT_NORM:
        return None
    return x / norm, y / norm, z / norm, w / norm


def single_rotation_matrix(value):
    """Return one valid rotation matrix as a row-major 9-list, else None."""
    if not isinstance(value, np.ndarray) or value.shape != (3, 3) or value.dtype != np.float64:
        return None
    m = value.ravel().tolist()
    return m if kernels.is_rotation(m, ORTHONORMAL_TOL) else None
