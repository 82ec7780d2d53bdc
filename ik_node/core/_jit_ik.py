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

"""Compiled (numba) twin of JacobianIK's descent; optional, numpy is the reference.

One attempt of :meth:`ik_node.core.jacobian_ik.JacobianIK._descend` written as
explicit loops over small arrays and compiled with numba: the same FK and
Jacobian, residual, inverse right Jacobian, seed bias, active-set step, LM
acceptance and stall rule, with the same constants. The numpy
implementation stays the tested reference; tests check that both give the
same iterates. Imported only when numba is installed.
"""

import math

from ik_node.core import jacobian_ik as ref
import numba
import numpy as np

# The constants of the reference implementation, bound at compile time.
_DAMPING_START = ref.DAMPING_START
_DAMPING_MIN = ref.DAMPING_MIN
_DAMPING_MAX = ref.DAMPING_MAX
_DAMPING_DOWN = ref.DAMPING_DOWN
_DAMPING_UP = ref.DAMPING_UP
_STALL_FRACTION = ref.STALL_FRACTION
_STALL_WINDOW = ref.STALL_WINDOW
_BIAS_FULL_ABOVE = ref.BIAS_FULL_ABOVE
_JR_SERIES_BELOW = ref.JR_SERIES_BELOW
_LOG_SERIES_BELOW = 1e-6  # rotations.LOG_SERIES_BELOW

_jit = numba.njit(cache=True, fastmath=False, nogil=True)


@_jit
def _forward(q, pre_rot, pre_trans, axis, prismatic, driver, mult, offset, tip, cum_r, cum_p,
             tip_r, tip_p):
    """Fill cumulative joint frames (rotation, origin) and the tip pose."""
    m = axis.shape[0]
    prev_r = np.eye(3)
    prev_p = np.zeros(3)
    rj = np.empty((3, 3))
    lr = np.empty((3, 3))
    lt = np.empty(3)
    for j in range(m):
        theta = mult[j] * q[driver[j]] + offset[j]
        ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
        if prismatic[j]:
            for a in range(3):
                for b in range(3):
                    rj[a, b] = 1.0 if a == b else 0.0
        else:
            s = math.sin(theta)
            c1 = 1.0 - math.cos(theta)
            # R = I + s K + (1 - cos) K^2, K = [axis]x.
            rj[0, 0] = 1.0 - c1 * (ay * ay + az * az)
            rj[0, 1] = -s * az + c1 * ax * ay
            rj[0, 2] = s * ay + c1 * ax * az
            rj[1, 0] = s * az + c1 * ax * ay
            rj[1, 1] = 1.0 - c1 * (ax * ax + az * az)
            rj[1, 2] = -s * ax + c1 * ay * az
            rj[2, 0] = -s * ay + c1 * ax * az
            rj[2, 1] = s * ax + c1 * ay * az
            rj[2, 2] = 1.0 - c1 * (ax * ax + ay * ay)
        # Local translation: pre_trans, plus pre_rot (theta axis) when sliding.
        for a in range(3):
            lt[a] = pre_trans[j, a]
            if prismatic[j]:
                lt[a] += theta * (pre_rot[j, a, 0] * ax + pre_rot[j, a, 1] * ay
                                  + pre_rot[j, a, 2] * az)
        for a in range(3):
            cum_p[j, a] = prev_p[a] + prev_r[a, 0] * lt[0] + prev_r[a, 1] * lt[1] \
                + prev_r[a, 2] * lt[2]
        for a in range(3):
            for b in range(3):
                lr[a, b] = pre_rot[j, a, 0] * rj[0, b] + pre_rot[j, a, 1] * rj[1, b] \
                    + pre_rot[j, a, 2] * rj[2, b]
        for a in range(3):
            for b in range(3):
                cum_r[j, a, b] = prev_r[a, 0] * lr[0, b] + prev_r[a, 1] * lr[1, b] \
                    + prev_r[a, 2] * lr[2, b]
        for a in range(3):
            prev_p[a] = cum_p[j, a]
            for b in range(3):
                prev_r[a, b] = cum_r[j, a, b]
    for a in range(3):
        tip_p[a] = prev_p[a]
        for b in range(3):
            tip_p[a] += prev_r[a, b] * tip[b, 3]
            acc = 0.0
            for k in range(3):
                acc += prev_r[a, k] * tip[k, b]
            tip_r[a, b] = acc


