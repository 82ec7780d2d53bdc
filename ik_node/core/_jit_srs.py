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

"""Compiled (numba) twin of AnalyticSRS._solve_batch; numpy is the reference.

The same closed form as :mod:`ik_node.core.srs` (same thresholds and
fallbacks), one target at a time in explicit loops, so that a single solve
costs microseconds instead of the ~100 small-array numpy calls of the
vectorised reference. Tests compare the two.
"""

import math

from ik_node.core import srs as ref
import numba
import numpy as np

_DEGENERATE = ref.DEGENERATE
_LIMIT_SNAP = ref.LIMIT_SNAP

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@_jit
def _mv(m, v):
    """3x3 matrix times 3-vector (explicit: numba's @ calls BLAS, ~1 us per call)."""
    return np.array((m[0, 0] * v[0] + m[0, 1] * v[1] + m[0, 2] * v[2],
                     m[1, 0] * v[0] + m[1, 1] * v[1] + m[1, 2] * v[2],
                     m[2, 0] * v[0] + m[2, 1] * v[1] + m[2, 2] * v[2]))


@_jit
def _mtv(m, v):
    """Transpose of a 3x3 matrix times a 3-vector."""
    return np.array((m[0, 0] * v[0] + m[1, 0] * v[1] + m[2, 0] * v[2],
                     m[0, 1] * v[0] + m[1, 1] * v[1] + m[2, 1] * v[2],
                     m[0, 2] * v[0] + m[1, 2] * v[1] + m[2, 2] * v[2]))


@_jit
def _mm(a, b):
    out = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            out[i, j] = a[i, 0] * b[0, j] + a[i, 1] * b[1, j] + a[i, 2] * b[2, j]
    return out


@_jit
def _mmt(a, b):
    """a @ b.T for 3x3 matrices."""
    out = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            out[i, j] = a[i, 0] * b[j, 0] + a[i, 1] * b[j, 1] + a[i, 2] * b[j, 2]
    return out


@_jit
def _mtm(a, b):
    """a.T @ b for 3x3 matrices."""
    out = np.empty((3, 3))
    for i in range(3):
        for j in range(3):
            out[i, j] = a[0, i] * b[0, j] + a[1, i] * b[1, j] + a[2, i] * b[2, j]
    return out


@_jit
def _cross(a, b):
    return np.array((a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2],
                     a[0] * b[1] - a[1] * b[0]))


@_jit
def _unit(v):
    n = math.sqrt(_dot(v, v))
    if n > _DEGENERATE:
        return v / n, n
    return v.copy(), n


@_jit
def _rot(w, angle):
    s = math.sin(angle)
    c = 1.0 - math.cos(angle)
    x, y, z = w[0], w[1], w[2]
    r = np.empty((3, 3))
    r[0, 0] = 1.0 - c * (y * y + z * z)
    r[0, 1] = -s * z + c * x * y
    r[0, 2] = s * y + c * x * z
    r[1, 0] = s * z + c * x * y
    r[1, 1] = 1.0 - c * (x * x + z * z)
    r[1, 2] = -s * x + c * y * z
    r[2, 0] = -s * y + c * x * z
    r[2, 1] = s * x + c * y * z
    r[2, 2] = 1.0 - c * (x * x + y * y)
    return r


@_jit
def _sp1(w, p, q, fallback):
    pp = p - _dot(p, w) * w
    qq = q - _dot(q, w) * w
    if math.sqrt(_dot(pp, pp)) < 1e-9 or math.sqrt(_dot(qq, qq)) < 1e-9:
        return fallback
    return math.atan2(_dot(_cross(pp, qq), w), _dot(pp, qq))


@_jit
def _spherical(w1, w2, w3, rotation, sign, fallback1):
    """Mirror of srs._spherical for one rotation (3, 3)."""
    p = w3
    q = _mv(rotation, w3)
    c12 = _dot(w1, w2)
    cross = _cross(w1, w2)
    denom = c12 * c12 - 1.0
    w2p = _dot(p, w2)
    w1q = _dot(q, w1)
    alpha = (c12 * w2p - w1q) / denom
    beta = (c12 * w1q - w2p) / denom
    gamma2 = (_dot(p, p) - alpha * alpha - beta * beta - 2.0 * alpha * beta * c12) \
        / _dot(cross, cross)
    gamma = sign * math.sqrt(max(gamma2, 0.0))
    z = alpha * w1 + beta * w2 + gamma * cross
    t2 = _sp1(w2, p, z, 0.0)
    t1 = _sp1(w1, z, q, fallback1)
    helper = _cross(w3, w1)
    if math.sqrt(_dot(helper, helper)) <= 1e-6:
        helper = _cross(w3, w2)
    x = helper / math.sqrt(_dot(helper, helper))
    rest = _mtv(_mm(_rot(w1, t1), _rot(w2, t2)), _mv(rotation, x))
    t3 = _sp1(w3, x, rest, 0.0)
    return t1, t2, t3


