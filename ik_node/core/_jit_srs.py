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


# Small vectors are tuples of floats (kept on the stack by numba); 3x3
# matrices are 9-tuples, row-major. Array temporaries would be heap
# allocations, several per operation.

@_jit
def _t3(v):
    return (v[0], v[1], v[2])


@_jit
def _t9(m):
    return (m[0, 0], m[0, 1], m[0, 2], m[1, 0], m[1, 1], m[1, 2], m[2, 0], m[2, 1], m[2, 2])


@_jit
def _add(a, b):
    return (a[0] + b[0], a[1] + b[1], a[2] + b[2])


@_jit
def _sub(a, b):
    return (a[0] - b[0], a[1] - b[1], a[2] - b[2])


@_jit
def _scale(k, a):
    return (k * a[0], k * a[1], k * a[2])


@_jit
def _dot(a, b):
    return a[0] * b[0] + a[1] * b[1] + a[2] * b[2]


@_jit
def _cross(a, b):
    return (a[1] * b[2] - a[2] * b[1], a[2] * b[0] - a[0] * b[2], a[0] * b[1] - a[1] * b[0])


@_jit
def _unit(v):
    n = math.sqrt(_dot(v, v))
    if n > _DEGENERATE:
        return _scale(1.0 / n, v), n
    return v, n


@_jit
def _mv(m, v):
    return (m[0] * v[0] + m[1] * v[1] + m[2] * v[2], m[3] * v[0] + m[4] * v[1] + m[5] * v[2],
            m[6] * v[0] + m[7] * v[1] + m[8] * v[2])


@_jit
def _mtv(m, v):
    return (m[0] * v[0] + m[3] * v[1] + m[6] * v[2], m[1] * v[0] + m[4] * v[1] + m[7] * v[2],
            m[2] * v[0] + m[5] * v[1] + m[8] * v[2])


@_jit
def _mm(a, b):
    return (a[0] * b[0] + a[1] * b[3] + a[2] * b[6], a[0] * b[1] + a[1] * b[4] + a[2] * b[7],
            a[0] * b[2] + a[1] * b[5] + a[2] * b[8], a[3] * b[0] + a[4] * b[3] + a[5] * b[6],
            a[3] * b[1] + a[4] * b[4] + a[5] * b[7], a[3] * b[2] + a[4] * b[5] + a[5] * b[8],
            a[6] * b[0] + a[7] * b[3] + a[8] * b[6], a[6] * b[1] + a[7] * b[4] + a[8] * b[7],
            a[6] * b[2] + a[7] * b[5] + a[8] * b[8])


@_jit
def _tr(a):
    return (a[0], a[3], a[6], a[1], a[4], a[7], a[2], a[5], a[8])


@_jit
def _rot(w, angle):
    s = math.sin(angle)
    c = 1.0 - math.cos(angle)
    x, y, z = w
    return (1.0 - c * (y * y + z * z), -s * z + c * x * y, s * y + c * x * z,
            s * z + c * x * y, 1.0 - c * (x * x + z * z), -s * x + c * y * z,
            -s * y + c * x * z, s * x + c * y * z, 1.0 - c * (x * x + y * y))


@_jit
def _sp1(w, p, q, fallback):
    pp = _sub(p, _scale(_dot(p, w), w))
    qq = _sub(q, _scale(_dot(q, w), w))
    if math.sqrt(_dot(pp, pp)) < 1e-9 or math.sqrt(_dot(qq, qq)) < 1e-9:
        return fallback
    return math.atan2(_dot(_cross(pp, qq), w), _dot(pp, qq))


@_jit
def _spherical(w1, w2, w3, rotation, sign, fallback1):
    """Split a rotation (9-tuple) into three angles, as srs._spherical and srs._sp2 do."""
    p = w3
    q = _mv(rotation, w3)
    c12 = _dot(w1, w2)
    s12 = math.sqrt(max(1.0 - c12 * c12, 0.0))
    t = _scale(1.0 / s12, _sub(w2, _scale(c12, w1)))
    normal = _scale(1.0 / s12, _cross(w1, w2))
    a1 = _dot(q, w1)
    zt = (_dot(p, w2) - a1 * c12) / s12
    qw = _cross(q, w1)
    qx = math.sqrt(_dot(qw, qw))
    g2 = (qx - abs(zt)) * (qx + abs(zt))
    g = sign * math.sqrt(max(g2, 0.0))
    z = _add(_add(_scale(a1, w1), _scale(zt, t)), _scale(g, normal))
    t2 = _sp1(w2, p, z, 0.0)
    t1 = _sp1(w1, z, q, fallback1)
    helper = _cross(w3, w1)
    if math.sqrt(_dot(helper, helper)) <= 1e-6:
        helper = _cross(w3, w2)
    x = _scale(1.0 / math.sqrt(_dot(helper, helper)), helper)
    rest = _mtv(_mm(_rot(w1, t1), _rot(w2, t2)), _mv(rotation, x))
    t3 = _sp1(w3, x, rest, 0.0)
    return t1, t2, t3


