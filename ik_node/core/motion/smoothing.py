# SPDX-License-Identifier: Apache-2.0

"""Cubic interpolation in time of positions and orientations (seed 002), Godot-compatible.

``cubic_interpolate_in_time`` is the non-uniform Catmull-Rom rule of Godot 4
(Barry-Goldman pyramid), with Godot's argument meaning and zero-span handling:
times are relative to ``from`` (``pre_t <= 0 < to_t <= post_t``); a zero
``pre_t`` makes the curve leave ``from`` at rest, a zero ``post_t - to_t``
makes it arrive at ``to`` at rest.

``spherical_cubic_interpolate_in_time`` is the article's implementation 3
(Godot's ``Quaternion.spherical_cubic_interpolate_in_time``): the four keys
are brought to one hemisphere, interpolated by the scalar rule in log space
relative to ``from`` and relative to ``to``, mapped back by exp and blended by
slerp with the weight. Implementations 1, 2 and 4 of the article are kept in
``SPHERICAL_VARIANTS`` for the benchmark. Quaternions are (x, y, z, w); our
log is the half-angle one, Godot's the full-angle one: the rule is linear in
the logs, so both give the same rotations (results agree up to the sign of q).
"""

import math
from typing import Optional

from ik_node.core import rotations as rot
from ik_node.core.kernels import base as kernels
from ik_node.core.rotation_inputs import single_unit_quaternion
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def _lerp(a, b, t):
    return a + (b - a) * t


def _ratio(num, den, default):
    """Divide num by den, giving ``default`` where den == 0 (Godot's zero-span rule)."""
    zero = den == 0
    return np.where(zero, default, num / np.where(zero, 1.0, den))


def cubic_interpolate_in_time(from_, to, pre, post, weight, to_t, pre_t, post_t):
    """Interpolate between ``from_`` and ``to`` with non-uniform key times (Godot 4).

    Args:
        from_, to, pre, post: values at the keys (scalars or arrays, broadcast).
        weight: position in the segment, 0 at ``from_``, 1 at ``to``.
        to_t, pre_t, post_t: key times relative to ``from_``, seconds
            (``pre_t <= 0 < to_t <= post_t``; zero spans are allowed).

    Returns:
        The interpolated value(s), broadcast shape of the inputs.

    """
    pre_t = np.asarray(pre_t, dtype=np.float64)
    to_t = np.asarray(to_t, dtype=np.float64)
    post_t = np.asarray(post_t, dtype=np.float64)
    t = _lerp(0.0, to_t, np.asarray(weight, dtype=np.float64))
    a1 = _lerp(pre, from_, _ratio(t - pre_t, -pre_t, 0.0))
    a2 = _lerp(from_, to, _ratio(t, to_t, 0.5))
    a3 = _lerp(to, post, _ratio(t - to_t, post_t - to_t, 1.0))
    b1 = _lerp(a1, a2, _ratio(t - pre_t, to_t - pre_t, 0.0))
    b2 = _lerp(a2, a3, _ratio(t, post_t, 1.0))
    return _lerp(b1, b2, _ratio(t, to_t, 0.5))


def _cubic1(f, t_, pre, post, w, to_t, pre_t, post_t):
    """Plain-float twin of cubic_interpolate_in_time (same zero-span rules)."""
    t = to_t * w
    a1 = pre + (f - pre) * (0.0 if pre_t == 0 else (t - pre_t) / -pre_t)
    a2 = f + (t_ - f) * (0.5 if to_t == 0 else t / to_t)
    a3 = t_ + (post - t_) * (1.0 if post_t - to_t == 0 else (t - to_t) / (post_t - to_t))
    b1 = a1 + (a2 - a1) * (0.0 if to_t - pre_t == 0 else (t - pre_t) / (to_t - pre_t))
    b2 = a2 + (a3 - a2) * (1.0 if post_t == 0 else t / post_t)
    return b1 + (b2 - b1) * (0.5 if to_t == 0 else t / to_t)