@_jit
def _jacobian(axis, prismatic, driver, mult, cum_r, cum_p, tip_p, jac):
    """Fill the (6, n) geometric Jacobian from the frames."""
    jac[:, :] = 0.0
    for j in range(axis.shape[0]):
        ax, ay, az = axis[j, 0], axis[j, 1], axis[j, 2]
        zx = cum_r[j, 0, 0] * ax + cum_r[j, 0, 1] * ay + cum_r[j, 0, 2] * az
        zy = cum_r[j, 1, 0] * ax + cum_r[j, 1, 1] * ay + cum_r[j, 1, 2] * az
        zz = cum_r[j, 2, 0] * ax + cum_r[j, 2, 1] * ay + cum_r[j, 2, 2] * az
        k = driver[j]
        g = mult[j]
        if prismatic[j]:
            jac[0, k] += g * zx
            jac[1, k] += g * zy
            jac[2, k] += g * zz
        else:
            dx = tip_p[0] - cum_p[j, 0]
            dy = tip_p[1] - cum_p[j, 1]
            dz = tip_p[2] - cum_p[j, 2]
            jac[0, k] += g * (zy * dz - zz * dy)
            jac[1, k] += g * (zz * dx - zx * dz)
            jac[2, k] += g * (zx * dy - zy * dx)
            jac[3, k] += g * zx
            jac[4, k] += g * zy
            jac[5, k] += g * zz


@_jit
def _residual(target, tip_r, tip_p, r):
    """Fill r = [p_t - p; 2 log(q_t q^-1)] (shortest rotation)."""
    e = np.empty((3, 3))
    for a in range(3):
        r[a] = target[a, 3] - tip_p[a]
        for b in range(3):
            e[a, b] = target[a, 0] * tip_r[b, 0] + target[a, 1] * tip_r[b, 1] \
                + target[a, 2] * tip_r[b, 2]
    d0, d1, d2 = e[0, 0], e[1, 1], e[2, 2]
    trace = d0 + d1 + d2
    best = max(d0, d1, d2, trace)
    if best == d0:
        x, y, z, w = 1.0 + d0 - d1 - d2, e[0, 1] + e[1, 0], e[0, 2] + e[2, 0], e[2, 1] - e[1, 2]
    elif best == d1:
        x, y, z, w = e[0, 1] + e[1, 0], 1.0 - d0 + d1 - d2, e[1, 2] + e[2, 1], e[0, 2] - e[2, 0]
    elif best == d2:
        x, y, z, w = e[0, 2] + e[2, 0], e[1, 2] + e[2, 1], 1.0 - d0 - d1 + d2, e[1, 0] - e[0, 1]
    else:
        x, y, z, w = e[2, 1] - e[1, 2], e[0, 2] - e[2, 0], e[1, 0] - e[0, 1], 1.0 + trace
    norm = math.sqrt(x * x + y * y + z * z + w * w)
    if w < 0.0:
        norm = -norm
    x, y, z, w = x / norm, y / norm, z / norm, w / norm
    s = math.sqrt(x * x + y * y + z * z)
    if s < _LOG_SERIES_BELOW and w > 0.0:
        x2 = (s / w) ** 2
        k = (1.0 - x2 / 3.0 + x2 * x2 / 5.0) / w
    elif s > 0.0:
        k = math.atan2(s, w) / s
    else:
        r[3], r[4], r[5] = 2.0 * math.pi, 0.0, 0.0
        return
    r[3] = 2.0 * k * x
    r[4] = 2.0 * k * y
    r[5] = 2.0 * k * z


@_jit
def _task(jac, r, use_pos, use_ori, w, a, rhs):
    """Fill A (goal rows, weighted) and the weighted residual rhs."""
    n = jac.shape[1]
    row = 0
    if use_pos:
        for i in range(3):
            for k in range(n):
                a[row, k] = w[i] * jac[i, k]
            rhs[row] = w[i] * r[i]
            row += 1
    if use_ori:
        x, y, z = r[3], r[4], r[5]
        t2 = x * x + y * y + z * z
        t = math.sqrt(t2)
        if t < _JR_SERIES_BELOW:
            c = 1.0 / 12.0 + t2 / 720.0 + t2 * t2 / 30240.0
        elif t < math.pi:
            c = 1.0 / t2 - (1.0 + math.cos(t)) / (2.0 * t * math.sin(t))
        else:
            c = 1.0 / t2
        m = np.empty((3, 3))
        m[0, 0] = 1.0 + c * (x * x - t2)
        m[0, 1] = -0.5 * z + c * x * y
        m[0, 2] = 0.5 * y + c * x * z
        m[1, 0] = 0.5 * z + c * x * y
        m[1, 1] = 1.0 + c * (y * y - t2)
        m[1, 2] = -0.5 * x + c * y * z
        m[2, 0] = -0.5 * y + c * x * z
        m[2, 1] = 0.5 * x + c * y * z
        m[2, 2] = 1.0 + c * (z * z - t2)
        for i in range(3):
            for k in range(n):
                a[row, k] = w[3 + i] * (m[i, 0] * jac[3, k] + m[i, 1] * jac[4, k]
                                        + m[i, 2] * jac[5, k])
            rhs[row] = w[3 + i] * r[3 + i]
            row += 1