@_jit
def _frame(x, y):
    xh, _ = _unit(x)
    yh, _ = _unit(y - _dot(y, xh) * xh)
    f = np.empty((3, 3))
    zh = _cross(xh, yh)
    for i in range(3):
        f[i, 0] = xh[i]
        f[i, 1] = yh[i]
        f[i, 2] = zh[i]
    return f


@_jit
def _wrap(angle):
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


@_jit
def wrist_geometry(target, axes, shoulder, wrist_in_tip, low, high):
    """Mirror of AnalyticSRS._wrist_target: (u, d, d_clamped) for one target."""
    w_t = target[:3, 3] + _mv(target, wrist_in_tip)  # uses the rotation block
    u, d = _unit(w_t - shoulder)
    d_clamped = min(max(d, low), high)
    if not d > _DEGENERATE:
        u = axes[0].copy()
    return u, d, d_clamped


@_jit
def swivel_basis(u, axes):
    w1, w2 = axes[0], axes[1]
    e1, n1 = _unit(w1 - _dot(u, w1) * u)
    if not n1 > 1e-9:
        e1, _ = _unit(w2 - _dot(u, w2) * u)
    return e1, _cross(u, e1)


@_jit
def solve_one(target, psi, elbow_sign, shoulder_sign, wrist_sign, fallback1, fallback5, axes,
              shoulder, a, b, wrist_in_tip, tip_rotation0, upper_arm, forearm, a1, a2, phase,
              lower, upper, reach_low, reach_high, out):
    """Fill out (7,) with the joints of one target, swivel angle and branch."""
    u, _, d = wrist_geometry(target, axes, shoulder, wrist_in_tip, reach_low, reach_high)
    k = 0.5 * (d * d - upper_arm ** 2 - forearm ** 2)
    rho = math.hypot(a1, a2)
    q4 = _wrap(phase + elbow_sign * math.acos(min(max(k / rho, -1.0), 1.0)))
    if lower[3] - _LIMIT_SNAP < q4 < lower[3]:
        q4 = lower[3]
    elif upper[3] < q4 < upper[3] + _LIMIT_SNAP:
        q4 = upper[3]
    e1, e2 = swivel_basis(u, axes)
    radial = math.cos(psi) * e1 + math.sin(psi) * e2
    w4 = axes[3]
    c3 = a + _mv(_rot(w4, q4), b)
    orient = _dot(_cross(a, c3), w4)
    sigma = elbow_sign
    if abs(orient) > 1e-12:
        sigma = 1.0 if orient > 0.0 else -1.0
    axis4 = sigma * _cross(radial, u)
    r03 = _mmt(_frame(u, axis4), _frame(c3, w4))
    q1, q2, q3 = _spherical(axes[0], axes[1], axes[2], r03, shoulder_sign, fallback1)
    r04 = _mm(r03, _rot(w4, q4))
    r_wrist = _mmt(_mtm(r04, target), tip_rotation0)  # target's 3x3 block
    q5, q6, q7 = _spherical(axes[4], axes[5], axes[6], r_wrist, wrist_sign, fallback5)
    out[0], out[1], out[2], out[3], out[4], out[5], out[6] = q1, q2, q3, q4, q5, q6, q7
    for i in range(7):
        if out[i] < lower[i] or out[i] > upper[i]:
            for shift in (2.0 * math.pi, -2.0 * math.pi):
                moved = out[i] + shift
                if moved >= lower[i] and moved <= upper[i]:
                    out[i] = moved
                    break


@_jit
def solve_many(targets, psi, branches, fallback1, fallback5, axes, shoulder, a, b,
               wrist_in_tip, tip_rotation0, upper_arm, forearm, a1, a2, phase, lower, upper,
               reach_low, reach_high):
    """Joints (N, 7) for targets (N, 4, 4), swivel angles (N,), branches (N, 3)."""
    n = targets.shape[0]
    out = np.empty((n, 7))
    for i in range(n):
        solve_one(targets[i], psi[i], branches[i, 0], branches[i, 1], branches[i, 2],
                  fallback1[i], fallback5[i], axes, shoulder, a, b, wrist_in_tip,
                  tip_rotation0, upper_arm, forearm, a1, a2, phase, lower, upper, reach_low,
                  reach_high, out[i])
    return out


@_jit
def swivel_of_pose(tip, elbow, axes, shoulder, wrist_in_tip, reach_low, reach_high):
    """Mirror of AnalyticSRS._swivel_of_batch for one pose."""
    u, _, _ = wrist_geometry(tip, axes, shoulder, wrist_in_tip, reach_low, reach_high)
    e1, e2 = swivel_basis(u, axes)
    v = elbow - shoulder
    return math.atan2(_dot(v, e2), _dot(v, e1))


# ---------------------------------------------------------------------------
# Packed entry points: one call per solve (numba unboxes each argument, so the
# model travels as two flat arrays; see AnalyticSRS._packed).
# ---------------------------------------------------------------------------

