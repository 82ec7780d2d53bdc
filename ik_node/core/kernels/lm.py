# SPDX-License-Identifier: Apache-2.0

"""The Levenberg-Marquardt descent of JacobianIK: one attempt, the one source of both backends.

:func:`descend` is one attempt of :class:`ik_node.core.ik.jacobian.JacobianIK`
(its module docstring gives the method): the seed bias, the active set of
joints at their limits, damped least squares, LM acceptance and the stall
rule, for one task (lm_constants.TASK_*): the full pose, the position or the
orientation alone, the position with a tool axis along a direction (its turn
about the axis free), or the tool axis pointing at a point. A tool axis ``a``
(the tip's rotation times the unit ``axis`` of the tip frame) is compared
with the direction ``d`` it should have by the chord ``d - a``: zero only
when they agree, |d - a| = 2 sin(angle / 2), and its derivative is exact
(``da = w x a`` for the tip's angular velocity ``w``; a look-at's
``dd = -(I - d d^T) dp / |t - p|``). Written in the numba subset on small
numpy arrays: the numba backend compiles it, the numpy backend runs it under
CPython (whole-array operations, so that each costs one numpy call there).
The forward kinematics, Jacobian, pose residual and inverse right Jacobian
are :mod:`ik_node.core.kernels.base`'s.
The tests hold both backends to a numpy reference written apart
(test/helpers/ik_reference.py).

Joints (n,) in rad (m for prismatic joints); poses in the chain's base frame;
residuals [position m; rotation vector rad].
"""

import math

from ik_node.core.kernels.base import chain_frames, chain_jacobian, inverse_right_jacobian, \
    mat_vec, pose_residual
from ik_node.core.kernels.lm_constants import BIAS_FULL_ABOVE, DAMPING_DOWN, DAMPING_MAX, \
    DAMPING_MIN, DAMPING_START, DAMPING_UP, LOOK_AT_NEAREST, STALL_FRACTION, STALL_WINDOW, \
    TASK_AXIS, TASK_LOOK_AT, TASK_ORIENTATION, TASK_POSE, TASK_POSITION
import numpy as np


def uses_position(task):
    """Return True when the task's position rows count."""
    return task != TASK_ORIENTATION and task != TASK_LOOK_AT


def uses_orientation(task):
    """Return True when the task's orientation rows count."""
    return task != TASK_POSITION


def residual(task, axis, target_r, target_p, tip_r, tip_p):
    """Return the task's error (6,): [position block; orientation block] (module docstring).

    ``axis``: the tool axis in the tip frame (unit 3-vector; axis and look-at tasks).
    """
    if task != TASK_AXIS and task != TASK_LOOK_AT:
        return np.array(pose_residual(target_r, target_p, tip_r, tip_p))
    a = mat_vec(tip_r, (axis[0], axis[1], axis[2]))
    out = np.zeros(6)
    if task == TASK_AXIS:
        d = mat_vec(target_r, (axis[0], axis[1], axis[2]))
        for i in range(3):
            out[i] = target_p[i] - tip_p[i]
    else:
        t = np.array([target_p[0] - tip_p[0], target_p[1] - tip_p[1], target_p[2] - tip_p[2]])
        length = math.sqrt(np.dot(t, t))
        if length < LOOK_AT_NEAREST:
            return out
        d = (t[0] / length, t[1] / length, t[2] / length)
    for i in range(3):
        out[3 + i] = d[i] - a[i]
    return out


def evaluate(q, fk, task, axis, target_r, target_p, frames):
    """Pose the chain at q (n,) into ``frames``; return (residual (6,), tip rotation, position)."""
    tip_r, tip_p = chain_frames(q, fk, frames)
    return residual(task, axis, target_r, target_p, tip_r, tip_p), tip_r, tip_p


def jacobian(frames, fk, tip_p, n, columns):
    """Return the (6, n) geometric Jacobian at the posed ``frames`` (columns: scratch, n rows)."""
    chain_jacobian(frames, fk, tip_p, n, columns)
    return np.ascontiguousarray(np.asarray(columns).T)


def task_rows(jac, r, task, axis, tip_r, tip_p, target_p, w):
    """Return (A, rhs): the task's rows and residual, weighted by w (6,); dr = -A dq.

    Position rows ``J_v``; a rotation vector's ``Jr^-1(phi) J_w``; an axis
    chord's ``-[a]x J_w``; a look-at chord's ``(I - d d^T) J_v / |t - p| -
    [a]x J_w`` (module docstring). jac: (6, n) the geometric Jacobian.
    """
    use_pos, use_ori = uses_position(task), uses_orientation(task)
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
        turn = np.ascontiguousarray(jac[3:])
        if task == TASK_AXIS or task == TASK_LOOK_AT:
            u = mat_vec(tip_r, (axis[0], axis[1], axis[2]))
            # -[a]x: the rows of the tool axis' motion, da = w x a.
            skew = np.array([[0.0, u[2], -u[1]], [-u[2], 0.0, u[0]], [u[1], -u[0], 0.0]])
            rows_of = skew @ turn
            if task == TASK_LOOK_AT:
                t = np.array([target_p[0] - tip_p[0], target_p[1] - tip_p[1],
                              target_p[2] - tip_p[2]])
                length = max(math.sqrt(np.dot(t, t)), LOOK_AT_NEAREST)
                d = t / length
                rows_of = rows_of + ((np.eye(3) - np.outer(d, d)) / length) @ \
                    np.ascontiguousarray(jac[:3])
        else:
            rows_of = np.array(inverse_right_jacobian((r[3], r[4], r[5]))).reshape((3, 3)) @ turn
        for i in range(3):
            a[row] = w[3 + i] * rows_of[i]
            rhs[row] = w[3 + i] * r[3 + i]
            row += 1
    return a, rhs


