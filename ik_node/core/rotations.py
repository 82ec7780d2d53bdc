# SPDX-License-Identifier: Apache-2.0

"""Quaternions, rotation matrices and the exponential map, in pure numpy.

Conventions (stated once, pinned by tests):

* Quaternions are float64 arrays ordered ``(x, y, z, w)`` -- the order of
  ``geometry_msgs/Quaternion`` -- with the Hamilton product.
* Rotation matrices act on column vectors, ``p' = R p``, in right-handed
  frames (REP 103).
* ``log`` and ``exp`` use the half-angle definition of the seed article on
  log-quaternion IK: for a unit quaternion ``q = (v, w)``,
  ``theta = atan2(|v|, w)`` (the half rotation angle, in [0, pi]) and
  ``log(q) = theta / sin(theta) * v``; ``exp(u) = (sin|u| / |u| * u, cos|u|)``.
  The rotation vector (axis times angle) is therefore ``2 * log(q)``.
* Yaw-pitch-roll is the URDF / ROS convention: ``R = Rz(yaw) Ry(pitch) Rx(roll)``
  (roll about the fixed x axis first). The seed article uses DirectX's
  left-handed, row-vector ``Rz Rx Ry`` order; we do not.

Every function accepts a leading batch shape: ``(..., 4)`` quaternions,
``(..., 3)`` vectors, ``(..., 3, 3)`` matrices. Public functions validate their
input and raise :class:`~ik_node.core.errors.InvalidInputError` (or
:class:`~ik_node.core.errors.ZeroNormError`) naming what was received; names
starting with an underscore are the unchecked fast twins for inner loops and
assume unit-norm, finite input of the right shape.
"""

from typing import Tuple

from ik_node.core.errors import InvalidInputError, ZeroNormError
from ik_node.core.kernels import base as kernels
from ik_node.core.kernels.base import DEXP_SERIES_BELOW, EXP_SERIES_BELOW, LOG_SERIES_BELOW
# What is checked at the public edge (also reached from here: rotations.check_quaternion).
from ik_node.core.rotation_inputs import as_float_array, check_quaternion, \
    check_rotation_matrix, check_vector3, MIN_QUAT_NORM, single_floats, \
    single_rotation_matrix, single_unit_quaternion
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# The series thresholds of log, exp and d exp / d u, and the orthonormality
# tolerance, are the kernels' (ik_node.core.kernels.base, where each is explained):
# the single-rotation path below runs those kernels, the batch path uses the
# same thresholds.

# slerp falls back to normalised lerp when the two keys are this close
# (|dot| above 1 - 1e-12 means an angle below ~1.4e-6 rad), where
# sin(angle) would be divided by a number near zero.
SLERP_LINEAR_ABOVE = 1.0 - 1e-12


# ---------------------------------------------------------------------------
# Algebra
# ---------------------------------------------------------------------------

def _multiply(a: FloatArray, b: FloatArray) -> FloatArray:
    ax, ay, az, aw = a[..., 0], a[..., 1], a[..., 2], a[..., 3]
    bx, by, bz, bw = b[..., 0], b[..., 1], b[..., 2], b[..., 3]
    return np.stack((
        aw * bx + ax * bw + ay * bz - az * by,
        aw * by - ax * bz + ay * bw + az * bx,
        aw * bz + ax * by - ay * bx + az * bw,
        aw * bw - ax * bx - ay * by - az * bz,
    ), axis=-1)


def multiply(a, b) -> FloatArray:
    """Multiply quaternions: Hamilton product ``a * b`` (``b`` acts first).

    Args:
        a, b: (..., 4) quaternions (x, y, z, w); broadcast against each other.
            Not normalised: the product of the inputs as given.

    Returns:
        (..., 4) product.

    """
    sa, sb = single_floats(a, 4), single_floats(b, 4)
    if sa is not None and sb is not None:
        return np.array(kernels.quat_multiply(*sa, *sb))
    return _multiply(as_float_array(a, 'a', (4,)), as_float_array(b, 'b', (4,)))


def conjugate(q) -> FloatArray:
    """Conjugate (..., 4) quaternion(s): negate x, y and z, keep w."""
    arr = as_float_array(q, 'q', (4,))
    return arr * np.array([-1.0, -1.0, -1.0, 1.0])


