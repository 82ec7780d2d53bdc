# SPDX-License-Identifier: Apache-2.0

"""Chains of ball joints (seed 000): log-quaternion IK and its Euler-angle baseline.

Joint i turns its link (and everything after it) by a rotation R_i relative
to its parent, and link i is the vector ``offset_i`` in joint i's rotated
frame. The effector position in the root frame is

    p = R_0 (o_0 + R_1 (o_1 + ... + R_{n-1} o_{n-1}))

Each rotation has three independent parameters: its log-quaternion u_i
(``R_i = R(exp(u_i))``, seed article on log-quaternion IK) or, for the
baseline the article compares against, yaw-pitch-roll angles
(``R_i = Rz(yaw) Ry(pitch) Rx(roll)``). The position Jacobian column of
parameter j of joint i is ``P_i (dR_i / d theta_ij) s_i`` with
``P_i = R_0 ... R_{i-1}`` and ``s_i = o_i + R_{i+1} s_{i+1}``; for log-
quaternions ``dR/du = sum_k dR/dq_k dq_k/du`` (``rotations.drot_dquat`` and
``rotations.dexp``).

Everything is vectorised over a leading batch of independent chains: params
(N, n, 3), positions (N, 3), Jacobians (N, 3, 3n).
"""

from typing import Tuple

from ik_node.core import rotations as rot
from ik_node.core.errors import InvalidInputError
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

PARAMETERIZATIONS = ('quaternion', 'euler')
# Their codes in the compiled twin (_jit_balljoint), which takes numbers.
KIND_CODES = {'quaternion': 0, 'euler': 1}

# A log-quaternion longer than pi/2 (a rotation past a half turn) is swapped
# for the log of -q, u (1 - pi / |u|): the same rotation, shorter vector, so
# that exp stays far from |u| = pi where its derivative loses rank.
SWAP_ABOVE = np.pi / 2


