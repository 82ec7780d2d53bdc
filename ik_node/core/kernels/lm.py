# SPDX-License-Identifier: Apache-2.0

"""Compiled (numba) twin of JacobianIK's descent; optional, numpy is the reference.

One attempt of :meth:`ik_node.core.ik.jacobian.JacobianIK._descend`: the
forward kinematics, Jacobian, residual and inverse right Jacobian are the
compiled kernels of :mod:`ik_node.core.kernels.base` (the same source the numpy
path runs); the seed bias, active-set step, damped least squares (Cholesky
here, LAPACK there), LM acceptance and stall rule are written as explicit
loops with the reference's constants. Tests check that both give the same
iterates. Imported only when numba is installed.
"""

import math

from ik_node.core.kernels import lm_constants as ref
from ik_node.core.kernels.compile import K
import numba
import numpy as np

_jit = numba.njit(cache=True, fastmath=False, nogil=False)


@_jit
def _residual(target_r, target_p, tip_r, tip_p, r):
    """Fill r (6,) with the kernels' pose residual."""
    e = K.pose_residual(target_r, target_p, tip_r, tip_p)
    for i in range(6):
        r[i] = e[i]


@_jit
def _jacobian(frames, fk, tip_p, columns, jac):
    """Fill jac (6, n) with the kernels' geometric Jacobian (columns: scratch (n, 6))."""
    K.chain_jacobian(frames, fk, tip_p, jac.shape[1], columns)
    for i in range(6):
        for k in range(jac.shape[1]):
            jac[i, k] = columns[k, i]


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
        m = K.inverse_right_jacobian((r[3], r[4], r[5]))
        for i in range(3):
            for k in range(n):
                a[row, k] = w[3 + i] * (m[3 * i] * jac[3, k] + m[3 * i + 1] * jac[4, k]
                                        + m[3 * i + 2] * jac[5, k])
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
        fade = min(1.0, math.sqrt(norm) / ref.BIAS_FULL_ABOVE)
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
def descend(fk, n, lower, upper, target_r, target_p, q0, q_ref, use_pos, use_ori, w, gain,
            max_step, max_iterations, pos_tol, ori_tol):
    """Run one LM attempt; returns (q, converged, cost, iterations, residual of q)."""
    m_joints = fk.axis.shape[0]
    rows = (3 if use_pos else 0) + (3 if use_ori else 0)
    frames = np.empty((m_joints, 12))
    columns = np.empty((n, 6))
    jac = np.empty((6, n))
    a = np.empty((rows, n))
    rhs = np.empty(rows)
    r = np.empty(6)
    r_new = np.empty(6)
    q = q0.copy()
    for i in range(q.shape[0]):   # from within the limits (callers' seeds usually are)
        q[i] = min(max(q[i], lower[i]), upper[i])
    tip_r, tip_p = K.chain_frames(q, fk, frames)
    _residual(target_r, target_p, tip_r, tip_p, r)
    cost = _cost(r, use_pos, use_ori, w)
    damping = ref.DAMPING_START
    history = np.empty(max_iterations + 1)
    history[0] = cost
    count = 1
    for it in range(max_iterations):
        if _converged(r, use_pos, use_ori, pos_tol, ori_tol):
            return q, True, cost, it, r
        _jacobian(frames, fk, tip_p, columns, jac)
        _task(jac, r, use_pos, use_ori, w, a, rhs)
        bias = gain > 0.0
        while True:
            dq = _step(a, rhs, q, q_ref, bias, gain, lower, upper, damping, max_step)
            q_new = np.empty_like(q)
            for i in range(q.shape[0]):
                q_new[i] = min(max(q[i] + dq[i], lower[i]), upper[i])
            tip_r, tip_p = K.chain_frames(q_new, fk, frames)
            _residual(target_r, target_p, tip_r, tip_p, r_new)
            cost_new = _cost(r_new, use_pos, use_ori, w)
            if cost_new < cost:
                damping = max(damping * ref.DAMPING_DOWN, ref.DAMPING_MIN)
                break
            bias = False
            damping *= ref.DAMPING_UP
            if damping > ref.DAMPING_MAX:
                # frames hold q_new's: the caller only uses q and r from here.
                return q, _converged(r, use_pos, use_ori, pos_tol, ori_tol), cost, it + 1, r
        q = q_new
        for i in range(6):
            r[i] = r_new[i]
        cost = cost_new
        history[count] = cost
        count += 1
        if count > ref.STALL_WINDOW and \
                cost > (1.0 - ref.STALL_FRACTION) * history[count - 1 - ref.STALL_WINDOW]:
            return q, _converged(r, use_pos, use_ori, pos_tol, ori_tol), cost, it + 1, r
    return q, _converged(r, use_pos, use_ori, pos_tol, ori_tol), cost, max_iterations, r


@_jit
def polish(fk, lower, upper, target, q0, w, max_step, max_iterations, tol):
    """Run :func:`descend` from q0 to a 4x4 ``target`` array, without bias; (q, converged, r).

    For the near-SRS polish: one compiled call with array arguments (the
    rotation and position tuples are built here), as cheap to enter as the
    closed form it follows.
    """
    target_r = (target[0, 0], target[0, 1], target[0, 2], target[1, 0], target[1, 1],
                target[1, 2], target[2, 0], target[2, 1], target[2, 2])
    target_p = (target[0, 3], target[1, 3], target[2, 3])
    q, ok, _, _, r = descend(fk, q0.shape[0], lower, upper, target_r, target_p, q0, q0, True,
                             True, w, 0.0, max_step, max_iterations, tol, tol)
    return q, ok, r
