# SPDX-License-Identifier: Apache-2.0

"""Scalar kernels: one source for the numpy backend and the compiled (numba) one.

Every function here is written in the subset of Python that numba compiles
(floats, ints, bools, tuples, ``math``, loops, indexing) and calls only
functions of the kernel modules. CPython runs them as they are: that is the
reference ('numpy') backend, and also the single-rotation fast path of
:mod:`ik_node.core.rotations`. :mod:`ik_node.core.kernels.compile` compiles the very
same functions for the 'numba' backend, so each formula exists once and the
tests pin the compiled result to the interpreted one.

Conventions: 3-vectors are 3-tuples; 3x3 matrices are 9-tuples, row-major
(``m[3 * i + j]``); quaternions are ``(x, y, z, w)``. A table with one row
per joint is indexed ``table[j]``: tuples of tuples under CPython, 2-D arrays
when compiled. Outputs with one row per joint are written a row at a time
(``out[j] = (...)``): lists under CPython, 2-D arrays when compiled.
"""

import collections
import math

# A quaternion vector part shorter than this takes log's Taylor series:
# atan2(s, w) / s is exact for any normal s > 0, so the series only has to
# cover s == 0 and denormals; 1e-6 keeps the dropped x**6 / 7 term below 1e-36.
LOG_SERIES_BELOW = 1e-6
# exp() uses sin(t) / t, exact in floating point for t > 0; below this it
# switches to the series 1 - t^2/6 + t^4/120 (dropped term t^6/5040 < 1e-30).
EXP_SERIES_BELOW = 1e-4
# d exp / d u needs (cos t - sin t / t) / t^2, which loses about eps / t^2
# relative accuracy by cancellation; below 1e-2 (loss ~2e-12) the series
# -1/3 + t^2/30 - t^4/840 + t^6/45360 is used (dropped term ~t^8/3e6).
DEXP_SERIES_BELOW = 1e-2
# Rotation matrices must be orthonormal to this tolerance (max |R^T R - I|)
# to be accepted; looser than float32 round-off, tight enough to catch a
# scaled or sheared matrix.
ORTHONORMAL_TOL = 1e-6
# Below this rotation-error angle Jr^-1's coefficient uses its series
# 1/12 + t^2/720 + t^4/30240 (the closed form cancels catastrophically).
JR_SERIES_BELOW = 1e-3
# A vector shorter than this has no direction (unit3 leaves it unscaled).
DEGENERATE = 1e-12

IDENTITY9 = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
ZERO3 = (0.0, 0.0, 0.0)
ZERO6 = (0.0, 0.0, 0.0, 0.0, 0.0, 0.0)


# -- vectors and 3x3 matrices -----------------------------------------------------------

def vec3(v):
    """Return the first three entries of ``v`` as a 3-tuple."""
    return (v[0], v[1], v[2])


def mat9(m):
    """Return the first nine entries of ``m`` (a row-major 3x3) as a 9-tuple."""
    return (m[0], m[1], m[2], m[3], m[4], m[5], m[6], m[7], m[8])


def add3(a, b):
    """Return a + b."""
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


def sub3(a, b):
    """Return a - b."""
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


def scale3(k, a):
    """Return k a."""
    return (k * a[0], k * a[1], k * a[2])


def dot3(a, b):
    """Return a . b."""
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


def cross3(a, b):
    """Return a x b."""
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


def norm3(a):
    """Return |a|."""
    return math.sqrt(a[0] * a[0] + a[1] * a[1] + a[2] * a[2])


def unit3(v):
    """Return (v / |v|, |v|); v unchanged when |v| <= DEGENERATE (no direction)."""
    n = norm3(v)
    if n > DEGENERATE:
        return scale3(1.0 / n, v), n
    return vec3(v), n


def mat_vec(m, v):
    """Return m v."""
    return (m[0] * v[0] + m[1] * v[1] + m[2] * v[2], m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
            m[6] * v[0] + m[7] * v[1] + m[8] * v[2])


def mat_tvec(m, v):
    """Return m^T v."""
    return (m[0] * v[0] + m[3] * v[1] + m[6] * v[2], m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
            m[2] * v[0] + m[5] * v[1] + m[8] * v[2])


