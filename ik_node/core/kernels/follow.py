# SPDX-License-Identifier: Apache-2.0
"""The local steps toward a moving pose: the one source of both backends.

:func:`follow` is :func:`ik_node.core.ik.local.follow` in one call: damped
least-squares steps from the singular values of the Jacobian (Nakamura &
Hanafusa's singularity-robust inverse below ``sigma_floor``), a step that does
not lower the error halved, a stop at the tolerances; for a task
(lm_constants.TASK_*: an axis task's position first, :func:`priority_step`).
Forward kinematics and Jacobian are :mod:`ik_node.core.kernels.base`'s, a
task's residual and rows :mod:`ik_node.core.kernels.lm`'s. What a tick
runs for every moving goal (issue 50: the numpy steps were half of a
tick's time). Written in the numba subset on small numpy arrays: the numba
backend compiles it (the warm-up, ik_node.core.warm, before a tick calls
it), the numpy backend runs it under CPython. The tests hold both to a
numpy reference written apart (test/helpers/ik_reference.py).
"""

import math

from ik_node.core.kernels.base import chain_frames, chain_jacobian
from ik_node.core.kernels.lm import residual, task_rows, uses_orientation, uses_position
from ik_node.core.kernels.lm_constants import AXIS_PRIORITY, TASK_AXIS, TASK_LOOK_AT, \
    TASK_POSE
import numpy as np

# A singular value of the position rows below this fraction of the largest
# leaves its direction to the axis rows (priority_step's null space).
RANK_FRACTION = 1e-9


def errors(r, task):
    """Return (position error m, orientation error: rad or an axis' chord) of a residual (6,).

    0 for the part the task (lm_constants.TASK_*) does not count.
    """
    pos = math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]) if uses_position(task) else 0.0
    rot = math.sqrt(r[3] * r[3] + r[4] * r[4] + r[5] * r[5]) if uses_orientation(task) else 0.0
    return pos, rot


def better(e_new, e, task):
    """Return True when errors ``e_new`` are better than ``e`` (m, rad or chord) for the task.

    A lower squared sum; an axis' weighing AXIS_PRIORITY m per unit (the
    position first, ik.task.Task.cost).
    """
    w = AXIS_PRIORITY if task == TASK_AXIS else 1.0
    return e_new[0] * e_new[0] + (w * e_new[1]) * (w * e_new[1]) < \
        e[0] * e[0] + (w * e[1]) * (w * e[1])


def posed(q, fk, task, axis, target_r, target_p, frames, columns):
    """Return (rows (k, n), their error (k,), the residual (6,)) at q (n,) (frames: scratch).

    The full pose: the geometric Jacobian and the pose residual; another task:
    the descent's rows (kernels.lm.task_rows, unit weights).
    """
    tip_r, tip_p = chain_frames(q, fk, frames)
    r = residual(task, axis, target_r, target_p, tip_r, tip_p)
    chain_jacobian(frames, fk, tip_p, q.shape[0], columns)
    jac = np.ascontiguousarray(np.asarray(columns).T)
    if task == TASK_POSE:
        return jac, r, r
    a, rhs = task_rows(jac, r, task, axis, tip_r, tip_p, target_p, np.ones(6))
    return a, rhs, r


def damped_step(jac, r, sigma_floor, max_damping, drop=0):
    """Return the step (n,) ``sum_i s_i / (s_i^2 + l^2) v_i u_i^T r`` (jac (k, n), r (k,)).

    ``l^2 = (1 - (s_min / sigma_floor)^2) max_damping^2`` when the smallest
    singular value s_min is below sigma_floor, else 0 (the pseudo-inverse).
    ``drop``: the smallest singular values that are zero by construction (a
    chord's three rows have rank two): left out of the step and of s_min.
    """
    u, s, vt = np.linalg.svd(jac, full_matrices=False)
    kept = s.shape[0] - drop
    smallest = s[kept - 1]
    damping2 = 0.0
    if smallest < sigma_floor:
        damping2 = (1.0 - (smallest / sigma_floor) ** 2) * max_damping * max_damping
    gain = s / (s * s + damping2)
    gain[kept:] = 0.0
    return vt.T @ (gain * (u.T @ r))


