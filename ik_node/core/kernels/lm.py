# SPDX-License-Identifier: Apache-2.0

"""The Levenberg-Marquardt descent of JacobianIK: one attempt, the one source of both backends.

:func:`descend` is one attempt of :class:`ik_node.core.ik.jacobian.JacobianIK`
(its module docstring gives the method): the seed bias, the active set of
joints at their limits, damped least squares, LM acceptance and the stall
rule. Written in the numba subset on small numpy arrays: the numba backend
compiles it, the numpy backend runs it under CPython (whole-array operations,
so that each costs one numpy call there). The forward kinematics, Jacobian,
residual and inverse right Jacobian are :mod:`ik_node.core.kernels.base`'s.
The tests hold both backends to a numpy reference written apart
(test/helpers/ik_reference.py).

Joints (n,) in rad (m for prismatic joints); poses in the chain's base frame;
residuals [position m; rotation vector rad].
"""

import math

from ik_node.core.kernels.base import chain_frames, chain_jacobian, inverse_right_jacobian, \
    pose_residual
from ik_node.core.kernels.lm_constants import BIAS_FULL_ABOVE, DAMPING_DOWN, DAMPING_MAX, \
    DAMPING_MIN, DAMPING_START, DAMPING_UP, STALL_FRACTION, STALL_WINDOW
import numpy as np


def evaluate(q, fk, target_r, target_p, frames):
    """Pose the chain at q (n,) into ``frames``; return (residual (6,), tip position 3-tuple)."""
    tip_r, tip_p = chain_frames(q, fk, frames)
    return np.array(pose_residual(target_r, target_p, tip_r, tip_p)), tip_p


def jacobian(frames, fk, tip_p, n, columns):
    """Return the (6, n) geometric Jacobian at the posed ``frames`` (columns: scratch, n rows)."""
    chain_jacobian(frames, fk, tip_p, n, columns)
    return np.ascontiguousarray(np.asarray(columns).T)


def task(jac, r, use_pos, use_ori, w):
    """Return (A, rhs): the goal rows [J_v; Jr^-1(phi) J_w] and the residual's, weighted by w."""
    rows = (3 if use_pos else 0) + (3 if use_ori else 0)
    a = np.empty((rows, jac.shape[1]))
    rhs = np.empty(rows)
    row = 0
    if use_pos:
        for i in range(3):
            a[row] = w[i] * jac[i]
            rhs[row] = w[i] * r[i]
            row += 1
    if use_ori:
        turn = np.array(inverse_right_jacobian((r[3], r[4], r[5]))).reshape((3, 3)) @ \
            np.ascontiguousarray(jac[3:])
        for i in range(3):
            a[row] = w[3 + i] * turn[i]
            rhs[row] = w[3 + i] * r[3 + i]
            row += 1
    return a, rhs


def cost(r, use_pos, use_ori, w):
    """Return the weighted squared residual of the goal rows."""
    total = 0.0
    if use_pos:
        for i in range(3):
            total += (w[i] * r[i]) ** 2
    if use_ori:
        for i in range(3, 6):
            total += (w[i] * r[i]) ** 2
    return total


def converged(r, use_pos, use_ori, pos_tol, ori_tol):
    """Return True when the goal rows' errors are within (pos_tol m, ori_tol rad)."""
    if use_pos and r[0] * r[0] + r[1] * r[1] + r[2] * r[2] > pos_tol * pos_tol:
        return False
    if use_ori and r[3] * r[3] + r[4] * r[4] + r[5] * r[5] > ori_tol * ori_tol:
        return False
    return True


def dls(a, resid, damping):
    """Minimum-norm damped least squares: argmin |resid - a x|^2 + damping^2 |x|^2, x (k,)."""
    m, k = a.shape
    lam2 = damping * damping
    if k >= m:
        g = a @ a.T
        for i in range(m):
            g[i, i] += lam2
        return a.T @ np.linalg.solve(g, resid)
    g = a.T @ a
    for i in range(k):
        g[i, i] += lam2
    return np.linalg.solve(g, a.T @ resid)


def step(a, rhs, q, q_ref, use_bias, gain, lower, upper, damping, max_step):
    """Return the damped joint motion of one iteration, (n,): toward q_ref when ``use_bias``.

    The seed bias fades with the residual (a constant pull would keep adding
    second-order task error and spoil the final quadratic convergence).
    Joints whose step would leave their range are put on the limit and
    removed, and the rest solved again (:func:`step_with_limits`); the step
    is then scaled to at most ``max_step`` in every joint.
    """
    room_lo = lower - q
    room_hi = upper - q
    if use_bias:
        fade = min(1.0, math.sqrt(np.dot(rhs, rhs)) / BIAS_FULL_ABOVE)
        z = np.minimum(np.maximum((gain * fade) * (q_ref - q), room_lo), room_hi)
        dq = z + dls(a, rhs - a @ z, damping)
    else:
        z = np.zeros(q.shape[0])
        dq = dls(a, rhs, damping)
    over = (dq < room_lo) | (dq > room_hi)
    if np.any(over):
        dq = step_with_limits(a, rhs, z, dq, over, room_lo, room_hi, damping)
    biggest = np.max(np.abs(dq))
    if biggest > max_step:
        dq = dq * (max_step / biggest)
    return dq