def inverse(q) -> FloatArray:
    """Return the multiplicative inverse conj(q) / |q|^2 of (..., 4) quaternion(s).

    Raises:
        ZeroNormError: |q| below ``MIN_QUAT_NORM``.

    """
    arr = as_float_array(q, 'q', (4,))
    norm_sq = np.sum(arr * arr, axis=-1, keepdims=True)
    if np.any(norm_sq < MIN_QUAT_NORM ** 2):
        raise ZeroNormError('q: cannot invert a quaternion of norm below '
                            f'{MIN_QUAT_NORM:g} (received {float(np.sqrt(np.min(norm_sq))):.3g})')
    return arr * np.array([-1.0, -1.0, -1.0, 1.0]) / norm_sq


def normalize(q) -> FloatArray:
    """Return q / |q| for (..., 4) quaternion(s); raises ZeroNormError near 0."""
    single = single_unit_quaternion(q)
    if single is not None:
        return np.array(single)
    return check_quaternion(q)


def _rotate(q: FloatArray, v: FloatArray) -> FloatArray:
    # v' = v + 2 w (u x v) + 2 u x (u x v), u = vector part: q v q^-1 expanded.
    u = q[..., :3]
    t = 2.0 * np.cross(u, v)
    return v + q[..., 3:4] * t + np.cross(u, t)


def rotate(q, v) -> FloatArray:
    """Rotate vector(s) by quaternion(s): ``q v q^-1``.

    Args:
        q: (..., 4) quaternion(s) (x, y, z, w); normalised here.
        v: (..., 3) vector(s); broadcast against ``q``.

    Returns:
        (..., 3) rotated vector(s), equal to ``quaternion_to_matrix(q) @ v``.

    """
    sq, sv = single_unit_quaternion(q), single_floats(v, 3)
    if sq is not None and sv is not None:
        return np.array(kernels.quat_rotate(*sq, *sv))
    return _rotate(check_quaternion(q), check_vector3(v))


# ---------------------------------------------------------------------------
# Matrices
# ---------------------------------------------------------------------------

def _to_matrix(q: FloatArray) -> FloatArray:
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    xx, yy, zz = x * x, y * y, z * z
    xy, xz, yz = x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    out = np.empty(q.shape[:-1] + (3, 3))
    out[..., 0, 0] = 1.0 - 2.0 * (yy + zz)
    out[..., 0, 1] = 2.0 * (xy - wz)
    out[..., 0, 2] = 2.0 * (xz + wy)
    out[..., 1, 0] = 2.0 * (xy + wz)
    out[..., 1, 1] = 1.0 - 2.0 * (xx + zz)
    out[..., 1, 2] = 2.0 * (yz - wx)
    out[..., 2, 0] = 2.0 * (xz - wy)
    out[..., 2, 1] = 2.0 * (yz + wx)
    out[..., 2, 2] = 1.0 - 2.0 * (xx + yy)
    return out


def quaternion_to_matrix(q) -> FloatArray:
    """Convert quaternion(s) to rotation matrices.

    Args:
        q: (..., 4) quaternion(s) (x, y, z, w); normalised here.

    Returns:
        (..., 3, 3) rotation matrices acting on column vectors.

    """
    single = single_unit_quaternion(q)
    if single is not None:
        return np.array(kernels.quat_to_matrix(*single)).reshape(3, 3)
    return _to_matrix(check_quaternion(q))