@_jit
def _frame(x, y):
    """9-tuple frame with columns x^, y^ (normal to x), x^ x y^."""
    xh, _ = _unit(x)
    yh, _ = _unit(_sub(y, _scale(_dot(y, xh), xh)))
    zh = _cross(xh, yh)
    return (xh[0], yh[0], zh[0], xh[1], yh[1], zh[1], xh[2], yh[2], zh[2])


@_jit
def _wrap(angle):
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


@_jit
def wrist_geometry(target, axes, shoulder, wrist_in_tip, low, high):
    """Mirror of AnalyticSRS._wrist_target: (u, d, d_clamped) for one target."""
    w_t = _add((target[0, 3], target[1, 3], target[2, 3]), _mv(_t9(target), _t3(wrist_in_tip)))
    u, d = _unit(_sub(w_t, _t3(shoulder)))
    d_clamped = min(max(d, low), high)
    if not d > _DEGENERATE:
        u = _t3(axes[0])
    return u, d, d_clamped


@_jit
def swivel_basis(u, w1, w2):
    """Return e1, e2 spanning the plane normal to u (mirror of AnalyticSRS._swivel_basis)."""
    e1, n1 = _unit(_sub(w1, _scale(_dot(u, w1), u)))
    if not n1 > 1e-9:
        e1, _ = _unit(_sub(w2, _scale(_dot(u, w2), u)))
    return e1, _cross(u, e1)


@_jit
def _elbow_part(elbow_sign, d, u, radial, target_rot, w4, a, b, tip_rotation0, upper_arm,
                forearm, a1, a2, phase, lower4, upper4):
    """q4, the shoulder rotation and the wrist rotation for one elbow sign."""
    k = 0.5 * (d * d - upper_arm ** 2 - forearm ** 2)
    rho = math.hypot(a1, a2)
    q4 = _wrap(phase + elbow_sign * math.acos(min(max(k / rho, -1.0), 1.0)))
    if lower4 - _LIMIT_SNAP < q4 < lower4:
        q4 = lower4
    elif upper4 < q4 < upper4 + _LIMIT_SNAP:
        q4 = upper4
    rot4 = _rot(w4, q4)
    c3 = _add(a, _mv(rot4, b))
    orient = _dot(_cross(a, c3), w4)
    sigma = elbow_sign
    if abs(orient) > 1e-12:
        sigma = 1.0 if orient > 0.0 else -1.0
    axis4 = _scale(sigma, _cross(radial, u))
    r03 = _mm(_frame(u, axis4), _tr(_frame(c3, w4)))
    r_wrist = _mm(_mm(_tr(_mm(r03, rot4)), target_rot), _tr(tip_rotation0))
    return q4, r03, r_wrist


@_jit
def _into_limits(q, lower, upper):
    for i in range(7):
        if q[i] < lower[i] or q[i] > upper[i]:
            for shift in (2.0 * math.pi, -2.0 * math.pi):
                moved = q[i] + shift
                if moved >= lower[i] and moved <= upper[i]:
                    q[i] = moved
                    break