def cubic_interpolate_vector3(from_, to, pre, post, weight, to_t, pre_t, post_t):
    """cubic_interpolate_in_time for one 3-vector per key, in plain floats (fast path)."""
    return np.array([_cubic1(from_[i], to[i], pre[i], post[i], weight, to_t, pre_t, post_t)
                     for i in range(3)])


def _spherical1(qf, qt, qpre, qpost, w, to_t, pre_t, post_t):
    """Plain-float twin of spherical_cubic_interpolate_in_time for one set of keys."""
    return spherical_at(spherical_keys(qf, qt, qpre, qpost), w, to_t, pre_t, post_t)


def segment_keys(q_from, q_to, q_pre, q_post) -> Optional[tuple]:
    """Return one segment's spherical_keys as spherical_cubic_interpolate_in_time sees them.

    (4,) quaternions (x, y, z, w), normalised first as it does; None when one
    is not a single valid quaternion (then call it: it raises the reason).
    """
    singles = [single_unit_quaternion(q) for q in (q_from, q_to, q_pre, q_post)]
    if any(v is None for v in singles):
        return None
    return spherical_keys(*singles)


def spherical_keys(qf, qt, qpre, qpost) -> tuple:
    """Return what _spherical1 needs of four keys at any weight (a segment's; plain floats).

    The keys normalised and phase-aligned (Godot's rules), and their logs
    relative to ``from`` and to ``to`` (each sample of a segment repeated
    them: 6 quaternion products and logs).
    """
    keys = []
    for q in (qf, qt, qpre, qpost):
        x, y, z, s = q
        n = math.sqrt(x * x + y * y + z * z + s * s)
        if s < 0.0:
            n = -n
        keys.append((x / n, y / n, z / n, s / n))
    f, t, pre, post = keys

    def dot(a, b):
        return a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]

    def neg(a):
        return (-a[0], -a[1], -a[2], -a[3])

    def conj(a):
        return (-a[0], -a[1], -a[2], a[3])

    if math.copysign(1.0, dot(f, pre)) < 0:
        pre = neg(pre)
    flip2 = math.copysign(1.0, dot(f, t)) < 0
    if flip2:
        t = neg(t)
    d3 = dot(t, post)
    if (d3 <= 0.0) if flip2 else (math.copysign(1.0, d3) < 0):
        post = neg(post)

    def rel(base, q):
        return kernels.quat_log(*kernels.quat_multiply(*conj(base), *q))

    return f, t, (rel(f, t), rel(f, pre), rel(f, post)), (rel(t, f), rel(t, pre), rel(t, post))


def spherical_at(prepared: tuple, w, to_t, pre_t, post_t):
    """Return (4,) the spherical cubic of keys ``prepared`` (spherical_keys) at weight w."""
    f, t, from_f, from_t = prepared

    def cubic3(a, b, c, d):
        return [_cubic1(a[i], b[i], c[i], d[i], w, to_t, pre_t, post_t) for i in range(3)]

    zero = (0.0, 0.0, 0.0)
    ln = cubic3(zero, *from_f)
    q1 = kernels.quat_multiply(*f, *kernels.quat_exp(*ln))
    ln = cubic3(from_t[0], zero, from_t[1], from_t[2])
    q2 = kernels.quat_multiply(*t, *kernels.quat_exp(*ln))
    return np.array(_slerp1(q1, q2, w))


def _slerp1(a, b, w):
    """Plain-float twin of rotations.slerp for unit quaternions (shortest arc)."""
    d = a[0] * b[0] + a[1] * b[1] + a[2] * b[2] + a[3] * b[3]
    if d < 0.0:
        b, d = (-b[0], -b[1], -b[2], -b[3]), -d
    if d > rot.SLERP_LINEAR_ABOVE:
        k0, k1 = 1.0 - w, w
    else:
        angle = math.acos(min(d, 1.0))
        s = math.sin(angle)
        k0, k1 = math.sin((1.0 - w) * angle) / s, math.sin(w * angle) / s
    out = [k0 * a[i] + k1 * b[i] for i in range(4)]
    n = math.sqrt(sum(v * v for v in out))
    return tuple(v / n for v in out)


