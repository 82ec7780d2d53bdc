# SPDX-License-Identifier: Apache-2.0

"""Compiled (numba) twin of BallJointChain.update for one chain; numpy is the reference.

Same rotations, derivatives, Jacobian and minimum-norm step as
:mod:`ik_node.bench.seed000.balljoint`, for a single chain, so that the seed-000
experiment can be timed per update the way the article ran it (one chain,
compiled code). Tests check it against the numpy implementation.
"""

import math
from pathlib import Path

from ik_node.bench.seed000.balljoint import KIND_CODES, RANK_DEFICIENT_BELOW, SWAP_ABOVE
from ik_node.core.kernels.compile import cached_folder_of, K
import numba
import numpy as np

# This module's machine code includes the core's kernels (K) and seed000's own
# sources (balljoint's constants): dropped when either changes.
SEED000_DIR = Path(__file__).parent
cached_folder_of(SEED000_DIR, SEED000_DIR)

QUATERNION = KIND_CODES['quaternion']
EULER = KIND_CODES['euler']

_jit = numba.njit(cache=True, nogil=True)


@_jit
def _rotation_and_derivatives(u, kind, r, d):
    """Fill r (3, 3) and d (3, 3, 3) = dR / d u_j for one joint."""
    if kind == EULER:
        cy, sy = math.cos(u[0]), math.sin(u[0])
        cp, sp = math.cos(u[1]), math.sin(u[1])
        cr, sr = math.cos(u[2]), math.sin(u[2])
        r[0, 0], r[0, 1], r[0, 2] = cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr
        r[1, 0], r[1, 1], r[1, 2] = sy * cp, sy * sp * sr + cy * cr, sy * sp * cr - cy * sr
        r[2, 0], r[2, 1], r[2, 2] = -sp, cp * sr, cp * cr
        d[0, 0, 0], d[0, 1, 0], d[0, 2, 0] = -sy * cp, -sy * sp * sr - cy * cr, \
            -sy * sp * cr + cy * sr
        d[1, 0, 0], d[1, 1, 0], d[1, 2, 0] = cy * cp, cy * sp * sr - sy * cr, \
            cy * sp * cr + sy * sr
        d[2, 0, 0], d[2, 1, 0], d[2, 2, 0] = 0.0, 0.0, 0.0
        d[0, 0, 1], d[0, 1, 1], d[0, 2, 1] = -cy * sp, cy * cp * sr, cy * cp * cr
        d[1, 0, 1], d[1, 1, 1], d[1, 2, 1] = -sy * sp, sy * cp * sr, sy * cp * cr
        d[2, 0, 1], d[2, 1, 1], d[2, 2, 1] = -cp, -sp * sr, -sp * cr
        d[0, 0, 2], d[0, 1, 2], d[0, 2, 2] = 0.0, cy * sp * cr + sy * sr, -cy * sp * sr + sy * cr
        d[1, 0, 2], d[1, 1, 2], d[1, 2, 2] = 0.0, sy * sp * cr - cy * sr, -sy * sp * sr - cy * cr
        d[2, 0, 2], d[2, 1, 2], d[2, 2, 2] = 0.0, cp * cr, -cp * sr
        return
    x, y, z, w = K.quat_exp(u[0], u[1], u[2])
    m = K.quat_to_matrix(x, y, z, w)
    for a in range(3):
        for b in range(3):
            r[a, b] = m[3 * a + b]
    dq = K.quat_dexp(u[0], u[1], u[2])  # dq/du: 4 rows (x, y, z, w) of 3
    for j in range(3):
        dx, dy, dz, dw = dq[0][j], dq[1][j], dq[2][j], dq[3][j]
        d[0, 0, j] = -4 * (y * dy + z * dz)
        d[0, 1, j] = 2 * (x * dy + y * dx - w * dz - z * dw)
        d[0, 2, j] = 2 * (x * dz + z * dx + w * dy + y * dw)
        d[1, 0, j] = 2 * (x * dy + y * dx + w * dz + z * dw)
        d[1, 1, j] = -4 * (x * dx + z * dz)
        d[1, 2, j] = 2 * (y * dz + z * dy - w * dx - x * dw)
        d[2, 0, j] = 2 * (x * dz + z * dx - w * dy - y * dw)
        d[2, 1, j] = 2 * (y * dz + z * dy + w * dx + x * dw)
        d[2, 2, j] = -4 * (x * dx + y * dy)