def _from_matrix(matrix: FloatArray) -> FloatArray:
    # Shepperd's method: of the four expressions 4 x^2 = 1 + R00 - R11 - R22,
    # ..., 4 w^2 = 1 + trace, take the largest (>= 1/4 of the sum, so never
    # near zero) and recover the other components from off-diagonal sums.
    m = matrix
    d0, d1, d2 = m[..., 0, 0], m[..., 1, 1], m[..., 2, 2]
    s01, s10 = m[..., 0, 1], m[..., 1, 0]
    s02, s20 = m[..., 0, 2], m[..., 2, 0]
    s12, s21 = m[..., 1, 2], m[..., 2, 1]
    batch = m.shape[:-2]
    cand = np.empty((int(np.prod(batch, dtype=np.int64)), 4, 4))
    flat = [a.reshape(-1) for a in (d0, d1, d2, s01, s10, s02, s20, s12, s21)]
    d0, d1, d2, s01, s10, s02, s20, s12, s21 = flat
    cand[:, 0, 0] = 1.0 + d0 - d1 - d2
    cand[:, 1, 1] = 1.0 - d0 + d1 - d2
    cand[:, 2, 2] = 1.0 - d0 - d1 + d2
    cand[:, 3, 3] = 1.0 + d0 + d1 + d2
    cand[:, 0, 1] = cand[:, 1, 0] = s01 + s10
    cand[:, 0, 2] = cand[:, 2, 0] = s02 + s20
    cand[:, 1, 2] = cand[:, 2, 1] = s12 + s21
    cand[:, 0, 3] = cand[:, 3, 0] = s21 - s12
    cand[:, 1, 3] = cand[:, 3, 1] = s02 - s20
    cand[:, 2, 3] = cand[:, 3, 2] = s10 - s01
    best = np.argmax(np.diagonal(cand, axis1=1, axis2=2), axis=-1)
    q = cand[np.arange(cand.shape[0]), best].reshape(batch + (4,))
    q /= np.linalg.norm(q, axis=-1, keepdims=True)
    # Canonical sign: w >= 0 (ties at w == 0 keep Shepperd's choice).
    return np.where(q[..., 3:4] < 0.0, -q, q)


def matrix_to_quaternion(matrix) -> FloatArray:
    """Convert rotation matrices to unit quaternions, robust for every trace sign.

    Args:
        matrix: (..., 3, 3) rotation matrices (checked orthonormal, det +1).

    Returns:
        (..., 4) unit quaternions (x, y, z, w) with w >= 0.

    """
    single = single_rotation_matrix(matrix)
    if single is not None:
        return np.array(kernels.quat_from_matrix(single))
    return _from_matrix(check_rotation_matrix(matrix, 'matrix'))


# ---------------------------------------------------------------------------
# Axis-angle, exp and log
# ---------------------------------------------------------------------------

def quaternion_to_axis_angle(q) -> Tuple[FloatArray, FloatArray]:
    """Convert quaternion(s) to a unit axis and an angle.

    Args:
        q: (..., 4) quaternion(s) (x, y, z, w); normalised here.

    Returns:
        axis: (..., 3) unit axes; (1, 0, 0) where the angle is 0 (any axis
            would do, this one is fixed for determinism).
        angle: (...) angles in [0, pi] radians (the shortest rotation: q and
            -q give the same result).

    """
    qn = check_quaternion(q)
    qn = np.where(qn[..., 3:4] < 0.0, -qn, qn)
    s = np.linalg.norm(qn[..., :3], axis=-1)
    angle = 2.0 * np.arctan2(s, qn[..., 3])
    zero = s == 0.0
    axis = qn[..., :3] / np.where(zero, 1.0, s)[..., None]
    axis = np.where(zero[..., None], np.array([1.0, 0.0, 0.0]), axis)
    return axis, angle


def axis_angle_to_quaternion(axis, angle) -> FloatArray:
    """Build quaternion(s) rotating by ``angle`` radians about ``axis``.

    Args:
        axis: (..., 3) axes, any non-zero length (normalised here).
        angle: (...) angles in radians, broadcast against ``axis[..., 0]``.

    Returns:
        (..., 4) unit quaternions (x, y, z, w) = (sin(a/2) n, cos(a/2)).

    Raises:
        ZeroNormError: an axis of length below ``MIN_QUAT_NORM``.

    """
    ax = check_vector3(axis, 'axis')
    ang = as_float_array(angle, 'angle', ())
    length = np.linalg.norm(ax, axis=-1, keepdims=True)
    if np.any(length < MIN_QUAT_NORM):
        raise ZeroNormError(f'axis: length {float(np.min(length)):.3g} is too small '
                            'to define a rotation axis')
    half = 0.5 * ang[..., None]
    return np.concatenate((np.sin(half) * ax / length, np.cos(half)), axis=-1)