def mat_mul(a, b):
    """Return a b."""
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8], a[3] * b[0] + a[4] * b[3] + a[5] * b[6],
            a[3] * b[1] + a[4] * b[4] + a[5] * b[7], a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


def mat_mul_t(a, b):
    """Return a b^T."""
    return (a[0] * b[0] + a[1] * b[1] + a[2] * b[2], a[0] * b[3] + a[1] * b[4] + a[2] * b[5],
            a[0] * b[6] + a[1] * b[7] + a[2] * b[8], a[3] * b[0] + a[4] * b[1] + a[5] * b[2],
            a[3] * b[3] + a[4] * b[4] + a[5] * b[5], a[3] * b[6] + a[4] * b[7] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[1] + a[8] * b[2], a[6] * b[3] + a[7] * b[4] + a[8] * b[5],
            a[6] * b[6] + a[7] * b[7] + a[8] * b[8])


def transpose(a):
    """Return a^T."""
    return (a[0], a[3], a[6], a[1], a[4], a[7], a[2], a[5], a[8])


def rodrigues(ax, ay, az, angle):
    """Rotation by ``angle`` (rad) about the unit axis (ax, ay, az).

    R = I + sin(t) K + (1 - cos(t)) K^2 with K = [axis]x, written out.
    """
    s = math.sin(angle)
    c = 1.0 - math.cos(angle)
    return (1.0 - c * (ay * ay + az * az), -s * az + c * ax * ay, s * ay + c * ax * az,
            s * az + c * ax * ay, 1.0 - c * (ax * ax + az * az), -s * ax + c * ay * az,
            -s * ay + c * ax * az, s * ax + c * ay * az, 1.0 - c * (ax * ax + ay * ay))


def is_rotation(m, tol):
    """Return True when the 9-tuple m is orthonormal to ``tol`` with determinant +1.

    False for NaN entries too (every comparison with NaN fails).
    """
    for i in range(3):
        for j in range(i, 3):
            d = m[i] * m[j] + m[3 + i] * m[3 + j] + m[6 + i] * m[6 + j]
            if not abs(d - (1.0 if i == j else 0.0)) <= tol:
                return False
    c0 = m[4] * m[8] - m[5] * m[7]
    c1 = m[5] * m[6] - m[3] * m[8]
    c2 = m[3] * m[7] - m[4] * m[6]
    return m[0] * c0 + m[1] * c1 + m[2] * c2 > 0.0


def is_rigid_transform(rows, tol):
    """Return True when 4x4 ``rows`` is finite, ends in 0 0 0 1 and rotates rigidly."""
    for i in range(4):
        for j in range(4):
            if not math.isfinite(rows[i][j]):
                return False
    last = rows[3]
    if last[0] != 0.0 or last[1] != 0.0 or last[2] != 0.0 or last[3] != 1.0:
        return False
    return is_rotation(rotation_of_rows(rows), tol)


def rotation_of_rows(rows):
    """Return the 3x3 rotation block of a 4x4 ``rows`` as a 9-tuple."""
    a, b, c = rows[0], rows[1], rows[2]
    return (a[0], a[1], a[2], b[0], b[1], b[2], c[0], c[1], c[2])


def translation_of_rows(rows):
    """Return the translation column of a 4x4 ``rows`` as a 3-tuple."""
    return (rows[0][3], rows[1][3], rows[2][3])


# -- quaternions and the exponential map ------------------------------------------------

def quat_multiply(ax, ay, az, aw, bx, by, bz, bw):
    """Hamilton product a b of quaternions (x, y, z, w)."""
    return (aw * bx + ax * bw + ay * bz - az * by,
            aw * by - ax * bz + ay * bw + az * bx,
            aw * bz + ax * by - ay * bx + az * bw,
            aw * bw - ax * bx - ay * by - az * bz)


