# SPDX-License-Identifier: Apache-2.0
"""The local steps toward a moving pose: the one source of both backends.

:func:`follow` is :func:`ik_node.core.ik.local.follow` in one call: damped
least-squares steps from the singular values of the Jacobian (Nakamura &
Hanafusa's singularity-robust inverse below ``sigma_floor``), a step that does
not lower the error halved, a stop at the tolerances; forward kinematics,
Jacobian and residual are :mod:`ik_node.core.kernels.base`'s. What a tick
runs for every moving goal (issue 50: the numpy steps were half of a
tick's time). Written in the numba subset on small numpy arrays: the numba
backend compiles it (the warm-up, ik_node.core.warm, before a tick calls
it), the numpy backend runs it under CPython. The tests hold both to a
numpy reference written apart (test/helpers/ik_reference.py).
"""

import math

from ik_node.core.kernels.base import chain_frames, chain_jacobian, pose_residual
import numpy as np


def errors(r):
    """Return (position error m, orientation error rad) of a residual (6,)."""
    return (math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]),
            math.sqrt(r[3] * r[3] + r[4] * r[4] + r[5] * r[5]))


def posed(q, fk, target_r, target_p, frames, columns):
    """Return (Jacobian (6, n), residual (6,)) at q (n,) toward the target (frames: scratch)."""
    tip_r, tip_p = chain_frames(q, fk, frames)
    r = np.array(pose_residual(target_r, target_p, tip_r, tip_p))
    chain_jacobian(frames, fk, tip_p, q.shape[0], columns)
    return np.ascontiguousarray(np.asarray(columns).T), r


def damped_step(jac, r, sigma_floor, max_damping):
    """Return the step (n,) ``sum_i s_i / (s_i^2 + l^2) v_i u_i^T r`` (jac (6, n), r (6,)).

    ``l^2 = (1 - (s_min / sigma_floor)^2) max_damping^2`` when the smallest
    singular value s_min is below sigma_floor, else 0 (the pseudo-inverse).
    """
    u, s, vt = np.linalg.svd(jac, full_matrices=False)
    smallest = s[s.shape[0] - 1]
    damping2 = 0.0
    if smallest < sigma_floor:
        damping2 = (1.0 - (smallest / sigma_floor) ** 2) * max_damping * max_damping
    return vt.T @ ((s / (s * s + damping2)) * (u.T @ r))


def follow(fk, lower, upper, target, q0, iterations, tol_pos, tol_rot, sigma_floor,
           max_damping, backtracks, frames, columns):
    """Return (q (n,), first errors (m, rad), errors at q, converged) of the local steps.

    From q0 clipped into [lower, upper] toward the 4x4 ``target``: at most
    ``iterations`` damped steps, each taken (or halved up to ``backtracks``
    times) only if it lowers the squared error; stops within (tol_pos,
    tol_rot). ``frames``, ``columns``: scratch rows (Backend.rows: one per
    movable joint of 12, one per free joint of 6).
    """
    target_r = (target[0, 0], target[0, 1], target[0, 2], target[1, 0], target[1, 1],
                target[1, 2], target[2, 0], target[2, 1], target[2, 2])
    target_p = (target[0, 3], target[1, 3], target[2, 3])
    q = np.minimum(np.maximum(q0, lower), upper)
    jac, r = posed(q, fk, target_r, target_p, frames, columns)
    first = errors(r)
    now = first
    for _ in range(iterations):
        if now[0] <= tol_pos and now[1] <= tol_rot:
            break
        dq = damped_step(jac, r, sigma_floor, max_damping)
        value = now[0] * now[0] + now[1] * now[1]
        taken = False
        for _ in range(backtracks):
            q_new = np.minimum(np.maximum(q + dq, lower), upper)
            jac_new, r_new = posed(q_new, fk, target_r, target_p, frames, columns)
            e_new = errors(r_new)
            if e_new[0] * e_new[0] + e_new[1] * e_new[1] < value:
                q, jac, r, now = q_new, jac_new, r_new, e_new
                taken = True
                break
            dq = 0.5 * dq
        if not taken:
            break
    return q, first, now, now[0] <= tol_pos and now[1] <= tol_rot