def _sinc(t: FloatArray) -> FloatArray:
    """sin(t) / t for t >= 0, with the series near 0."""
    t2 = t * t
    series = 1.0 - t2 / 6.0 + t2 * t2 / 120.0
    safe = np.where(t < EXP_SERIES_BELOW, 1.0, t)
    return np.where(t < EXP_SERIES_BELOW, series, np.sin(safe) / safe)


def _exp(u: FloatArray) -> FloatArray:
    t = np.linalg.norm(u, axis=-1, keepdims=True)
    return np.concatenate((_sinc(t) * u, np.cos(t)), axis=-1)


def exp(u) -> FloatArray:
    """Map a log-quaternion to a unit quaternion (half-angle exponential map).

    ``exp(u) = (sin|u| / |u| * u, cos|u|)``: a rotation by ``2 |u|`` radians
    about ``u / |u|``. Exact near ``u = 0`` (Taylor series of sin t / t).

    Args:
        u: (..., 3) log-quaternion(s) (half the rotation vector), radians.

    Returns:
        (..., 4) unit quaternion(s) (x, y, z, w).

    """
    single = single_floats(u, 3)
    if single is not None:
        return np.array(kernels.quat_exp(*single))
    return _exp(check_vector3(u, 'u'))


def _log(q: FloatArray) -> FloatArray:
    v = q[..., :3]
    w = q[..., 3]
    s = np.linalg.norm(v, axis=-1)
    # Near the identity (s tiny, w ~ 1): the series of atan(s / w) / s,
    # (1 / w) (1 - x^2 / 3 + x^4 / 5) with x = s / w.
    near_identity = (s < LOG_SERIES_BELOW) & (w > 0.0)
    safe_w = np.where(near_identity, w, 1.0)
    x2 = (s / safe_w) ** 2
    series = (1.0 - x2 / 3.0 + x2 * x2 / 5.0) / safe_w
    # Elsewhere atan2(s, w) / s is exact, also for tiny s with w < 0 (a
    # rotation near a full turn: |log| -> pi along v's direction).
    safe_s = np.where(s > 0.0, s, 1.0)
    scale = np.where(near_identity, series, np.arctan2(s, w) / safe_s)
    out = scale[..., None] * v
    # s == 0 and w < 0 (q = -1): the direction is undefined; return
    # (pi, 0, 0), the limit along +x, so that exp(log(q)) == q still holds.
    full_turn = (s == 0.0) & (w <= 0.0)
    if np.any(full_turn):
        out = np.where(full_turn[..., None], np.array([np.pi, 0.0, 0.0]), out)
    return out


def log(q) -> FloatArray:
    """Map a unit quaternion to its log-quaternion (half-angle logarithm).

    ``log(q) = theta / sin(theta) * (x, y, z)``, ``theta = atan2(|xyz|, w)``
    in [0, pi]. The sign of ``q`` is kept (``|log(q)| > pi / 2`` when
    ``w < 0``), so ``exp(log(q)) == q``; use ``log(q if w >= 0 else -q)``
    for the shortest rotation. Exact near the identity (series); well
    behaved through the half-turn ``w = 0``.

    Args:
        q: (..., 4) quaternion(s) (x, y, z, w); normalised here.

    Returns:
        (..., 3) log-quaternion(s), |u| in [0, pi]; twice this is the
        rotation vector (axis times angle, radians).

    """
    single = single_unit_quaternion(q)
    if single is not None:
        return np.array(kernels.quat_log(*single))
    return _log(check_quaternion(q))


def _dexp(u: FloatArray) -> FloatArray:
    t = np.linalg.norm(u, axis=-1)
    small = t < DEXP_SERIES_BELOW
    safe = np.where(small, 1.0, t)
    sinc = _sinc(t)
    t2 = t * t
    series = -1.0 / 3.0 + t2 / 30.0 - t2 * t2 / 840.0 + t2 * t2 * t2 / 45360.0
    coupling = np.where(small, series, (np.cos(safe) - np.sin(safe) / safe) / (safe * safe))
    out = np.empty(u.shape[:-1] + (4, 3))
    out[..., :3, :] = coupling[..., None, None] * (u[..., :, None] * u[..., None, :])
    out[..., 0, 0] += sinc
    out[..., 1, 1] += sinc
    out[..., 2, 2] += sinc
    out[..., 3, :] = -sinc[..., None] * u
    return out