def quat_rotate(x, y, z, w, vx, vy, vz):
    """Rotate (vx, vy, vz) by the unit quaternion (x, y, z, w): q v q^-1, expanded."""
    tx, ty, tz = 2.0 * (y * vz - z * vy), 2.0 * (z * vx - x * vz), 2.0 * (x * vy - y * vx)
    return (vx + w * tx + y * tz - z * ty,
            vy + w * ty + z * tx - x * tz,
            vz + w * tz + x * ty - y * tx)


def quat_to_matrix(x, y, z, w):
    """Rotation matrix (9-tuple) of a unit quaternion."""
    xx, yy, zz, xy, xz, yz = x * x, y * y, z * z, x * y, x * z, y * z
    wx, wy, wz = w * x, w * y, w * z
    return (1.0 - 2.0 * (yy + zz), 2.0 * (xy - wz), 2.0 * (xz + wy),
            2.0 * (xy + wz), 1.0 - 2.0 * (xx + zz), 2.0 * (yz - wx),
            2.0 * (xz - wy), 2.0 * (yz + wx), 1.0 - 2.0 * (xx + yy))


def quat_from_matrix(m):
    """Return the unit quaternion (x, y, z, w), w >= 0, of the rotation matrix m (9-tuple).

    Shepperd's method: of 4 x^2 = 1 + m00 - m11 - m22, ..., 4 w^2 = 1 + trace,
    the largest (>= 1/4 of their sum, never near zero) is used and the other
    components come from sums of off-diagonal pairs. Ties go in x, y, z, w
    order, as np.argmax does in the batch path of rotations.
    """
    d0, d1, d2 = m[0], m[4], m[8]
    trace = d0 + d1 + d2
    best = max(d0, d1, d2, trace)
    if best == d0:
        x, y, z, w = 1.0 + d0 - d1 - d2, m[1] + m[3], m[2] + m[6], m[7] - m[5]
    elif best == d1:
        x, y, z, w = m[1] + m[3], 1.0 - d0 + d1 - d2, m[5] + m[7], m[2] - m[6]
    elif best == d2:
        x, y, z, w = m[2] + m[6], m[5] + m[7], 1.0 - d0 - d1 + d2, m[3] - m[1]
    else:
        x, y, z, w = m[7] - m[5], m[2] - m[6], m[3] - m[1], 1.0 + trace
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if w < 0.0:
        norm = -norm
    return x / norm, y / norm, z / norm, w / norm


def quat_log(x, y, z, w):
    """Half-angle log of a unit quaternion: atan2(|v|, w) / |v| * v (seed 000).

    Series near the identity; the log of -1 (|v| = 0, w < 0) is (pi, 0, 0).
    """
    s = math.sqrt(x * x + y * y + z * z)
    if s < LOG_SERIES_BELOW and w > 0.0:
        x2 = (s / w) ** 2
        k = (1.0 - x2 / 3.0 + x2 * x2 / 5.0) / w
    elif s > 0.0:
        k = math.atan2(s, w) / s
    else:
        return math.pi, 0.0, 0.0
    return k * x, k * y, k * z


def sinc(t):
    """Return sin(t) / t, by its series below EXP_SERIES_BELOW (t >= 0)."""
    if t < EXP_SERIES_BELOW:
        t2 = t * t
        return 1.0 - t2 / 6.0 + t2 * t2 / 120.0
    return math.sin(t) / t


def dexp_coefficient(t, s):
    """Return (cos t - s) / t^2 for s = sinc(t) (t >= 0), by its series below DEXP_SERIES_BELOW."""
    if t < DEXP_SERIES_BELOW:
        t2 = t * t
        return -1.0 / 3.0 + t2 / 30.0 - t2 * t2 / 840.0 + t2 * t2 * t2 / 45360.0
    return (math.cos(t) - s) / (t * t)


def quat_exp(x, y, z):
    """Half-angle exp of a log-quaternion u: (sin|u| / |u| u, cos|u|) (seed 000)."""
    t = math.sqrt(x * x + y * y + z * z)
    s = sinc(t)
    return s * x, s * y, s * z, math.cos(t)