def _dot(a, b):
    return np.sum(a * b, axis=-1, keepdims=True)


def _aligned(q_from, q_to, q_pre, q_post):
    """Godot's phase alignment: canonical signs, then the shortest-path flips."""
    keys = [rot.check_quaternion(q, name) for q, name in
            ((q_from, 'q_from'), (q_to, 'q_to'), (q_pre, 'q_pre'), (q_post, 'q_post'))]
    f, t, pre, post = (np.where(k[..., 3:4] < 0.0, -k, k) for k in keys)
    pre = np.where(np.signbit(_dot(f, pre)), -pre, pre)
    flip2 = np.signbit(_dot(f, t))
    t = np.where(flip2, -t, t)
    flip3 = np.where(flip2, _dot(t, post) <= 0.0, np.signbit(_dot(t, post)))
    post = np.where(flip3, -post, post)
    return f, t, pre, post


def _relative_log(base, q):
    return rot._log(rot._multiply(base * np.array([-1.0, -1.0, -1.0, 1.0]), q))


def _cubic_logs(ln_from, ln_to, ln_pre, ln_post, weight, to_t, pre_t, post_t):
    w = np.asarray(weight, dtype=np.float64)[..., None]
    return cubic_interpolate_in_time(ln_from, ln_to, ln_pre, ln_post, w,
                                     np.asarray(to_t, dtype=np.float64)[..., None],
                                     np.asarray(pre_t, dtype=np.float64)[..., None],
                                     np.asarray(post_t, dtype=np.float64)[..., None])


def spherical_cubic_interpolate_in_time(q_from, q_to, q_pre, q_post, weight, to_t, pre_t,
                                        post_t) -> FloatArray:
    """Interpolate orientations cubically in time (the article's implementation 3, Godot 4).

    Args:
        q_from, q_to, q_pre, q_post: (..., 4) quaternions (x, y, z, w) at the
            keys; normalised here (a zero quaternion raises ZeroNormError).
        weight: (...) position in the segment, 0 at ``q_from``, 1 at ``q_to``.
        to_t, pre_t, post_t: (...) key times relative to ``q_from``, seconds.

    Returns:
        (..., 4) unit quaternions; the rotation equals Godot's result.

    """
    singles = [single_unit_quaternion(q) for q in (q_from, q_to, q_pre, q_post)]
    if all(np.ndim(v) == 0 for v in (weight, to_t, pre_t, post_t)):
        sf, st, spre, spost = singles
        if sf is not None and st is not None and spre is not None and spost is not None:
            return _spherical1(sf, st, spre, spost, float(weight), float(to_t), float(pre_t),
                               float(post_t))
    f, t, pre, post = _aligned(q_from, q_to, q_pre, q_post)
    zero = np.zeros(f.shape[:-1] + (3,))
    ln = _cubic_logs(zero, _relative_log(f, t), _relative_log(f, pre), _relative_log(f, post),
                     weight, to_t, pre_t, post_t)
    q1 = rot._multiply(f, rot._exp(ln))
    ln = _cubic_logs(_relative_log(t, f), zero, _relative_log(t, pre), _relative_log(t, post),
                     weight, to_t, pre_t, post_t)
    q2 = rot._multiply(t, rot._exp(ln))
    return rot.slerp(q1, q2, weight)


def _implementation_1(q_from, q_to, q_pre, q_post, weight, to_t, pre_t, post_t):
    """Article's implementation 1: plain cubic of the absolute logs (kicks back)."""
    f, t, pre, post = _aligned(q_from, q_to, q_pre, q_post)
    ln = _cubic_logs(rot._log(f), rot._log(t), rot._log(pre), rot._log(post), weight, to_t,
                     pre_t, post_t)
    return rot._exp(ln)