def step_with_limits(a, rhs, z, dq, over, room_lo, room_hi, damping):
    """Repeat the step with the joints that crossed a limit pinned to it (at most n passes)."""
    free = ~over
    dq = np.minimum(np.maximum(dq, room_lo), room_hi)
    for _ in range(dq.shape[0]):
        if not np.any(free):
            break
        idx = np.flatnonzero(free)
        pinned = np.flatnonzero(~free)
        af = np.ascontiguousarray(a[:, idx])
        resid = rhs - af @ z[idx]
        if pinned.shape[0] > 0:
            resid = resid - np.ascontiguousarray(a[:, pinned]) @ dq[pinned]
        dq_f = z[idx] + dls(af, resid, damping)
        lo, hi = room_lo[idx], room_hi[idx]
        crossed = (dq_f < lo) | (dq_f > hi)
        dq[idx] = np.minimum(np.maximum(dq_f, lo), hi)
        if not np.any(crossed):
            break
        free[idx[crossed]] = False
    return dq


def descend(fk, n, lower, upper, target_r, target_p, q0, q_ref, use_pos, use_ori, w, gain,
            max_step, max_iterations, pos_tol, ori_tol, frames, columns):
    """Run one LM attempt from q0; return (q, converged, cost, iterations, residual at q).

    Args:
        fk: the chain's ChainTables (Backend.fk); n: its free joints.
        lower, upper: (n,) joint limits.
        target_r, target_p: the target's rotation (9-tuple, row-major) and position (3-tuple).
        q0: (n,) where to start (clipped into the limits); q_ref: (n,) the seed
            the null space is biased toward (``gain`` of the way per iteration, 0: none).
        use_pos, use_ori: the goal rows (position, orientation); w: (6,) their weights.
        max_step: the largest joint change per iteration; max_iterations: the cap.
        pos_tol, ori_tol: converged within these, m and rad.
        frames, columns: scratch rows (Backend.rows: one per movable joint
            of 12, one per free joint of 6).

    """
    q = np.minimum(np.maximum(q0, lower), upper)   # from within the limits
    r, tip_p = evaluate(q, fk, target_r, target_p, frames)
    value = cost(r, use_pos, use_ori, w)
    damping = DAMPING_START
    history = np.empty(max_iterations + 1)
    history[0] = value
    count = 1
    for it in range(max_iterations):
        if converged(r, use_pos, use_ori, pos_tol, ori_tol):
            return q, True, value, it, r
        a, rhs = task(jacobian(frames, fk, tip_p, n, columns), r, use_pos, use_ori, w)
        bias = gain > 0.0
        while True:
            q_new = np.minimum(np.maximum(
                q + step(a, rhs, q, q_ref, bias, gain, lower, upper, damping, max_step),
                lower), upper)
            r_new, tip_new = evaluate(q_new, fk, target_r, target_p, frames)
            value_new = cost(r_new, use_pos, use_ori, w)
            if value_new < value:
                damping = max(damping * DAMPING_DOWN, DAMPING_MIN)
                break
            # Again without the seed bias: with it, a heavily damped step
            # tends to the bias itself rather than to zero.
            bias = False
            damping *= DAMPING_UP
            if damping > DAMPING_MAX:
                # frames hold q_new's: only q and r are used from here.
                return q, converged(r, use_pos, use_ori, pos_tol, ori_tol), value, it + 1, r
        q, r, tip_p, value = q_new, r_new, tip_new, value_new
        history[count] = value
        count += 1
        before = history[count - 1 - STALL_WINDOW] if count > STALL_WINDOW else math.inf
        if value > (1.0 - STALL_FRACTION) * before:
            return q, converged(r, use_pos, use_ori, pos_tol, ori_tol), value, it + 1, r
    return q, converged(r, use_pos, use_ori, pos_tol, ori_tol), value, max_iterations, r


def polish(fk, lower, upper, target, q0, w, max_step, max_iterations, tol, frames, columns):
    """Run :func:`descend` from q0 to a 4x4 ``target`` array, without bias; (q, converged, r).

    For the near-SRS polish: one compiled call with array arguments (the
    rotation and position tuples are built here), as cheap to enter as the
    closed form it follows.
    """
    target_r = (target[0, 0], target[0, 1], target[0, 2], target[1, 0], target[1, 1],
                target[1, 2], target[2, 0], target[2, 1], target[2, 2])
    target_p = (target[0, 3], target[1, 3], target[2, 3])
    q, ok, _, _, r = descend(fk, q0.shape[0], lower, upper, target_r, target_p, q0, q0, True,
                             True, w, 0.0, max_step, max_iterations, tol, tol, frames, columns)
    return q, ok, r