@_jit
def update(offsets, params, target, step, kind):
    """One update of one chain, in place; returns 1 moved, 0 done, -1 rank-deficient."""
    n = offsets.shape[0]
    r = np.empty((n, 3, 3))
    d = np.empty((n, 3, 3, 3))
    for i in range(n):
        _rotation_and_derivatives(params[i], kind, r[i], d[i])
    suffix = np.empty((n, 3))
    for a in range(3):
        suffix[n - 1, a] = offsets[n - 1, a]
    for i in range(n - 2, -1, -1):
        for a in range(3):
            suffix[i, a] = offsets[i, a] + r[i + 1, a, 0] * suffix[i + 1, 0] \
                + r[i + 1, a, 1] * suffix[i + 1, 1] + r[i + 1, a, 2] * suffix[i + 1, 2]
    delta = np.empty(3)
    for a in range(3):
        delta[a] = target[a] - (r[0, a, 0] * suffix[0, 0] + r[0, a, 1] * suffix[0, 1]
                                + r[0, a, 2] * suffix[0, 2])
    distance = math.sqrt(delta[0] ** 2 + delta[1] ** 2 + delta[2] ** 2)
    if distance < step:
        return 0
    jac = np.empty((3, 3 * n))
    prefix = np.eye(3)
    nxt = np.empty((3, 3))
    for i in range(n):
        for j in range(3):
            v = np.empty(3)
            for b in range(3):
                v[b] = d[i, b, 0, j] * suffix[i, 0] + d[i, b, 1, j] * suffix[i, 1] \
                    + d[i, b, 2, j] * suffix[i, 2]
            for a in range(3):
                jac[a, 3 * i + j] = prefix[a, 0] * v[0] + prefix[a, 1] * v[1] + prefix[a, 2] * v[2]
        for a in range(3):
            for b in range(3):
                nxt[a, b] = prefix[a, 0] * r[i, 0, b] + prefix[a, 1] * r[i, 1, b] \
                    + prefix[a, 2] * r[i, 2, b]
        prefix[:, :] = nxt
    # J J^T by explicit loops: numba's @ needs SciPy's BLAS bindings (not a
    # dependency) and costs more than the loop for a 3 x 15 matrix.
    g = np.zeros((3, 3))
    for a in range(3):
        for b in range(3):
            acc = 0.0
            for c in range(3 * n):
                acc += jac[a, c] * jac[b, c]
            g[a, b] = acc
    det = g[0, 0] * (g[1, 1] * g[2, 2] - g[1, 2] * g[2, 1]) \
        - g[0, 1] * (g[1, 0] * g[2, 2] - g[1, 2] * g[2, 0]) \
        + g[0, 2] * (g[1, 0] * g[2, 1] - g[1, 1] * g[2, 0])
    scale = (g[0, 0] + g[1, 1] + g[2, 2]) / 3.0
    if abs(det) <= RANK_DEFICIENT_BELOW * max(scale, 1e-300) ** 3:
        return -1
    dp = delta * (step / distance)
    # x = g^-1 dp by the adjugate (g is symmetric 3x3).
    x = np.empty(3)
    x[0] = ((g[1, 1] * g[2, 2] - g[1, 2] * g[2, 1]) * dp[0]
            - (g[0, 1] * g[2, 2] - g[0, 2] * g[2, 1]) * dp[1]
            + (g[0, 1] * g[1, 2] - g[0, 2] * g[1, 1]) * dp[2]) / det
    x[1] = (-(g[1, 0] * g[2, 2] - g[1, 2] * g[2, 0]) * dp[0]
            + (g[0, 0] * g[2, 2] - g[0, 2] * g[2, 0]) * dp[1]
            - (g[0, 0] * g[1, 2] - g[0, 2] * g[1, 0]) * dp[2]) / det
    x[2] = ((g[1, 0] * g[2, 1] - g[1, 1] * g[2, 0]) * dp[0]
            - (g[0, 0] * g[2, 1] - g[0, 1] * g[2, 0]) * dp[1]
            + (g[0, 0] * g[1, 1] - g[0, 1] * g[1, 0]) * dp[2]) / det
    for i in range(n):
        for j in range(3):
            c = 3 * i + j
            params[i, j] += jac[0, c] * x[0] + jac[1, c] * x[1] + jac[2, c] * x[2]
        if kind == QUATERNION:
            norm = math.sqrt(params[i, 0] ** 2 + params[i, 1] ** 2 + params[i, 2] ** 2)
            if norm > SWAP_ABOVE:
                k = 1.0 - math.pi / norm
                for j in range(3):
                    params[i, j] *= k
    return 1


@_jit
def run_trial(offsets, params, target, step, kind, max_updates):
    """Update until done or max_updates; returns (moves, rank-deficient steps met)."""
    moves = 0
    for _ in range(max_updates):
        status = update(offsets, params, target, step, kind)
        if status == 0:
            break
        if status < 0:
            return moves, 1
        moves += 1
    return moves, 0