@_jit
def _cholesky_solve(g, b):
    """Solve g x = b, g symmetric positive definite (small), in place on copies."""
    n = g.shape[0]
    low = np.zeros((n, n))
    for i in range(n):
        for j in range(i + 1):
            acc = g[i, j]
            for k in range(j):
                acc -= low[i, k] * low[j, k]
            if i == j:
                low[i, i] = math.sqrt(acc) if acc > 0.0 else 1e-300
            else:
                low[i, j] = acc / low[j, j]
    y = np.empty(n)
    for i in range(n):
        acc = b[i]
        for k in range(i):
            acc -= low[i, k] * y[k]
        y[i] = acc / low[i, i]
    x = np.empty(n)
    for i in range(n - 1, -1, -1):
        acc = y[i]
        for k in range(i + 1, n):
            acc -= low[k, i] * x[k]
        x[i] = acc / low[i, i]
    return x


@_jit
def _dls(a, free, resid, damping):
    """Damped least squares on the free columns of a; returns a full-length x."""
    m = a.shape[0]
    n = a.shape[1]
    cols = np.empty(n, dtype=np.int64)
    k = 0
    for c in range(n):
        if free[c]:
            cols[k] = c
            k += 1
    x = np.zeros(n)
    lam2 = damping * damping
    if k >= m:
        g = np.empty((m, m))
        for i in range(m):
            for j in range(m):
                acc = 0.0
                for c in range(k):
                    acc += a[i, cols[c]] * a[j, cols[c]]
                g[i, j] = acc + (lam2 if i == j else 0.0)
        y = _cholesky_solve(g, resid)
        for c in range(k):
            acc = 0.0
            for i in range(m):
                acc += a[i, cols[c]] * y[i]
            x[cols[c]] = acc
    else:
        g = np.empty((k, k))
        rhs = np.empty(k)
        for i in range(k):
            acc = 0.0
            for r in range(m):
                acc += a[r, cols[i]] * resid[r]
            rhs[i] = acc
            for j in range(k):
                acc = 0.0
                for r in range(m):
                    acc += a[r, cols[i]] * a[r, cols[j]]
                g[i, j] = acc + (lam2 if i == j else 0.0)
        y = _cholesky_solve(g, rhs)
        for c in range(k):
            x[cols[c]] = y[c]
    return x


@_jit
def _step(a, rhs, q, q_ref, use_bias, gain, lower, upper, damping, max_step):
    """Mirror of JacobianIK._step / _step_with_limits."""
    n = q.shape[0]
    m = a.shape[0]
    lo = lower - q
    hi = upper - q
    z = np.zeros(n)
    if use_bias:
        norm = 0.0
        for i in range(m):
            norm += rhs[i] * rhs[i]
        fade = min(1.0, math.sqrt(norm) / _BIAS_FULL_ABOVE)
        for i in range(n):
            z[i] = min(max(gain * fade * (q_ref[i] - q[i]), lo[i]), hi[i])
    free = np.ones(n, dtype=np.bool_)
    resid = np.empty(m)
    for i in range(m):
        acc = rhs[i]
        for c in range(n):
            acc -= a[i, c] * z[c]
        resid[i] = acc
    x = _dls(a, free, resid, damping)
    dq = np.empty(n)
    over = False
    for c in range(n):
        dq[c] = z[c] + x[c]
        if dq[c] < lo[c] or dq[c] > hi[c]:
            over = True
    if over:
        for c in range(n):
            if dq[c] < lo[c] or dq[c] > hi[c]:
                free[c] = False
            dq[c] = min(max(dq[c], lo[c]), hi[c])
        for _ in range(n):
            any_free = False
            for c in range(n):
                any_free = any_free or free[c]
            if not any_free:
                break
            for i in range(m):
                acc = rhs[i]
                for c in range(n):
                    acc -= a[i, c] * (z[c] if free[c] else dq[c])
                resid[i] = acc
            x = _dls(a, free, resid, damping)
            crossed = False
            for c in range(n):
                if free[c]:
                    value = z[c] + x[c]
                    if value < lo[c] or value > hi[c]:
                        crossed = True
                    dq[c] = min(max(value, lo[c]), hi[c])
            if not crossed:
                break
            for c in range(n):
                if free[c]:
                    value = z[c] + x[c]
                    if value < lo[c] or value > hi[c]:
                        free[c] = False
    biggest = 0.0
    for c in range(n):
        biggest = max(biggest, abs(dq[c]))
    if biggest > max_step:
        for c in range(n):
            dq[c] *= max_step / biggest
    return dq