def cost(r, task, w):
    """Return the weighted squared residual of the task's rows."""
    total = 0.0
    if uses_position(task):
        for i in range(3):
            total += (w[i] * r[i]) ** 2
    if uses_orientation(task):
        for i in range(3, 6):
            total += (w[i] * r[i]) ** 2
    return total


def converged(r, task, pos_tol, ori_tol):
    """Return True when the task's errors are within (pos_tol m, ori_tol rad or chord)."""
    if uses_position(task) and r[0] * r[0] + r[1] * r[1] + r[2] * r[2] > pos_tol * pos_tol:
        return False
    if uses_orientation(task) and r[3] * r[3] + r[4] * r[4] + r[5] * r[5] > ori_tol * ori_tol:
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


def descend(fk, n, lower, upper, target_r, target_p, q0, q_ref, task, axis, w, gain,
            max_step, max_iterations, pos_tol, ori_tol, frames, columns):
    """Run one LM attempt from q0; return (q, converged, cost, iterations, residual at q).

    Args:
        fk: the chain's ChainTables (Backend.fk).
        n: the chain's free joints.
        lower: (n,) lower joint limits.
        upper: (n,) upper joint limits.
        target_r: the target's rotation, a 9-tuple (row-major).
        target_p: the target's position, a 3-tuple, m.
        q0: (n,) where to start (clipped into the limits).
        q_ref: (n,) the seed the null space is biased toward.
        task: what counts (lm_constants.TASK_*).
        axis: the tool axis in the tip frame, a unit 3-tuple (axis and look-at tasks).
        w: (6,) the weights of the position and orientation rows.
        gain: the fraction of the way to q_ref per iteration (0: no bias).
        max_step: the largest joint change per iteration, rad (m).
        max_iterations: the iteration cap.
        pos_tol: converged within this position error, m.
        ori_tol: and this orientation error, rad (an axis: its chord).
        frames: scratch rows, one of 12 per movable joint (Backend.rows).
        columns: scratch rows, one of 6 per free joint (Backend.rows).

    """
    q = np.minimum(np.maximum(q0, lower), upper)   # from within the limits
    r, tip_r, tip_p = evaluate(q, fk, task, axis, target_r, target_p, frames)
    value = cost(r, task, w)
    damping = DAMPING_START
    history = np.empty(max_iterations + 1)
    history[0] = value
    count = 1
    for it in range(max_iterations):
        if converged(r, task, pos_tol, ori_tol):
            return q, True, value, it, r
        a, rhs = task_rows(jacobian(frames, fk, tip_p, n, columns), r, task, axis, tip_r,
                           tip_p, target_p, w)
        bias = gain > 0.0
        while True:
            q_new = np.minimum(np.maximum(
                q + step(a, rhs, q, q_ref, bias, gain, lower, upper, damping, max_step),
                lower), upper)
            r_new, tip_r_new, tip_new = evaluate(q_new, fk, task, axis, target_r, target_p,
                                                 frames)
            value_new = cost(r_new, task, w)
            if value_new < value:
                damping = max(damping * DAMPING_DOWN, DAMPING_MIN)
                break
            # Again without the seed bias: with it, a heavily damped step
            # tends to the bias itself rather than to zero.
            bias = False
            damping *= DAMPING_UP
            if damping > DAMPING_MAX:
                # frames hold q_new's: only q and r are used from here.
                return q, converged(r, task, pos_tol, ori_tol), value, it + 1, r
        q, r, tip_r, tip_p, value = q_new, r_new, tip_r_new, tip_new, value_new
        history[count] = value
        count += 1
        before = history[count - 1 - STALL_WINDOW] if count > STALL_WINDOW else math.inf
        if value > (1.0 - STALL_FRACTION) * before:
            return q, converged(r, task, pos_tol, ori_tol), value, it + 1, r
    return q, converged(r, task, pos_tol, ori_tol), value, max_iterations, r


def polish(fk, lower, upper, target, q0, w, max_step, max_iterations, tol, frames, columns):
    """Run :func:`descend` from q0 to a 4x4 ``target`` array's full pose, without bias.

    Returns (q, converged, r). For the near-SRS polish: one compiled call
    with array arguments (the rotation and position tuples are built here),
    as cheap to enter as the closed form it follows.
    """
    target_r = (target[0, 0], target[0, 1], target[0, 2], target[1, 0], target[1, 1],
                target[1, 2], target[2, 0], target[2, 1], target[2, 2])
    target_p = (target[0, 3], target[1, 3], target[2, 3])
    q, ok, _, _, r = descend(fk, q0.shape[0], lower, upper, target_r, target_p, q0, q0,
                             TASK_POSE, (0.0, 0.0, 1.0), w, 0.0, max_step, max_iterations,
                             tol, tol, frames, columns)
    return q, ok, r