def dexp(u) -> FloatArray:
    """Differentiate the exponential map: the 4x3 Jacobian of q with respect to u.

    With ``t = |u|``, ``s = sin t / t`` and ``c = (cos t - s) / t^2``:
    ``d(x, y, z) / d u = s I + c u u^T`` and ``d w / d u = -s u^T``.
    (Derived here from ``exp``; the seed article's listing of this
    derivative has index typos.) Exact at and near ``u = 0`` (series).

    Args:
        u: (..., 3) log-quaternion(s).

    Returns:
        (..., 4, 3) Jacobian; row i is quaternion component (x, y, z, w)[i],
        column j is u[j].

    """
    single = single_floats(u, 3)
    if single is not None:
        return np.array(kernels.quat_dexp(*single))
    return _dexp(check_vector3(u, 'u'))


def _drot_dquat(q: FloatArray) -> FloatArray:
    x, y, z, w = q[..., 0], q[..., 1], q[..., 2], q[..., 3]
    zero = np.zeros_like(x)
    # d/dx, d/dy, d/dz, d/dw of the entries of _to_matrix, row-major.
    dx = (zero, y, z, y, -2 * x, -w, z, w, -2 * x)
    dy = (-2 * y, x, w, x, zero, z, -w, z, -2 * y)
    dz = (-2 * z, -w, x, w, -2 * z, y, x, y, zero)
    dw = (zero, -z, y, z, zero, -x, -y, x, zero)
    out = np.empty(q.shape[:-1] + (3, 3, 4))
    for k, parts in enumerate((dx, dy, dz, dw)):
        out[..., k] = 2.0 * np.stack(parts, axis=-1).reshape(q.shape[:-1] + (3, 3))
    return out


def drot_dquat(q) -> FloatArray:
    """Differentiate the rotation matrix with respect to the quaternion.

    The derivative of the unit-quaternion polynomial of
    :func:`quaternion_to_matrix` (``R00 = 1 - 2 (y^2 + z^2)``, ...), as the
    seed article uses it. It equals the derivative of ``R(q / |q|)`` for
    directions tangent to the unit sphere (those of ``dexp``), which is how
    the IK chain rule ``dR / du = sum_k dR / dq_k dq_k / du`` applies it.

    Args:
        q: (..., 4) quaternion(s) (x, y, z, w); normalised here.

    Returns:
        (..., 3, 3, 4) array: ``out[..., :, :, k] = dR / dq_k``.

    """
    return _drot_dquat(check_quaternion(q))


# ---------------------------------------------------------------------------
# Interpolation and integration
# ---------------------------------------------------------------------------

def slerp(q0, q1, t) -> FloatArray:
    """Interpolate two orientations spherically (slerp) along the shortest arc.

    Args:
        q0, q1: (..., 4) quaternions (x, y, z, w); normalised here. ``q1`` is
            flipped to ``-q1`` when that is nearer ``q0`` (shortest path).
        t: (...) interpolation parameter(s), 0 gives q0, 1 gives q1 (up to
            sign); values outside [0, 1] extrapolate along the same great arc.

    Returns:
        (..., 4) unit quaternions; the angular speed in t is constant.

    """
    a = check_quaternion(q0, 'q0')
    b = check_quaternion(q1, 'q1')
    tt = as_float_array(t, 't', ())[..., None]
    dot = np.sum(a * b, axis=-1, keepdims=True)
    b = np.where(dot < 0.0, -b, b)
    dot = np.abs(dot)
    linear = dot > SLERP_LINEAR_ABOVE
    angle = np.arccos(np.clip(dot, -1.0, 1.0))
    sin_angle = np.where(linear, 1.0, np.sin(angle))
    w0 = np.where(linear, 1.0 - tt, np.sin((1.0 - tt) * angle) / sin_angle)
    w1 = np.where(linear, tt, np.sin(tt * angle) / sin_angle)
    out = w0 * a + w1 * b
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