def priority_step(a, rhs, sigma_floor, max_damping):
    """Return an axis task's step (n,) and its position part (n,) (the axis' in what is left).

    ``a`` (6, n), ``rhs`` (6,): the position rows and the axis chord's rows
    (task_rows). The position's damped step ``dq1``, plus the damped step of
    the axis rows restricted to the null space N of the position rows, toward
    what ``dq1`` leaves of the axis' error: ``dq1 + (A2 N)# (e2 - A2 dq1)``
    (the task-priority scheme of Nakamura, Hanafusa and Yoshikawa; Siciliano
    and Slotine). The position is not traded for the axis.
    """
    a1 = np.ascontiguousarray(a[:3])
    a2 = np.ascontiguousarray(a[3:])
    dq1 = damped_step(a1, np.ascontiguousarray(rhs[:3]), sigma_floor, max_damping)
    _, s, vt = np.linalg.svd(a1, full_matrices=True)
    n = a.shape[1]
    null = np.eye(n)
    for i in range(s.shape[0]):
        if s[i] > RANK_FRACTION * s[0]:
            null -= np.outer(vt[i], vt[i])
    a2n = np.ascontiguousarray(a2 @ null)
    left = np.ascontiguousarray(rhs[3:]) - a2 @ dq1
    return dq1 + null @ damped_step(a2n, left, sigma_floor, max_damping, 1), dq1


def shortened(q, a, rhs, now, dq, fk, task, axis, target_r, target_p, lower, upper,
              backtracks, frames, columns):
    """Take step dq (n,) from q, or its half, quarter, ...: the first whose errors are better.

    Returns (taken, q, rows, their error, errors) after it (q's ``a``, ``rhs``
    and ``now`` when none of ``backtracks`` lengths is better).
    """
    for _ in range(backtracks):
        q_new = np.minimum(np.maximum(q + dq, lower), upper)
        a_new, rhs_new, r_new = posed(q_new, fk, task, axis, target_r, target_p, frames,
                                      columns)
        e_new = errors(r_new, task)
        if better(e_new, now, task):
            return True, q_new, a_new, rhs_new, e_new
        dq = 0.5 * dq
    return False, q, a, rhs, now


def follow(fk, lower, upper, target, q0, task, axis, iterations, tol_pos, tol_rot, sigma_floor,
           max_damping, backtracks, frames, columns):
    """Return (q (n,), first errors (m, rad), errors at q, converged) of the local steps.

    From q0 clipped into [lower, upper] toward the 4x4 ``target``'s ``task``
    (lm_constants.TASK_*; ``axis``: the tool axis in the tip frame, a unit
    3-tuple): at most ``iterations`` damped steps (an axis task's by
    priority, :func:`priority_step`), each taken (or halved up to
    ``backtracks`` times) only if its errors are :func:`better`; stops within
    (tol_pos, tol_rot). Errors as :func:`errors`. ``frames``,
    ``columns``: scratch rows (Backend.rows: one per movable joint of 12,
    one per free joint of 6).
    """
    target_r = (target[0, 0], target[0, 1], target[0, 2], target[1, 0], target[1, 1],
                target[1, 2], target[2, 0], target[2, 1], target[2, 2])
    target_p = (target[0, 3], target[1, 3], target[2, 3])
    q = np.minimum(np.maximum(q0, lower), upper)
    a, rhs, r = posed(q, fk, task, axis, target_r, target_p, frames, columns)
    first = errors(r, task)
    now = first
    for _ in range(iterations):
        if now[0] <= tol_pos and now[1] <= tol_rot:
            break
        if task == TASK_AXIS:
            dq, first_part = priority_step(a, rhs, sigma_floor, max_damping)
        else:   # a look-at's three chord rows have rank two
            dq = damped_step(a, rhs, sigma_floor, max_damping, 1 if task == TASK_LOOK_AT else 0)
            first_part = dq
        taken, q, a, rhs, now = shortened(q, a, rhs, now, dq, fk, task, axis, target_r,
                                          target_p, lower, upper, backtracks, frames, columns)
        if not taken and task == TASK_AXIS:
            # The axis' part spoils it (a turn it cannot make there): the position's alone.
            taken, q, a, rhs, now = shortened(q, a, rhs, now, first_part, fk, task, axis,
                                              target_r, target_p, lower, upper, backtracks,
                                              frames, columns)
        if not taken:
            break
    return q, first, now, now[0] <= tol_pos and now[1] <= tol_rot