@_jit
def all_branches(target, psi, fallback1, fallback5, axes, shoulder, a, b, wrist_in_tip,
                 tip_rotation0, upper_arm, forearm, a1, a2, phase, lower, upper, reach_low,
                 reach_high, out):
    """Fill out (8, 7) with every branch at swivel psi, in BRANCHES order.

    The two elbow solutions, four shoulder and four wrist splits are shared
    among the eight branches instead of being computed eight times.
    """
    u, _, d = wrist_geometry(target, axes, shoulder, wrist_in_tip, reach_low, reach_high)
    w = [_t3(axes[i]) for i in range(7)]
    e1, e2 = swivel_basis(u, w[0], w[1])
    radial = _add(_scale(math.cos(psi), e1), _scale(math.sin(psi), e2))
    target_rot = _t9(target)
    at, bt, rt = _t3(a), _t3(b), _t9(tip_rotation0)
    for ei in range(2):
        elbow_sign = 1.0 - 2.0 * ei
        q4, r03, r_wrist = _elbow_part(elbow_sign, d, u, radial, target_rot, w[3], at, bt, rt,
                                       upper_arm, forearm, a1, a2, phase, lower[3], upper[3])
        for si in range(2):
            q1, q2, q3 = _spherical(w[0], w[1], w[2], r03, 1.0 - 2.0 * si, fallback1)
            for wi in range(2):
                row = 4 * ei + 2 * si + wi
                if si == 0:
                    q5, q6, q7 = _spherical(w[4], w[5], w[6], r_wrist, 1.0 - 2.0 * wi,
                                            fallback5)
                    out[row, 4], out[row, 5], out[row, 6] = q5, q6, q7
                else:
                    out[row, 4:] = out[row - 2, 4:]
                out[row, 0], out[row, 1], out[row, 2], out[row, 3] = q1, q2, q3, q4
                _into_limits(out[row], lower, upper)


@_jit
def solve_one(target, psi, elbow_sign, shoulder_sign, wrist_sign, fallback1, fallback5, axes,
              shoulder, a, b, wrist_in_tip, tip_rotation0, upper_arm, forearm, a1, a2, phase,
              lower, upper, reach_low, reach_high, out):
    """Fill out (7,) with the joints of one target, swivel angle and branch."""
    u, _, d = wrist_geometry(target, axes, shoulder, wrist_in_tip, reach_low, reach_high)
    w0, w1, w2, w3 = _t3(axes[0]), _t3(axes[1]), _t3(axes[2]), _t3(axes[3])
    e1, e2 = swivel_basis(u, w0, w1)
    radial = _add(_scale(math.cos(psi), e1), _scale(math.sin(psi), e2))
    q4, r03, r_wrist = _elbow_part(elbow_sign, d, u, radial, _t9(target), w3, _t3(a), _t3(b),
                                   _t9(tip_rotation0), upper_arm, forearm, a1, a2, phase,
                                   lower[3], upper[3])
    q1, q2, q3 = _spherical(w0, w1, w2, r03, shoulder_sign, fallback1)
    q5, q6, q7 = _spherical(_t3(axes[4]), _t3(axes[5]), _t3(axes[6]), r_wrist, wrist_sign,
                            fallback5)
    out[0], out[1], out[2], out[3], out[4], out[5], out[6] = q1, q2, q3, q4, q5, q6, q7
    _into_limits(out, lower, upper)


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
    e1, e2 = swivel_basis(u, _t3(axes[0]), _t3(axes[1]))
    v = _sub(_t3(elbow), _t3(shoulder))
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
def _frames_of(q, fk):
    """Rotation and origin of each joint frame, and the tip pose, from packed tables."""
    pre_rot = fk[0:63].reshape(7, 3, 3)
    pre_trans = fk[63:84].reshape(7, 3)
    axis = fk[84:105].reshape(7, 3)
    tip = fk[105:121].reshape(4, 4)
    rot = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0)
    pos = (0.0, 0.0, 0.0)
    elbow_rot, elbow_pos = rot, pos
    for j in range(7):
        pos = _add(pos, _mv(rot, _t3(pre_trans[j])))
        rot = _mm(rot, _mm(_t9(pre_rot[j]), _rot(_t3(axis[j]), q[j])))
        if j == 3:
            elbow_rot, elbow_pos = rot, pos
    tip_rot = _mm(rot, _t9(tip))
    tip_pos = _add(pos, _mv(rot, (tip[0, 3], tip[1, 3], tip[2, 3])))
    return tip_rot, tip_pos, elbow_rot, elbow_pos, _t3(axis[3])


@_jit
def _pose_errors(target, q, fk):
    rot, pos, _, _, _ = _frames_of(q, fk)
    dp = _sub((target[0, 3], target[1, 3], target[2, 3]), pos)
    err = _mm(_t9(target), _tr(rot))
    # angle of err: from its trace and skew part (atan2: accurate everywhere).
    s = 0.5 * math.sqrt((err[7] - err[5]) ** 2 + (err[2] - err[6]) ** 2 + (err[3] - err[1]) ** 2)
    c = 0.5 * (err[0] + err[4] + err[8] - 1.0)
    return math.sqrt(_dot(dp, dp)), math.atan2(s, c)