def integrate_angular_velocity(q, omega, dt: float, frame: str = 'world',
                               method: str = 'exact') -> FloatArray:
    """Advance an orientation by a constant angular velocity over ``dt``.

    Args:
        q: (..., 4) orientation(s) (x, y, z, w) of the body in the world.
        omega: (..., 3) angular velocity, rad/s, in the world frame
            (``frame='world'``, multiplies on the left) or the body frame
            (``frame='body'``, multiplies on the right).
        dt: time step, seconds.
        method: ``'exact'`` -- ``exp(omega dt / 2) * q`` (exact for constant
            omega); ``'first_order'`` -- ``(omega dt / 2, 1) * q`` then
            renormalised (the seed's update; error O(dt^2)).

    Returns:
        (..., 4) unit quaternion(s) at ``t + dt``.

    Raises:
        InvalidInputError: unknown ``frame`` or ``method``, non-finite input.

    """
    if frame not in ('world', 'body'):
        raise InvalidInputError(f"frame: expected 'world' or 'body', received {frame!r}")
    if method not in ('exact', 'first_order'):
        raise InvalidInputError(
            f"method: expected 'exact' or 'first_order', received {method!r}")
    step_s = float(as_float_array(dt, 'dt', ()))
    qn = check_quaternion(q)
    half = 0.5 * step_s * check_vector3(omega, 'omega')
    if method == 'exact':
        step = _exp(half)
    else:
        step = np.concatenate((half, np.ones(half.shape[:-1] + (1,))), axis=-1)
    out = _multiply(step, qn) if frame == 'world' else _multiply(qn, step)
    return out / np.linalg.norm(out, axis=-1, keepdims=True)


# ---------------------------------------------------------------------------
# Yaw-pitch-roll (URDF rpy)
# ---------------------------------------------------------------------------

# Below this |cos(pitch)| the yaw and roll axes are aligned (gimbal lock):
# only yaw + roll (or yaw - roll) is defined, and roll is set to 0.
GIMBAL_LOCK_BELOW = 1e-9


def ypr_to_matrix(yaw, pitch, roll) -> FloatArray:
    """Build rotation matrices ``Rz(yaw) Ry(pitch) Rx(roll)`` (URDF ``rpy``).

    Args:
        yaw, pitch, roll: (...) angles in radians, broadcast together.

    Returns:
        (..., 3, 3) rotation matrices.

    """
    y = as_float_array(yaw, 'yaw', ())
    p = as_float_array(pitch, 'pitch', ())
    r = as_float_array(roll, 'roll', ())
    y, p, r = np.broadcast_arrays(y, p, r)
    cy, sy, cp, sp, cr, sr = np.cos(y), np.sin(y), np.cos(p), np.sin(p), np.cos(r), np.sin(r)
    out = np.empty(y.shape + (3, 3))
    out[..., 0, 0] = cy * cp
    out[..., 0, 1] = cy * sp * sr - sy * cr
    out[..., 0, 2] = cy * sp * cr + sy * sr
    out[..., 1, 0] = sy * cp
    out[..., 1, 1] = sy * sp * sr + cy * cr
    out[..., 1, 2] = sy * sp * cr - cy * sr
    out[..., 2, 0] = -sp
    out[..., 2, 1] = cp * sr
    out[..., 2, 2] = cp * cr
    return out


def matrix_to_ypr(matrix) -> Tuple[FloatArray, FloatArray, FloatArray]:
    """Convert rotation matrices to yaw, pitch, roll (inverse of ypr_to_matrix).

    Args:
        matrix: (..., 3, 3) rotation matrices (checked).

    Returns:
        yaw in (-pi, pi], pitch in [-pi/2, pi/2], roll in (-pi, pi], radians.
        At gimbal lock (|cos pitch| below ``GIMBAL_LOCK_BELOW``) roll is 0
        and yaw carries the whole rotation about the aligned axes.

    """
    m = check_rotation_matrix(matrix, 'matrix')
    cos_p = np.hypot(m[..., 0, 0], m[..., 1, 0])
    # atan2 rather than asin(-R20): asin loses half the digits near +-pi/2.
    pitch = np.arctan2(-m[..., 2, 0], cos_p)
    locked = cos_p < GIMBAL_LOCK_BELOW
    yaw = np.where(locked, np.arctan2(-m[..., 0, 1], m[..., 1, 1]),
                   np.arctan2(m[..., 1, 0], m[..., 0, 0]))
    roll = np.where(locked, 0.0, np.arctan2(m[..., 2, 1], m[..., 2, 2]))
    return yaw, pitch, roll