def _implementation_2(q_from, q_to, q_pre, q_post, weight, to_t, pre_t, post_t):
    """Article's implementation 2: cubic of the logs relative to ``from`` only."""
    f, t, pre, post = _aligned(q_from, q_to, q_pre, q_post)
    zero = np.zeros(f.shape[:-1] + (3,))
    ln = _cubic_logs(zero, _relative_log(f, t), _relative_log(f, pre), _relative_log(f, post),
                     weight, to_t, pre_t, post_t)
    return rot._multiply(f, rot._exp(ln))


def _implementation_4(q_from, q_to, q_pre, q_post, weight, to_t, pre_t, post_t):
    """Article's implementation 4: logs relative to the slerp of from and to (pre-blend)."""
    f, t, pre, post = _aligned(q_from, q_to, q_pre, q_post)
    blend = rot.slerp(f, t, weight)
    ln = _cubic_logs(_relative_log(blend, f), _relative_log(blend, t),
                     _relative_log(blend, pre), _relative_log(blend, post), weight, to_t,
                     pre_t, post_t)
    return rot._multiply(blend, rot._exp(ln))


SPHERICAL_VARIANTS = {
    1: _implementation_1,
    2: _implementation_2,
    3: spherical_cubic_interpolate_in_time,
    4: _implementation_4,
}


def angular_velocity(variant, q_from, q_to, q_pre, q_post, weight, to_t, pre_t, post_t,
                     step: float = 1e-6) -> FloatArray:
    """World angular velocity (rad/s) of a spherical rule at ``weight``: 2 q_dot q^-1.

    Second-order one-sided differences pointing into the segment (step in
    weight units), so that the value at weight 0 or 1 belongs to this segment.
    """
    fn = SPHERICAL_VARIANTS[variant]
    direction = -1.0 if weight >= 1.0 else 1.0
    qs = [fn(q_from, q_to, q_pre, q_post, weight + direction * k * step, to_t, pre_t, post_t)
          for k in range(3)]
    q0 = qs[0]
    qs = [np.where(_dot(q0, q) < 0.0, -q, q) for q in qs]
    q_dot = direction * (-3.0 * qs[0] + 4.0 * qs[1] - qs[2]) / (2.0 * step * to_t)
    return 2.0 * rot._multiply(q_dot, q0 * np.array([-1.0, -1.0, -1.0, 1.0]))[..., :3]


def key_crossing_jumps(variant, quaternions, times) -> FloatArray:
    """|omega after - omega before| (rad/s) at each interior key of a key sequence.

    Args:
        variant: 1, 2, 3 or 4 (SPHERICAL_VARIANTS).
        quaternions: (N, 4) keys (x, y, z, w), N >= 4.
        times: (N,) increasing key times, seconds.

    Returns:
        (N - 3,) jumps at keys 2 .. N-2 (each needs a full segment on both sides).

    """
    q = np.asarray(quaternions, dtype=np.float64)
    t = np.asarray(times, dtype=np.float64)
    jumps = []
    for k in range(2, len(q) - 1):
        if k + 1 >= len(q) or k - 2 < 0:
            continue
        before = angular_velocity(variant, q[k - 1], q[k], q[k - 2], q[min(k + 1, len(q) - 1)],
                                  1.0, t[k] - t[k - 1], t[k - 2] - t[k - 1], t[k + 1] - t[k - 1])
        post = q[k + 2] if k + 2 < len(q) else q[k + 1]
        post_t = (t[k + 2] if k + 2 < len(q) else t[k + 1]) - t[k]
        after = angular_velocity(variant, q[k], q[k + 1], q[k - 1], post, 0.0, t[k + 1] - t[k],
                                 t[k - 1] - t[k], post_t)
        jumps.append(float(np.linalg.norm(after - before)))
    return np.array(jumps)