class BallJointChain:
    """A serial chain of n ball joints with fixed link offsets.

    Args:
        offsets: (n, 3) link vectors, metres, each in its joint's frame.
        parameterization: 'quaternion' (log-quaternion u per joint) or
            'euler' (yaw, pitch, roll per joint, URDF rpy order).

    """

    def __init__(self, offsets, parameterization: str = 'quaternion'):
        """Validate the offsets and the parameterisation."""
        if parameterization not in PARAMETERIZATIONS:
            raise InvalidInputError(f'parameterization: expected one of '
                                    f'{", ".join(PARAMETERIZATIONS)}, received '
                                    f'{parameterization!r}')
        arr = np.asarray(offsets, dtype=np.float64)
        if arr.ndim != 2 or arr.shape[1] != 3 or arr.shape[0] < 1 or \
                not np.all(np.isfinite(arr)):
            raise InvalidInputError(f'offsets: expected finite (n, 3) link vectors, received '
                                    f'shape {arr.shape}')
        self.offsets = arr
        self.n = arr.shape[0]
        self.parameterization = parameterization

    # -- rotations and their derivatives ---------------------------------------

    def rotations(self, params: FloatArray) -> FloatArray:
        """Return (N, n, 3, 3) joint rotations for params (N, n, 3)."""
        if self.parameterization == 'quaternion':
            return rot._to_matrix(rot._exp(params))
        return rot.ypr_to_matrix(params[..., 0], params[..., 1], params[..., 2])

    def rotation_derivatives(self, params: FloatArray) -> FloatArray:
        """Return (N, n, 3, 3, 3): ``out[..., :, :, j] = dR / d params[..., j]``."""
        if self.parameterization == 'quaternion':
            q = rot._exp(params)
            return np.einsum('...abk,...kj->...abj', rot._drot_dquat(q), rot._dexp(params))
        return _ypr_derivatives(params[..., 0], params[..., 1], params[..., 2])

    # -- kinematics ---------------------------------------------------------------

    def _prefix_suffix(self, r: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """Return P (N, n, 3, 3), P_i = R_0..R_{i-1}, and s (N, n, 3)."""
        batch = r.shape[0]
        prefix = np.empty((batch, self.n, 3, 3))
        prefix[:, 0] = np.eye(3)
        for i in range(1, self.n):
            prefix[:, i] = np.matmul(prefix[:, i - 1], r[:, i - 1])
        suffix = np.empty((batch, self.n, 3))
        suffix[:, -1] = self.offsets[-1]
        for i in range(self.n - 2, -1, -1):
            suffix[:, i] = self.offsets[i] + np.einsum('nab,nb->na', r[:, i + 1], suffix[:, i + 1])
        return prefix, suffix

    def forward(self, params) -> FloatArray:
        """Effector positions (N, 3) in the root frame for params (N, n, 3)."""
        p = self._check(params)
        r = self.rotations(p)
        _, suffix = self._prefix_suffix(r)
        return np.einsum('nab,nb->na', r[:, 0], suffix[:, 0])

    def jacobian(self, params) -> FloatArray:
        """Position Jacobians (N, 3, 3n): column 3i + j is d p / d params[:, i, j]."""
        p = self._check(params)
        return self._jacobian(p, self.rotations(p))

    def _jacobian(self, params: FloatArray, r: FloatArray) -> FloatArray:
        prefix, suffix = self._prefix_suffix(r)
        d_r = self.rotation_derivatives(params)            # (N, n, b, c, j)
        # v[n, i, j, b] = sum_c dR[n, i, b, c, j] s[n, i, c]; then P_i v.
        v = np.matmul(d_r.transpose(0, 1, 4, 2, 3), suffix[:, :, None, :, None])[..., 0]
        cols = np.matmul(prefix, v.transpose(0, 1, 3, 2))  # (N, n, a, j)
        return cols.transpose(0, 2, 1, 3).reshape(params.shape[0], 3, 3 * self.n)

    def _check(self, params) -> FloatArray:
        arr = np.asarray(params, dtype=np.float64)
        if arr.ndim != 3 or arr.shape[1:] != (self.n, 3):
            raise InvalidInputError(f'params: expected shape (N, {self.n}, 3), received '
                                    f'{arr.shape}')
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError('params: expected finite numbers, received NaN or inf')
        return arr

    # -- the seed's IK update ------------------------------------------------------

    def update(self, params, target, step: float):
        """One update of the seed article: move the effector ``step`` toward target.

        ``dp = step (target - p) / |target - p|``, ``d params = J^+ dp`` (SVD
        pseudo-inverse), applied to the chains whose distance to the target
        is at least ``step``; the others are done.

        Args:
            params: (N, n, 3) parameters, updated in place.
            target: (N, 3) effector targets, metres.
            step: effector displacement per update, metres.

        Returns:
            (N,) bool, True for the chains that moved (not yet done).

        """
        r = self.rotations(params)
        _, suffix = self._prefix_suffix(r)
        position = np.einsum('nab,nb->na', r[:, 0], suffix[:, 0])
        delta = target - position
        distance = np.linalg.norm(delta, axis=1)
        moving = distance >= step
        if not moving.any():
            return moving
        idx = np.flatnonzero(moving)
        jac = self._jacobian(params[idx], r[idx])
        dp = delta[idx] * (step / distance[idx])[:, None]
        d_params = minimum_norm_solution(jac, dp)
        params[idx] += d_params.reshape(-1, self.n, 3)
        if self.parameterization == 'quaternion':
            _swap_long_logs(params)
        return moving


# J J^T with a determinant below this (relative to its scale cubed) is
# treated as rank-deficient and solved by the SVD pseudo-inverse instead.
RANK_DEFICIENT_BELOW = 1e-12


def minimum_norm_solution(jac: FloatArray, dp: FloatArray) -> FloatArray:
    """Return J^+ dp for a batch of wide Jacobians (N, m, k), m <= k.

    J^T (J J^T)^-1 dp, the pseudo-inverse solution when J has full row rank;
    rows whose J J^T is (near) singular fall back to the SVD pseudo-inverse,
    which truncates the null singular values as the seed's GSL code does.
    """
    gram = np.matmul(jac, jac.transpose(0, 2, 1))
    scale = np.trace(gram, axis1=1, axis2=2) / gram.shape[1]
    singular = np.abs(np.linalg.det(gram)) <= RANK_DEFICIENT_BELOW * np.maximum(scale, 1e-300) ** 3
    out = np.empty((jac.shape[0], jac.shape[2]))
    ok = ~singular
    if ok.any():
        x = np.linalg.solve(gram[ok], dp[ok][:, :, None])
        out[ok] = np.matmul(jac[ok].transpose(0, 2, 1), x)[:, :, 0]
    if singular.any():
        out[singular] = np.einsum('nij,nj->ni', np.linalg.pinv(jac[singular]), dp[singular])
    return out


def _swap_long_logs(params: FloatArray) -> None:
    """Replace log-quaternions longer than SWAP_ABOVE by the log of -q (in place)."""
    norm = np.linalg.norm(params, axis=-1, keepdims=True)
    long = norm > SWAP_ABOVE
    if long.any():
        params[:] = np.where(long, params * (1.0 - np.pi / np.where(long, norm, 1.0)), params)


def _ypr_derivatives(yaw, pitch, roll) -> FloatArray:
    """Return (..., 3, 3, 3): d/d(yaw, pitch, roll) of Rz(yaw) Ry(pitch) Rx(roll)."""
    cy, sy, cp, sp, cr, sr = (np.cos(yaw), np.sin(yaw), np.cos(pitch), np.sin(pitch),
                              np.cos(roll), np.sin(roll))
    zero = np.zeros_like(yaw)
    d_yaw = np.stack((-sy * cp, -sy * sp * sr - cy * cr, -sy * sp * cr + cy * sr,
                      cy * cp, cy * sp * sr - sy * cr, cy * sp * cr + sy * sr,
                      zero, zero, zero), axis=-1)
    d_pitch = np.stack((-cy * sp, cy * cp * sr, cy * cp * cr,
                        -sy * sp, sy * cp * sr, sy * cp * cr,
                        -cp, -sp * sr, -sp * cr), axis=-1)
    d_roll = np.stack((zero, cy * sp * cr + sy * sr, -cy * sp * sr + sy * cr,
                       zero, sy * sp * cr - cy * sr, -sy * sp * sr - cy * cr,
                       zero, cp * cr, -cp * sr), axis=-1)
    out = np.stack((d_yaw, d_pitch, d_roll), axis=-1)
    return out.reshape(np.shape(yaw) + (3, 3, 3))
