# SPDX-License-Identifier: Apache-2.0
"""Compiled (numba) twin of the local steps toward a moving pose; numpy is the reference.

:func:`follow` is :func:`ik_node.core.ik.local.follow` in one compiled call:
the same damped least-squares step from the singular values of the
Jacobian (Nakamura & Hanafusa's singularity-robust inverse below
SIGMA_FLOOR), the same halving of a step that does not lower the error, the
same stop at the tolerances; forward kinematics, Jacobian and residual are
the compiled kernels of :mod:`ik_node.core.kernels.base`. What a tick runs
for every moving goal (issue 50: the numpy steps were half of a tick's
time). Tests check it against the reference. Imported only when numba is
installed; the warm-up (ik_node.core.warm) compiles it before a tick does.
"""

import math

from ik_node.core.kernels.compile import K
import numba
import numpy as np

_jit = numba.njit(cache=True, fastmath=False, nogil=False)


@_jit
def _errors(r):
    """Return (position error m, orientation error rad) of a residual (6,)."""
    return (math.sqrt(r[0] * r[0] + r[1] * r[1] + r[2] * r[2]),
            math.sqrt(r[3] * r[3] + r[4] * r[4] + r[5] * r[5]))


@_jit
def _pose(q, fk, target_r, target_p, frames, columns, jac, r):
    """Fill frames, jac (6, n) and the residual r (6,) at q."""
    tip_r, tip_p = K.chain_frames(q, fk, frames)
    e = K.pose_residual(target_r, target_p, tip_r, tip_p)
    for i in range(6):
        r[i] = e[i]
    n = jac.shape[1]
    K.chain_jacobian(frames, fk, tip_p, n, columns)
    for i in range(6):
        for k in range(n):
            jac[i, k] = columns[k, i]


@_jit
def _damped_step(jac, r, sigma_floor, max_damping):
    """Return the step (n,) of local.damped_step: sum s_i / (s_i^2 + l^2) v_i u_i^T r."""
    u, s, vt = np.linalg.svd(jac, full_matrices=False)
    smallest = s[s.shape[0] - 1]
    damping2 = 0.0
    if smallest < sigma_floor:
        damping2 = (1.0 - (smallest / sigma_floor) ** 2) * max_damping * max_damping
    k = s.shape[0]
    coef = np.empty(k)
    for i in range(k):
        acc = 0.0
        for j in range(6):
            acc += u[j, i] * r[j]
        coef[i] = s[i] / (s[i] * s[i] + damping2) * acc
    n = jac.shape[1]
    step = np.zeros(n)
    for i in range(k):
        for c in range(n):
            step[c] += vt[i, c] * coef[i]
    return step


@_jit
def follow(fk, lower, upper, target, q0, iterations, tol_pos, tol_rot, sigma_floor,
           max_damping, backtracks):
    """Return (q (n,), first errors (m, rad), errors at q, converged) of the local steps.

    From q0 clipped into [lower, upper] toward the 4x4 ``target``: at most
    ``iterations`` damped steps, each taken (or halved up to ``backtracks``
    times) only if it lowers the squared error; stops within (tol_pos,
    tol_rot). As ik_node.core.ik.local._iterate with local.damped_step.
    """
    n = q0.shape[0]
    target_r = (target[0, 0], target[0, 1], target[0, 2], target[1, 0], target[1, 1],
                target[1, 2], target[2, 0], target[2, 1], target[2, 2])
    target_p = (target[0, 3], target[1, 3], target[2, 3])
    m_joints = fk.axis.shape[0]
    frames = np.empty((m_joints, 12))
    columns = np.empty((n, 6))
    jac, jac_new = np.empty((6, n)), np.empty((6, n))
    r, r_new = np.empty(6), np.empty(6)
    q = np.empty(n)
    for i in range(n):
        q[i] = min(max(q0[i], lower[i]), upper[i])
    _pose(q, fk, target_r, target_p, frames, columns, jac, r)
    first = _errors(r)
    errors = first
    for _ in range(iterations):
        if errors[0] <= tol_pos and errors[1] <= tol_rot:
            break
        step = _damped_step(jac, r, sigma_floor, max_damping)
        cost = errors[0] * errors[0] + errors[1] * errors[1]
        taken = False
        for _ in range(backtracks):
            q_new = np.empty(n)
            for i in range(n):
                q_new[i] = min(max(q[i] + step[i], lower[i]), upper[i])
            _pose(q_new, fk, target_r, target_p, frames, columns, jac_new, r_new)
            e_new = _errors(r_new)
            if e_new[0] * e_new[0] + e_new[1] * e_new[1] < cost:
                q = q_new
                for i in range(6):
                    r[i] = r_new[i]
                for i in range(6):
                    for k in range(n):
                        jac[i, k] = jac_new[i, k]
                errors = e_new
                taken = True
                break
            for i in range(n):
                step[i] *= 0.5
        if not taken:
            break
    return q, first, errors, errors[0] <= tol_pos and errors[1] <= tol_rot