@_jit
def _unpack_model(model):
    axes = model[0:21].reshape(7, 3)
    return (axes, model[21:24], model[24:27], model[27:30], model[30:33],
            model[33:42].reshape(3, 3), model[42], model[43], model[44], model[45], model[46],
            model[47:54], model[54:61], model[61], model[62])


@_jit
def _tip_pose(q, fk):
    """Tip rotation (3, 3) and position (3,) of q from the packed chain tables."""
    pre_rot = fk[0:63].reshape(7, 3, 3)
    pre_trans = fk[63:84].reshape(7, 3)
    axis = fk[84:105].reshape(7, 3)
    tip = fk[105:121].reshape(4, 4)
    rot = np.eye(3)
    pos = np.zeros(3)
    for j in range(7):
        local = _mm(pre_rot[j], _rot(axis[j], q[j]))
        pos = pos + _mv(rot, pre_trans[j])
        rot = _mm(rot, local)
    return _mm(rot, tip[:3, :3].copy()), pos + _mv(rot, tip[:3, 3].copy())


@_jit
def _pose_errors(target, q, fk):
    rot, pos = _tip_pose(q, fk)
    dp = target[:3, 3] - pos
    err = _mmt(target[:3, :3].copy(), rot)
    # angle of err: from its trace and skew part (atan2: accurate everywhere).
    s = 0.5 * math.sqrt((err[2, 1] - err[1, 2]) ** 2 + (err[0, 2] - err[2, 0]) ** 2
                        + (err[1, 0] - err[0, 1]) ** 2)
    c = 0.5 * (err[0, 0] + err[1, 1] + err[2, 2] - 1.0)
    return math.sqrt(_dot(dp, dp)), math.atan2(s, c)


@_jit
def solve_ordered(target, psi, branches, fallback1, fallback5, model, fk):
    """Try branches (B, 3) in order at swivel psi; the first within limits wins.

    Returns:
        (q (7,), status, branch index, position error m, orientation error rad,
        distance, clamped distance); status 0: within limits, 2: no branch is
        (q of the first branch returned). Out of reach shows as distance !=
        clamped distance.

    """
    (axes, shoulder, a, b, wrist_in_tip, tip_rotation0, upper_arm, forearm, a1, a2, phase,
     lower, upper, reach_low, reach_high) = _unpack_model(model)
    _, d, d_clamped = wrist_geometry(target, axes, shoulder, wrist_in_tip, reach_low, reach_high)
    q = np.empty(7)
    first = np.empty(7)
    for i in range(branches.shape[0]):
        solve_one(target, psi, branches[i, 0], branches[i, 1], branches[i, 2], fallback1,
                  fallback5, axes, shoulder, a, b, wrist_in_tip, tip_rotation0, upper_arm,
                  forearm, a1, a2, phase, lower, upper, reach_low, reach_high, q)
        if i == 0:
            first[:] = q
        inside = True
        for j in range(7):
            if q[j] < lower[j] or q[j] > upper[j]:
                inside = False
        if inside:
            pos, ang = _pose_errors(target, q, fk)
            return q, 0, i, pos, ang, d, d_clamped
    pos, ang = _pose_errors(target, first, fk)
    return first, 2, 0, pos, ang, d, d_clamped


@_jit
def reference_swivel_branch(q, model, fk):
    """Swivel angle and (elbow, shoulder, wrist) signs of configuration q."""
    (axes, shoulder, a, b, wrist_in_tip, tip_rotation0, upper_arm, forearm, a1, a2, phase,
     lower, upper, reach_low, reach_high) = _unpack_model(model)
    pre_rot = fk[0:63].reshape(7, 3, 3)
    pre_trans = fk[63:84].reshape(7, 3)
    axis = fk[84:105].reshape(7, 3)
    tip = fk[105:121].reshape(4, 4)
    rot = np.eye(3)
    pos = np.zeros(3)
    elbow = np.zeros(3)
    for j in range(7):
        pos = pos + _mv(rot, pre_trans[j])
        rot = _mm(rot, _mm(pre_rot[j], _rot(axis[j], q[j])))
        if j == 3:  # the elbow: the shoulder point projected onto axis 4
            z4 = _mv(rot, axis[j])
            elbow = pos + _dot(shoulder - pos, z4) * z4
    pose = np.eye(4)
    pose[:3, :3] = _mm(rot, tip[:3, :3].copy())
    pose[:3, 3] = pos + _mv(rot, tip[:3, 3].copy())
    psi = swivel_of_pose(pose, elbow, axes, shoulder, wrist_in_tip, reach_low, reach_high)
    e = 1.0 if _wrap(q[3] - phase) >= 0.0 else -1.0
    s = 1.0 if _dot(_mv(_rot(axes[1], q[1]), axes[2]), _cross(axes[0], axes[1])) >= 0.0 \
        else -1.0
    w = 1.0 if _dot(_mv(_rot(axes[5], q[5]), axes[6]), _cross(axes[4], axes[5])) >= 0.0 \
        else -1.0
    return psi, e, s, w