def quat_dexp(x, y, z):
    """dq/du at u = (x, y, z) as 4 rows of 3: s I + c u u^T over -s u^T.

    With t = |u|, s = sin t / t and c = (cos t - s) / t^2 (seed 000's 4x3
    derivative, derived here: the seed's listing has index typos).
    """
    t = math.sqrt(x * x + y * y + z * z)
    s = sinc(t)
    c = dexp_coefficient(t, s)
    cx, cy, cz = c * x, c * y, c * z
    return ((s + cx * x, cx * y, cx * z),
            (cy * x, s + cy * y, cy * z),
            (cz * x, cz * y, s + cz * z),
            (-s * x, -s * y, -s * z))


def rotation_vector(m):
    """Rotation vector (axis times angle, |.| <= pi) of the rotation matrix m: 2 log(q)."""
    x, y, z, w = quat_from_matrix(m)
    ux, uy, uz = quat_log(x, y, z, w)
    return 2.0 * ux, 2.0 * uy, 2.0 * uz


def inverse_right_jacobian(phi):
    """Inverse right Jacobian of SO(3) at rotation vector phi (|phi| <= pi), a 9-tuple.

    ``Log(Exp(phi) Exp(d)) = phi + Jr^-1(phi) d + O(|d|^2)`` with
    ``Jr^-1 = I + [phi]/2 + (1/t^2 - (1 + cos t) / (2 t sin t)) [phi]^2``,
    ``t = |phi|``: the series below JR_SERIES_BELOW, finite up to t = pi.
    """
    x, y, z = phi[0], phi[1], phi[2]
    t2 = x * x + y * y + z * z
    t = math.sqrt(t2)
    if t < JR_SERIES_BELOW:
        c = 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0
    elif t < math.pi:
        c = 1.0 / t2 - (1.0 + math.cos(t)) / (2.0 * t * math.sin(t))
    else:
        c = 1.0 / t2  # (1 + cos t) / sin t -> 0 at a half turn
    # I + [phi]/2 + c [phi]^2, with [phi]^2 = phi phi^T - t^2 I.
    return (1.0 + c * (x * x - t2), -0.5 * z + c * x * y, 0.5 * y + c * x * z,
            0.5 * z + c * x * y, 1.0 + c * (y * y - t2), -0.5 * x + c * y * z,
            -0.5 * y + c * x * z, 0.5 * x + c * y * z, 1.0 + c * (z * z - t2))


# -- the pose error (the one definition) ----------------------------------------------

def pose_residual(target_r, target_p, r, p):
    """Residual of a pose (r, p) against a target, base frame: a 6-tuple.

    ``[p_t - p; 2 log(q_t q^-1)]`` (metres; radians): the rotation vector of
    R_t R^T, the shortest rotation (|.| <= pi) from the reached orientation
    to the target's, in the base frame.
    """
    rx, ry, rz = rotation_vector(mat_mul_t(target_r, r))
    return (target_p[0] - p[0], target_p[1] - p[1], target_p[2] - p[2], rx, ry, rz)


def pose_error(target_r, target_p, r, p):
    """Position error (m) and orientation error (rad, in [0, pi]) of (r, p) from a target."""
    e = pose_residual(target_r, target_p, r, p)
    return (math.sqrt(e[0] * e[0] + e[1] * e[1] + e[2] * e[2]),
            math.sqrt(e[3] * e[3] + e[4] * e[4] + e[5] * e[5]))


# -- serial chains --------------------------------------------------------------------

#: A chain's kinematics tables (one row per movable joint j, mimic ones included):
#: rot0[j] = R_pre (the URDF origin's rotation, 9), rot1[j] = R_pre K and
#: rot2[j] = R_pre K^2 (K = [axis]x): Rodrigues' formula folded with the origin,
#: so that a revolute joint's local rotation is rot0 + sin(t) rot1 + (1 - cos t) rot2;
#: trans[j] the origin's translation (3), axis[j] the unit axis in the joint
#: frame (3), prismatic[j], driver[j] the free joint it follows, mult[j] and
#: offset[j] (value = mult q[driver] + offset); tip_r (9) and tip_p (3) the
#: fixed transform from the last movable joint to the tip. Tuples of tuples
#: under CPython, arrays for the compiled kernels (Chain builds both).
ChainTables = collections.namedtuple(
    'ChainTables', 'rot0 rot1 rot2 trans axis prismatic driver mult offset tip_r tip_p')