@_jit
def solve_ordered(target, psi, branches, fallback1, fallback5, model, fk, q_ref, use_ref):
    """Solve the branches (B, 3) at swivel psi and pick one within the limits.

    Without ``use_ref`` the first of ``branches`` within limits wins; with it,
    the one within limits nearest ``q_ref`` (7,).

    Returns:
        (q (7,), status, branch index, position error m, orientation error rad,
        distance, clamped distance); status 0: within limits, 2: no branch is
        (q of the first branch returned). Out of reach shows as distance !=
        clamped distance.

    """
    (axes, shoulder, a, b, wrist_in_tip, tip_rotation0, upper_arm, forearm, a1, a2, phase,
     lower, upper, reach_low, reach_high) = _unpack_model(model)
    _, d, d_clamped = wrist_geometry(target, axes, shoulder, wrist_in_tip, reach_low, reach_high)
    every = np.empty((8, 7))
    all_branches(target, psi, fallback1, fallback5, axes, shoulder, a, b, wrist_in_tip,
                 tip_rotation0, upper_arm, forearm, a1, a2, phase, lower, upper, reach_low,
                 reach_high, every)
    best, best_i, best_cost = -1, 0, 0.0
    for i in range(branches.shape[0]):
        row = (0 if branches[i, 0] > 0 else 4) + (0 if branches[i, 1] > 0 else 2) \
            + (0 if branches[i, 2] > 0 else 1)
        inside = True
        cost = 0.0
        for j in range(7):
            if every[row, j] < lower[j] or every[row, j] > upper[j]:
                inside = False
            cost += (every[row, j] - q_ref[j]) ** 2
        if inside and (best < 0 or (use_ref and cost < best_cost)):
            best, best_i, best_cost = row, i, cost
            if not use_ref:
                break
    if best >= 0:
        q = every[best].copy()
        pos, ang = _pose_errors(target, q, fk)
        return q, 0, best_i, pos, ang, d, d_clamped
    row = (0 if branches[0, 0] > 0 else 4) + (0 if branches[0, 1] > 0 else 2) \
        + (0 if branches[0, 2] > 0 else 1)
    q = every[row].copy()
    pos, ang = _pose_errors(target, q, fk)
    return q, 2, 0, pos, ang, d, d_clamped


@_jit
def reference_swivel_branch(q, model, fk):
    """Swivel angle and (elbow, shoulder, wrist) signs of configuration q."""
    (axes, shoulder, a, b, wrist_in_tip, tip_rotation0, upper_arm, forearm, a1, a2, phase,
     lower, upper, reach_low, reach_high) = _unpack_model(model)
    tip_rot, tip_pos, elbow_rot, elbow_pos, axis4 = _frames_of(q, fk)
    # The elbow: the shoulder point projected onto axis 4.
    z4 = _mv(elbow_rot, axis4)
    elbow = _add(elbow_pos, _scale(_dot(_sub(_t3(shoulder), elbow_pos), z4), z4))
    pose = np.eye(4)
    for i in range(3):
        pose[i, 3] = tip_pos[i]
        for j in range(3):
            pose[i, j] = tip_rot[3 * i + j]
    psi = swivel_of_pose(pose, np.array(elbow), axes, shoulder, wrist_in_tip, reach_low,
                         reach_high)
    w = [_t3(axes[i]) for i in range(7)]
    e = 1.0 if _wrap(q[3] - phase) >= 0.0 else -1.0
    s = 1.0 if _dot(_mv(_rot(w[1], q[1]), w[2]), _cross(w[0], w[1])) >= 0.0 else -1.0
    w_sign = 1.0 if _dot(_mv(_rot(w[5], q[5]), w[6]), _cross(w[4], w[5])) >= 0.0 else -1.0
    return psi, e, s, w_sign


@_jit
def pose_is_valid(pose, tol):
    """Return True when pose (4, 4) is finite, rigid (orthonormal, det +1), ends 0 0 0 1."""
    for i in range(4):
        for j in range(4):
            if not math.isfinite(pose[i, j]):
                return False
    if pose[3, 0] != 0.0 or pose[3, 1] != 0.0 or pose[3, 2] != 0.0 or pose[3, 3] != 1.0:
        return False
    for i in range(3):
        for j in range(i, 3):
            dot = pose[0, i] * pose[0, j] + pose[1, i] * pose[1, j] + pose[2, i] * pose[2, j]
            if abs(dot - (1.0 if i == j else 0.0)) > tol:
                return False
    c = _cross((pose[0, 0], pose[1, 0], pose[2, 0]), (pose[0, 1], pose[1, 1], pose[2, 1]))
    return _dot(c, (pose[0, 2], pose[1, 2], pose[2, 2])) > 0.0