@_jit
def _cost(r, use_pos, use_ori, w):
    cost = 0.0
    if use_pos:
        for i in range(3):
            cost += (w[i] * r[i]) ** 2
    if use_ori:
        for i in range(3, 6):
            cost += (w[i] * r[i]) ** 2
    return cost


@_jit
def _converged(r, use_pos, use_ori, pos_tol, ori_tol):
    if use_pos and r[0] * r[0] + r[1] * r[1] + r[2] * r[2] > pos_tol * pos_tol:
        return False
    if use_ori and r[3] * r[3] + r[4] * r[4] + r[5] * r[5] > ori_tol * ori_tol:
        return False
    return True


@_jit
def descend(pre_rot, pre_trans, axis, prismatic, driver, mult, offset, tip, n, lower, upper,
            target, q0, q_ref, use_pos, use_ori, w, gain, max_step, max_iterations, pos_tol,
            ori_tol):
    """Run one LM attempt; returns (q, converged, cost, iterations, residual of q)."""
    m_joints = axis.shape[0]
    rows = (3 if use_pos else 0) + (3 if use_ori else 0)
    cum_r = np.empty((m_joints, 3, 3))
    cum_p = np.empty((m_joints, 3))
    tip_r = np.empty((3, 3))
    tip_p = np.empty(3)
    jac = np.empty((6, n))
    a = np.empty((rows, n))
    rhs = np.empty(rows)
    r = np.empty(6)
    r_new = np.empty(6)
    q = q0.copy()
    _forward(q, pre_rot, pre_trans, axis, prismatic, driver, mult, offset, tip, cum_r, cum_p,
             tip_r, tip_p)
    _residual(target, tip_r, tip_p, r)
    cost = _cost(r, use_pos, use_ori, w)
    damping = _DAMPING_START
    history = np.empty(max_iterations + 1)
    history[0] = cost
    count = 1
    for it in range(max_iterations):
        if _converged(r, use_pos, use_ori, pos_tol, ori_tol):
            return q, True, cost, it, r
        _jacobian(axis, prismatic, driver, mult, cum_r, cum_p, tip_p, jac)
        _task(jac, r, use_pos, use_ori, w, a, rhs)
        bias = gain > 0.0
        while True:
            dq = _step(a, rhs, q, q_ref, bias, gain, lower, upper, damping, max_step)
            q_new = np.empty_like(q)
            for i in range(q.shape[0]):
                q_new[i] = min(max(q[i] + dq[i], lower[i]), upper[i])
            _forward(q_new, pre_rot, pre_trans, axis, prismatic, driver, mult, offset, tip,
                     cum_r, cum_p, tip_r, tip_p)
            _residual(target, tip_r, tip_p, r_new)
            cost_new = _cost(r_new, use_pos, use_ori, w)
            if cost_new < cost:
                damping = max(damping * _DAMPING_DOWN, _DAMPING_MIN)
                break
            bias = False
            damping *= _DAMPING_UP
            if damping > _DAMPING_MAX:
                return q, _converged(r, use_pos, use_ori, pos_tol, ori_tol), cost, it + 1, r
        q = q_new
        for i in range(6):
            r[i] = r_new[i]
        cost = cost_new
        history[count] = cost
        count += 1
        if count > _STALL_WINDOW and \
                cost > (1.0 - _STALL_FRACTION) * history[count - 1 - _STALL_WINDOW]:
            return q, _converged(r, use_pos, use_ori, pos_tol, ori_tol), cost, it + 1, r
    return q, _converged(r, use_pos, use_ori, pos_tol, ori_tol), cost, max_iterations, r