def chain_frames(q, fk, frames):
    """Forward kinematics of a chain: each movable joint's frame, and the tip pose.

    Args:
        q: (n,) free joint values (rad or m).
        fk: the chain's ChainTables.
        frames: output, one row of 12 per movable joint: rotation (9,
            row-major) then origin (3) of joint j's frame after its motion,
            base frame. A revolute motion leaves the origin in place; joint
            j's axis in the base frame is that rotation times axis[j].

    Returns:
        (tip rotation 9-tuple, tip position 3-tuple), base frame.

    """
    r = IDENTITY9
    px, py, pz = 0.0, 0.0, 0.0
    for j in range(len(fk.axis)):
        theta = fk.mult[j] * q[fk.driver[j]] + fk.offset[j]
        a = fk.rot0[j]
        t = fk.trans[j]
        tx, ty, tz = t[0], t[1], t[2]
        if fk.prismatic[j]:
            ax = fk.axis[j]
            tx += theta * (a[0] * ax[0] + a[1] * ax[1] + a[2] * ax[2])
            ty += theta * (a[3] * ax[0] + a[4] * ax[1] + a[5] * ax[2])
            tz += theta * (a[6] * ax[0] + a[7] * ax[1] + a[8] * ax[2])
            local = mat9(a)
        else:
            s = math.sin(theta)
            c = 1.0 - math.cos(theta)
            b, k = fk.rot1[j], fk.rot2[j]
            local = (a[0] + s * b[0] + c * k[0], a[1] + s * b[1] + c * k[1],
                     a[2] + s * b[2] + c * k[2], a[3] + s * b[3] + c * k[3],
                     a[4] + s * b[4] + c * k[4], a[5] + s * b[5] + c * k[5],
                     a[6] + s * b[6] + c * k[6], a[7] + s * b[7] + c * k[7],
                     a[8] + s * b[8] + c * k[8])
        px, py, pz = (px + r[0] * tx + r[1] * ty + r[2] * tz,
                      py + r[3] * tx + r[4] * ty + r[5] * tz,
                      pz + r[6] * tx + r[7] * ty + r[8] * tz)
        r = mat_mul(r, local)
        frames[j] = (r[0], r[1], r[2], r[3], r[4], r[5], r[6], r[7], r[8], px, py, pz)
    return mat_mul(r, fk.tip_r), add3((px, py, pz), mat_vec(r, fk.tip_p))


def chain_jacobian(frames, fk, tip_p, n, columns):
    """Geometric Jacobian of the tip from the joint frames, one 6-row column per free joint.

    Column k (``columns[k]``) is [linear velocity of the tip origin; angular
    velocity] per unit speed of free joint k, base frame: ``z x (p_tip - o)``
    over ``z`` for a revolute joint (axis z through o, seed 004), ``z`` over 0
    for a prismatic one; mimic joints add ``mult`` times theirs to their
    leader's column.
    """
    for k in range(n):
        columns[k] = ZERO6
    for j in range(len(fk.axis)):
        f = frames[j]
        ax = fk.axis[j]
        zx = f[0] * ax[0] + f[1] * ax[1] + f[2] * ax[2]
        zy = f[3] * ax[0] + f[4] * ax[1] + f[5] * ax[2]
        zz = f[6] * ax[0] + f[7] * ax[1] + f[8] * ax[2]
        k = fk.driver[j]
        g = fk.mult[j]
        c = columns[k]
        if fk.prismatic[j]:
            columns[k] = (c[0] + g * zx, c[1] + g * zy, c[2] + g * zz, c[3], c[4], c[5])
        else:
            dx, dy, dz = tip_p[0] - f[9], tip_p[1] - f[10], tip_p[2] - f[11]
            columns[k] = (c[0] + g * (zy * dz - zz * dy), c[1] + g * (zz * dx - zx * dz),
                          c[2] + g * (zx * dy - zy * dx), c[3] + g * zx, c[4] + g * zy,
                          c[5] + g * zz)
