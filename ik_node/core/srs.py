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

"""Analytic IK of 7-DoF shoulder-elbow-wrist (SRS) arms (seed 001).

Model, read from the chain at its zero configuration (product of
exponentials): world joint axes w_1..w_7; the shoulder point S where axes
1-3 meet; the wrist point W where axes 5-7 meet; the elbow point E on axis 4
(S and W project onto axis 4 at the same point, so the elbow bends in a
plane); L1 = |E - S|, L2 = |W - E|; the tip pose M at zero. Then

    R(q) = Rot(w1, q1) ... Rot(w7, q7) R_M,    W(q) = S + R_03 (a + Rot(w4, q4) b)

with R_03 = Rot(w1, q1) Rot(w2, q2) Rot(w3, q3), a = E0 - S, b = W0 - E0.

For a target pose: the wrist centre is fixed by the target (W_t = T_t W_in_tip);
q4 follows from |W_t - S| by the law of cosines (two signs); the elbow lies on
the circle of points at L1 from S and L2 from W_t, and the swivel angle psi
picks the point: ``E = S + L1 (cos(beta) u + sin(beta) (cos(psi) e1 + sin(psi) e2))``
with u = (W_t - S) / |W_t - S| and e1 the component of w1 normal to u (psi = 0
puts the elbow on the side of the first joint's axis, "up" for an arm on a
table; if u is along w1, w2 is used instead). The shoulder rotation R_03 maps
(a, w4) to (E - S, the elbow axis of that plane); it is split into q1, q2, q3
with the Paden-Kahan subproblems (two solutions), and likewise the wrist
rotation into q5, q6, q7 (two solutions): 2 x 2 x 2 = 8 branches per swivel
angle. References: Tolani, Goswami & Badler 2000 (IKAN); Shimizu et al. 2008
(joint limits as swivel-angle intervals).
"""

from dataclasses import dataclass
import math
import time
from typing import List, Optional, Sequence, Tuple

from ik_node.core.backend import load_compiled
from ik_node.core.chain import Chain
from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.result import check_pose, IKResult
from ik_node.core.rotations import _from_matrix1, _log1, ORTHONORMAL_TOL
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Two axes "meet" when their closest points are nearer than this (URDF
# numbers are given to 1e-4 m or better; 1e-6 m accepts rounding only).
MEET_TOL_M = 1e-6
# Below this sine of their angle, two axes count as parallel.
PARALLEL_SIN = 1e-9
# Below this norm a direction is undefined (singular geometry) and the
# documented fallback is used.
DEGENERATE = 1e-12
# Near a stretched elbow (swivel-circle radius below this fraction of the
# upper arm) the swivel of a reference configuration is noise-dominated; the
# swivel is then chosen by least joint motion: a grid, then golden section.
STRETCHED_RADIUS = 0.05
SWIVEL_SEARCH_GRID = 24
SWIVEL_SEARCH_STEPS = 40
# An elbow angle this close beyond its limit (rounding) is put on the limit.
LIMIT_SNAP = 1e-9
# A wrist centre this far beyond the reach (or inside the fold) is still
# accepted as reachable: a target built from an exactly stretched arm
# computes as out of reach by rounding (~1e-16 m).
REACH_TOL_M = 1e-9
# Success of an analytic solve: residuals below these (the closed form is
# exact to ~1e-12; this only flags genuine misses such as a clamped reach).
POSITION_TOL_M = 1e-9
ORIENTATION_TOL_RAD = 1e-9
# Grid of swivel angles on which joint-limit crossings are bracketed, then
# refined by bisection to BISECTION_STEPS halvings (2 pi / 720 / 2^45 < 1e-15).
SWIVEL_GRID = 720
BISECTION_STEPS = 45

# The 8 branches: (elbow, shoulder, wrist) signs.
BRANCHES = np.array([(e, s, w) for e in (1, -1) for s in (1, -1) for w in (1, -1)],
                    dtype=np.float64)


# Branch orders with each branch first (the rest in BRANCHES order), built once.
_ORDERS = {tuple(int(v) for v in first): np.ascontiguousarray(np.concatenate(
    (first[None], BRANCHES[np.any(BRANCHES != first, axis=1)]))) for first in BRANCHES}


def _line_gap(p1, w1, p2, w2) -> Tuple[float, FloatArray]:
    """Distance between two lines and the point on line 2 closest to line 1."""
    n = np.cross(w1, w2)
    sn = float(np.linalg.norm(n))
    if sn < PARALLEL_SIN:
        raise ModelError('parallel')
    gap = abs(float(np.dot(p2 - p1, n))) / sn
    # Closest point on line 2: p2 + t w2, with (p2 + t w2 - p1) . (w1 x n) = 0.
    t = float(np.dot(p1 - p2, np.cross(w1, n))) / float(np.dot(w2, np.cross(w1, n)))
    return gap, p2 + t * w2


def _point_line_distance(x, p, w) -> float:
    d = x - p
    return float(np.linalg.norm(d - np.dot(d, w) * w))


@dataclass(frozen=True)
class SRSModel:
    """Geometry of an SRS arm at its zero configuration, base frame, metres."""

    axes: FloatArray         # (7, 3) unit world axes w_i
    shoulder: FloatArray     # (3,) S
    elbow0: FloatArray       # (3,) E0, on axis 4
    wrist0: FloatArray       # (3,) W0
    upper_arm: float         # L1
    forearm: float           # L2
    wrist_in_tip: FloatArray  # (3,) W in the tip frame
    tip_rotation0: FloatArray  # (3, 3) R_M
    lower: FloatArray        # (7,)
    upper: FloatArray        # (7,)
    reach_low: float         # shoulder-wrist distances the elbow's limits allow, m
    reach_high: float


def srs_model(chain: Chain) -> SRSModel:
    """Recognise an SRS arm in ``chain``; raise ModelError saying which condition fails."""
    if chain.n != 7:
        raise ModelError(f'not an SRS arm: {chain.n} free joints, an SRS arm has 7')
    if chain._has_prismatic or not chain._identity_map or chain._axis.shape[0] != 7:
        raise ModelError('not an SRS arm: needs 7 revolute joints, no prismatic or mimic joints')
    frames, tip = chain._frames(np.zeros(7))
    axes = np.einsum('jab,jb->ja', frames[:, :3, :3], chain._axis)
    points = frames[:, :3, 3]

    def meeting_point(i, j, k, label):
        try:
            gap_ij, point = _line_gap(points[i], axes[i], points[j], axes[j])
        except ModelError:
            raise ModelError(f'not an SRS arm: axes of joints {i + 1} and {j + 1} are parallel, '
                             f'so the {label} joints do not meet in one point') from None
        gap_k = _point_line_distance(point, points[k], axes[k])
        miss = max(gap_ij, gap_k)
        if miss > MEET_TOL_M:
            raise ModelError(f'not an SRS arm: axes of joints {i + 1}-{k + 1} ({label}) miss each '
                             f'other by {miss:.3g} m (tolerance {MEET_TOL_M:g} m)')
        return point

    shoulder = meeting_point(0, 1, 2, 'shoulder')
    wrist = meeting_point(4, 5, 6, 'wrist')
    w4, p4 = axes[3], points[3]
    s_along = float(np.dot(shoulder - p4, w4))
    w_along = float(np.dot(wrist - p4, w4))
    if abs(s_along - w_along) > MEET_TOL_M:
        raise ModelError(f'not an SRS arm: the shoulder and wrist points project onto the elbow '
                         f'axis (joint 4) {abs(s_along - w_along):.3g} m apart, so the elbow does '
                         'not bend in one plane')
    elbow = p4 + s_along * w4
    upper_arm = float(np.linalg.norm(elbow - shoulder))
    forearm = float(np.linalg.norm(wrist - elbow))
    if upper_arm < MEET_TOL_M or forearm < MEET_TOL_M:
        raise ModelError('not an SRS arm: the elbow axis passes through the shoulder or wrist '
                         'point (zero-length upper arm or forearm)')
    if np.linalg.norm(np.cross(axes[0], axes[1])) < PARALLEL_SIN or \
            np.linalg.norm(np.cross(axes[4], axes[5])) < PARALLEL_SIN:
        raise ModelError('not an SRS arm: consecutive spherical-joint axes are parallel')
    reach_low, reach_high = _reach_range(elbow - shoulder, wrist - elbow, w4,
                                         chain.lower[3], chain.upper[3])
    return SRSModel(axes=axes, shoulder=shoulder, elbow0=elbow, wrist0=wrist,
                    upper_arm=upper_arm, forearm=forearm,
                    wrist_in_tip=tip[:3, :3].T @ (wrist - tip[:3, 3]),
                    tip_rotation0=tip[:3, :3].copy(), lower=chain.lower.copy(),
                    upper=chain.upper.copy(), reach_low=reach_low, reach_high=reach_high)


def _reach_range(a, b, w4, lower4, upper4) -> Tuple[float, float]:
    """Smallest and largest |W - S| over the elbow angles within joint 4's limits.

    With a = E0 - S and b = W0 - E0 (zero configuration),
    |W - S|^2 = |a|^2 + |b|^2 + 2 rho cos(q4 - phase) (law of cosines, see
    AnalyticSRS._elbow): the extremes are at q4 = phase (+ k pi) when inside
    the limits, else at a limit.
    """
    a1, a2 = float(a @ b), float(a @ np.cross(w4, b))
    rho, phase = math.hypot(a1, a2), math.atan2(a2, a1)
    base = float(a @ a + b @ b)
    lo4 = max(lower4, phase - 2.0 * math.pi)
    hi4 = min(upper4, phase + 2.0 * math.pi)
    candidates = [lo4, hi4] + [phase + k * math.pi for k in (-2, -1, 0, 1, 2)
                               if lo4 <= phase + k * math.pi <= hi4]
    values = [math.sqrt(max(base + 2.0 * rho * math.cos(c - phase), 0.0)) for c in candidates]
    return min(values), max(values)


# ---------------------------------------------------------------------------
# Vectorised geometry (leading batch axis N everywhere)
# ---------------------------------------------------------------------------

def _cross(a: FloatArray, b: FloatArray) -> FloatArray:
    """Cross product over the last axis (broadcasting); np.cross costs ~10x more here."""
    a0, a1, a2 = a[..., 0], a[..., 1], a[..., 2]
    b0, b1, b2 = b[..., 0], b[..., 1], b[..., 2]
    return np.stack((a1 * b2 - a2 * b1, a2 * b0 - a0 * b2, a0 * b1 - a1 * b0), axis=-1)


def _unit(v: FloatArray) -> Tuple[FloatArray, FloatArray]:
    n = np.linalg.norm(v, axis=-1)
    return v / np.where(n > DEGENERATE, n, 1.0)[..., None], n


def _rot(w: FloatArray, angle: FloatArray) -> FloatArray:
    """(N, 3, 3) rotations about unit axis w (3,) or (N, 3) by angle (N,)."""
    w = np.broadcast_to(w, angle.shape + (3,))
    s, c = np.sin(angle), 1.0 - np.cos(angle)
    k = np.zeros(angle.shape + (3, 3))
    k[..., 0, 1], k[..., 0, 2], k[..., 1, 2] = -w[..., 2], w[..., 1], -w[..., 0]
    k[..., 1, 0], k[..., 2, 0], k[..., 2, 1] = w[..., 2], -w[..., 1], w[..., 0]
    return np.eye(3) + s[..., None, None] * k + c[..., None, None] * (k @ k)


def _sp1(w: FloatArray, p: FloatArray, q: FloatArray, fallback: FloatArray) -> FloatArray:
    """Angle t with Rot(w, t) p = q (projections normal to w); fallback where undefined."""
    pp = p - np.einsum('...i,i->...', p, w)[..., None] * w
    qq = q - np.einsum('...i,i->...', q, w)[..., None] * w
    y = np.einsum('...i,...i->...', _cross(pp, qq), np.broadcast_to(w, pp.shape))
    x = np.einsum('...i,...i->...', pp, qq)
    degenerate = (np.linalg.norm(pp, axis=-1) < 1e-9) | (np.linalg.norm(qq, axis=-1) < 1e-9)
    return np.where(degenerate, fallback, np.arctan2(y, x))


def _sp2(w1, w2, p, q, sign, fallback1):
    """Angles (t1, t2) with Rot(w1, t1) Rot(w2, t2) p = q, for unit p and q (N, 3).

    The intermediate z = Rot(w2, t2) p = Rot(w1, -t1) q has z . w1 = q . w1,
    z . w2 = p . w2 and |z| = 1; ``sign`` picks its side of the (w1, w2)
    plane. Its out-of-plane part g uses 1 - (q . w1)^2 = |q x w1|^2 (a cross
    product, exact near q = w1) instead of the textbook alpha/beta form,
    whose rounding near the singular q2 = 0 grows to sqrt(eps) ~ 1.5e-8 rad.
    """
    c12 = float(w1 @ w2)
    s12 = math.sqrt(max(1.0 - c12 * c12, 0.0))
    t = (w2 - c12 * w1) / s12
    normal = _cross(w1, w2) / s12
    a1 = q @ w1
    zt = (p @ w2 - a1 * c12) / s12
    qx = np.linalg.norm(_cross(q, np.broadcast_to(w1, q.shape)), axis=-1)
    g2 = (qx - np.abs(zt)) * (qx + np.abs(zt))
    g = sign * np.sqrt(np.maximum(g2, 0.0))
    z = a1[..., None] * w1 + zt[..., None] * t + g[..., None] * normal
    t2 = _sp1(w2, p, z, np.zeros_like(g))
    t1 = _sp1(w1, z, q, fallback1)
    return t1, t2


def _spherical(w1, w2, w3, rotation, sign, fallback1):
    """Split rotation = Rot(w1, t1) Rot(w2, t2) Rot(w3, t3) (N, 3, 3) into angles."""
    n = rotation.shape[0]
    target = rotation @ w3
    t1, t2 = _sp2(w1, w2, np.broadcast_to(w3, (n, 3)), target, sign, fallback1)
    # t3 from a vector normal to w3.
    x = _cross(w3, w1 if np.linalg.norm(_cross(w3, w1)) > 1e-6 else w2)
    x /= np.linalg.norm(x)
    rest = np.einsum('nba,nb->na', _rot(w1, t1) @ _rot(w2, t2), rotation @ x)
    t3 = _sp1(w3, np.broadcast_to(x, (n, 3)), rest, np.zeros(n))
    return t1, t2, t3


def _frame(x: FloatArray, y: FloatArray) -> FloatArray:
    """(N, 3, 3) orthonormal frame with columns x^, y^ (normal to x), x^ x y^."""
    xh, _ = _unit(x)
    yh, _ = _unit(y - np.einsum('...i,...i->...', y, xh)[..., None] * xh)
    return np.stack((xh, yh, _cross(xh, yh)), axis=-1)


def _wrap(angle: FloatArray) -> FloatArray:
    return np.mod(angle + np.pi, 2.0 * np.pi) - np.pi


class AnalyticSRS:
    """Closed-form IK of a 7-DoF SRS arm: every branch, swivel angle, pole target, limits.

    Build with :meth:`from_chain`; raises ModelError when the chain is not SRS.
    """

    def __init__(self, chain: Chain, model: SRSModel, backend: str = 'auto'):
        """Keep the chain (for FK checks) and its SRS geometry.

        Args:
            chain: the arm's chain.
            model: its SRS geometry (see :func:`srs_model`).
            backend: 'numpy' (the vectorised reference), 'numba' (the same closed
                form compiled, one target at a time) or 'auto' (numba if installed).

        """
        self.chain = chain
        self.model = model
        m = model
        self._a = m.elbow0 - m.shoulder
        self._b = m.wrist0 - m.elbow0
        w4 = m.axes[3]
        # q4 solves A1 cos q4 + A2 sin q4 = k (law of cosines, see _elbow).
        self._a1 = float(self._a @ self._b)
        self._a2 = float(self._a @ _cross(w4, self._b))
        self._elbow_phase = math.atan2(self._a2, self._a1)
        self._jit, self._jit_fk = load_compiled(backend, '_jit_srs', '_jit_ik')
        self.backend = 'numba' if self._jit is not None else 'numpy'
        self._model_args = (m.axes, m.shoulder, self._a, self._b, m.wrist_in_tip,
                            m.tip_rotation0, m.upper_arm, m.forearm, self._a1, self._a2,
                            self._elbow_phase, m.lower, m.upper, m.reach_low, m.reach_high)
        # The same, packed flat for the compiled entry points (layout in _jit_srs).
        self._model_vec = np.concatenate((
            m.axes.ravel(), m.shoulder, self._a, self._b, m.wrist_in_tip,
            m.tip_rotation0.ravel(), [m.upper_arm, m.forearm, self._a1, self._a2,
                                      self._elbow_phase], m.lower, m.upper,
            [m.reach_low, m.reach_high]))
        self._fk_vec = np.concatenate((chain._pre_rot.ravel(), chain._pre_trans.ravel(),
                                       chain._axis.ravel(), chain._tip.ravel()))

    @classmethod
    def from_chain(cls, chain: Chain, backend: str = 'auto') -> 'AnalyticSRS':
        """Recognise the SRS geometry of ``chain`` (see :func:`srs_model`)."""
        return cls(chain, srs_model(chain), backend)

    # -- geometry of a target ------------------------------------------------------

    def _wrist_target(self, targets: FloatArray):
        """Wrist centres, unit shoulder->wrist directions and clamped distances (N,)."""
        m = self.model
        w_t = targets[:, :3, 3] + np.einsum('nab,b->na', targets[:, :3, :3], m.wrist_in_tip)
        u, d = _unit(w_t - m.shoulder)
        d_clamped = np.clip(d, m.reach_low, m.reach_high)
        # A target exactly at the shoulder has no direction: use the base axis.
        u = np.where((d > DEGENERATE)[:, None], u, m.axes[0])
        return w_t, u, d, d_clamped

    def _swivel_basis(self, u: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """e1, e2 (N, 3) spanning the plane normal to u; psi = 0 along e1."""
        w1, w2 = self.model.axes[0], self.model.axes[1]
        e1, n1 = _unit(w1 - (u @ w1)[:, None] * u)
        alt, _ = _unit(w2 - (u @ w2)[:, None] * u)
        e1 = np.where((n1 > 1e-9)[:, None], e1, alt)  # target on the first joint's axis
        return e1, _cross(u, e1)

    def _elbow(self, d: FloatArray, elbow_sign: FloatArray) -> FloatArray:
        """q4 for shoulder-wrist distances d (N,), on the branch elbow_sign (N,)."""
        m = self.model
        k = 0.5 * (d * d - m.upper_arm ** 2 - m.forearm ** 2)
        rho = math.hypot(self._a1, self._a2)
        q4 = _wrap(self._elbow_phase + elbow_sign * np.arccos(np.clip(k / rho, -1.0, 1.0)))
        # A reach clamped to the elbow's limit lands on it up to rounding.
        lo, hi = m.lower[3], m.upper[3]
        return np.where((q4 < lo) & (q4 > lo - LIMIT_SNAP), lo,
                        np.where((q4 > hi) & (q4 < hi + LIMIT_SNAP), hi, q4))

    def _solve_batch(self, targets, psi, branch, q1_fallback, q5_fallback):
        """Joint vectors (N, 7) for targets (N, 4, 4), swivel psi (N,), branches (N, 3)."""
        if self._jit is not None:
            return self._jit.solve_many(
                np.ascontiguousarray(targets, dtype=np.float64),
                np.ascontiguousarray(psi, dtype=np.float64),
                np.ascontiguousarray(branch, dtype=np.float64),
                np.ascontiguousarray(q1_fallback, dtype=np.float64),
                np.ascontiguousarray(q5_fallback, dtype=np.float64), *self._model_args)
        return self._solve_batch_numpy(targets, psi, branch, q1_fallback, q5_fallback)

    def _solve_batch_numpy(self, targets, psi, branch, q1_fallback, q5_fallback):
        """Vectorised reference implementation of :meth:`_solve_batch`."""
        m = self.model
        w = m.axes
        n = targets.shape[0]
        w_t, u, _, d = self._wrist_target(targets)
        q4 = self._elbow(d, branch[:, 0])
        e1, e2 = self._swivel_basis(u)
        radial = np.cos(psi)[:, None] * e1 + np.sin(psi)[:, None] * e2
        # Shoulder rotation: maps the zero-configuration shoulder->wrist vector c3
        # and elbow axis w4 onto u and the elbow axis of the plane (S, E, W),
        # +-(radial x u), with the sign that keeps the triangle's orientation
        # for this q4 (so the elbow lands on the +radial side). Mapping c3 onto u
        # (rather than the upper arm onto a direction computed separately) puts
        # the wrist exactly on target also near the stretched elbow, where two
        # independent acos results would disagree by ~sqrt(eps).
        c3 = self._a[None, :] + np.einsum('nab,b->na', _rot(w[3], q4), self._b)
        orient = _cross(self._a, c3) @ w[3]
        sigma = np.where(np.abs(orient) > 1e-12, np.sign(orient), branch[:, 0])
        axis4 = sigma[:, None] * _cross(radial, u)
        r03 = _frame(u, axis4) @ np.swapaxes(_frame(c3, np.broadcast_to(w[3], (n, 3))), -1, -2)
        q1, q2, q3 = _spherical(w[0], w[1], w[2], r03, branch[:, 1], q1_fallback)
        r04 = r03 @ _rot(w[3], q4)
        r_wrist = np.swapaxes(r04, -1, -2) @ targets[:, :3, :3] @ m.tip_rotation0.T
        q5, q6, q7 = _spherical(w[4], w[5], w[6], r_wrist, branch[:, 2], q5_fallback)
        q = np.stack((q1, q2, q3, q4, q5, q6, q7), axis=-1)
        return self._into_limits(q)

    def _into_limits(self, q: FloatArray) -> FloatArray:
        """Shift each angle by 2 pi k into its limits where possible (else keep it)."""
        lo, hi = self.model.lower, self.model.upper
        for shift in (2.0 * np.pi, -2.0 * np.pi):
            moved = q + shift
            better = ((q < lo) | (q > hi)) & (moved >= lo) & (moved <= hi)
            q = np.where(better, moved, q)
        return q

    # -- public ------------------------------------------------------------------

    def swivel_of(self, q) -> float:
        """Swivel angle psi (rad, in (-pi, pi]) of configuration q (7,)."""
        q = self.chain.check_q(q)
        frames, tip = self._forward(q)
        # The elbow point: where the shoulder point projects onto axis 4 (for
        # the iiwa that is joint 4's frame origin, but not for every SRS arm).
        z4 = frames[3, :3, :3] @ self.chain._axis[3]
        p4 = frames[3, :3, 3]
        elbow = p4 + float((self.model.shoulder - p4) @ z4) * z4
        return float(self._swivel_of_batch(tip[None], elbow[None])[0])

    def _forward(self, q: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """Joint frames (7, 4, 4) and tip pose, compiled when available."""
        if self._jit_fk is None:
            return self.chain._frames(q)
        c = self.chain
        cum_r, cum_p = np.empty((7, 3, 3)), np.empty((7, 3))
        tip_r, tip_p = np.empty((3, 3)), np.empty(3)
        self._jit_fk._forward(q, c._pre_rot, c._pre_trans, c._axis, c._prismatic, c._driver,
                              c._mult, c._offset, c._tip, cum_r, cum_p, tip_r, tip_p)
        frames = np.zeros((7, 4, 4))
        frames[:, :3, :3], frames[:, :3, 3], frames[:, 3, 3] = cum_r, cum_p, 1.0
        tip = np.eye(4)
        tip[:3, :3], tip[:3, 3] = tip_r, tip_p
        return frames, tip

    def _swivel_of_batch(self, tips: FloatArray, elbows: FloatArray) -> FloatArray:
        _, u, _, _ = self._wrist_target(tips)
        e1, e2 = self._swivel_basis(u)
        v = elbows - self.model.shoulder
        return np.arctan2(np.einsum('ni,ni->n', v, e2), np.einsum('ni,ni->n', v, e1))

    def branch_of(self, q) -> Tuple[int, int, int]:
        """Return the (elbow, shoulder, wrist) signs of configuration q (7,)."""
        q = self.chain.check_q(q)
        w = self.model.axes
        elbow = 1 if _wrap(np.array(q[3] - self._elbow_phase)) >= 0 else -1
        # The sign picked in _sp2: of Rot(w2, q2) w3 along w1 x w2 (wrist alike).
        z_s = _rot(w[1], np.array([q[1]]))[0] @ w[2]
        z_w = _rot(w[5], np.array([q[5]]))[0] @ w[6]
        shoulder = 1 if z_s @ _cross(w[0], w[1]) >= 0 else -1
        wrist = 1 if z_w @ _cross(w[4], w[5]) >= 0 else -1
        return elbow, shoulder, wrist

    def solve_all(self, T_target, swivel: float) -> List[FloatArray]:
        """Every branch at swivel angle ``swivel`` that is within the joint limits.

        Args:
            T_target: (4, 4) tip pose in the base frame.
            swivel: swivel angle psi, radians.

        Returns:
            Up to 8 joint vectors (7,), chain order; empty when the target is out
            of reach or every branch violates a limit at this swivel angle.

        """
        target = check_pose(T_target)
        psi = float(swivel)
        if not math.isfinite(psi):
            raise InvalidInputError(f'swivel: expected a finite angle, received {swivel!r}')
        _, _, d, d_clamped = self._wrist_target(target[None])
        if abs(d[0] - d_clamped[0]) > REACH_TOL_M:
            return []
        qs = self._solve_batch(np.broadcast_to(target, (8, 4, 4)), np.full(8, psi), BRANCHES,
                               np.zeros(8), np.zeros(8))
        lo, hi = self.model.lower, self.model.upper
        keep = np.all((qs >= lo) & (qs <= hi), axis=1)
        unique: List[FloatArray] = []
        for q in qs[keep]:
            if not any(np.allclose(q, other, atol=1e-9) for other in unique):
                unique.append(q)
        return unique

    def solve_batch(self, T_targets, swivel, branch) -> Tuple[FloatArray, FloatArray]:
        """Solve many targets at once on given swivel angles and branches.

        Args:
            T_targets: (N, 4, 4) tip poses in the base frame.
            swivel: (N,) or scalar swivel angles, radians.
            branch: (3,) or (N, 3) (elbow, shoulder, wrist) signs.

        Returns:
            q: (N, 7) joint vectors (where out of reach: the closest reachable
            wrist point); valid: (N,) bool, reachable and within every limit.

        """
        targets = np.asarray(T_targets, dtype=np.float64)
        if targets.ndim != 3 or targets.shape[1:] != (4, 4) or not np.all(np.isfinite(targets)):
            raise InvalidInputError(f'T_targets: expected finite (N, 4, 4) poses, received '
                                    f'shape {targets.shape}')
        n = targets.shape[0]
        psi = np.broadcast_to(np.asarray(swivel, dtype=np.float64), (n,))
        if not np.all(np.isfinite(psi)):
            raise InvalidInputError('swivel: expected finite angles')
        signs = np.asarray(branch, dtype=np.float64)
        signs = np.broadcast_to(self._check_branch(signs) if signs.ndim == 1 else signs, (n, 3))
        if not np.all(np.isin(signs, (-1.0, 1.0))):
            raise InvalidInputError('branch: every sign must be +1 or -1')
        q = self._solve_batch(targets, psi, signs, np.zeros(n), np.zeros(n))
        _, _, d, d_clamped = self._wrist_target(targets)
        valid = (np.abs(d - d_clamped) <= REACH_TOL_M) & \
            np.all((q >= self.model.lower) & (q <= self.model.upper), axis=1)
        return q, valid

    def feasible_swivel(self, T_target, branch: Sequence[int]) -> List[Tuple[float, float]]:
        """Swivel-angle intervals in which ``branch`` stays within every joint limit.

        Each joint angle is a smooth function of psi on a branch; its crossings of
        the limits are bracketed on a grid of SWIVEL_GRID angles and refined by
        bisection (Shimizu et al. 2008 solve the same crossings in closed form).

        Args:
            T_target: (4, 4) tip pose in the base frame.
            branch: (elbow, shoulder, wrist) signs, each +1 or -1.

        Returns:
            Sorted, disjoint (start, end) intervals in [-pi, pi], radians; empty
            when the target is out of reach or no swivel angle is feasible.

        """
        target = check_pose(T_target)
        signs = self._check_branch(branch)
        _, _, d, d_clamped = self._wrist_target(target[None])
        if abs(d[0] - d_clamped[0]) > REACH_TOL_M:
            return []
        grid = np.linspace(-np.pi, np.pi, SWIVEL_GRID + 1)
        # The repeated inputs are built once; the bisection passes leading
        # slices (still contiguous: no copy per step).
        repeated = (np.repeat(target[None], grid.size, axis=0),
                    np.repeat(signs[None], grid.size, axis=0), np.zeros(grid.size))
        margin = self._margin(grid, *repeated)
        inside = margin >= 0.0
        if inside.all():
            return [(-math.pi, math.pi)]
        edges = np.flatnonzero(inside[:-1] != inside[1:])
        lo, hi = grid[edges].copy(), grid[edges + 1].copy()
        lo_inside = inside[edges]
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            mid_inside = self._margin(mid, *(a[:mid.size] for a in repeated)) >= 0.0
            same = mid_inside == lo_inside
            lo = np.where(same, mid, lo)
            hi = np.where(same, hi, mid)
        # Boundary i: psi where feasibility changes; entering when lo side is out.
        bounds = [(float(lo[i]) if lo_inside[i] else float(hi[i]), bool(not lo_inside[i]))
                  for i in range(len(edges))]
        intervals = []
        start = -math.pi if inside[0] else None
        for value, entering in bounds:
            if entering:
                start = value
            elif start is not None:
                intervals.append((start, value))
                start = None
        if start is not None:
            intervals.append((start, math.pi))
        return intervals

    def _margin(self, psi: FloatArray, targets: FloatArray, signs: FloatArray,
                zeros: FloatArray) -> FloatArray:
        """Smallest distance to a limit over the joints, (K,), for swivel angles psi (K,).

        ``targets`` (K, 4, 4), ``signs`` (K, 3) and ``zeros`` (K,) repeat one
        pose and one branch.
        """
        q = self._solve_batch(targets, psi, signs, zeros, zeros)
        return np.min(np.minimum(q - self.model.lower, self.model.upper - q), axis=1)

    def _check_branch(self, branch) -> FloatArray:
        signs = np.asarray(branch, dtype=np.float64)
        if signs.shape != (3,) or not np.all(np.isin(signs, (-1.0, 1.0))):
            raise InvalidInputError(f'branch: expected three signs (elbow, shoulder, wrist), '
                                    f'each +1 or -1, received {branch!r}')
        return signs

    def swivel_toward(self, T_target, pole) -> float:
        """Swivel angle that turns the elbow toward a pole point (seed 001).

        The pole (3,) (base frame, metres) is projected onto the plane normal to
        the shoulder-wrist line; psi is the angle of that projection. A pole on
        the line itself gives psi = 0.
        """
        target = check_pose(T_target)
        p = np.asarray(pole, dtype=np.float64)
        if p.shape != (3,) or not np.all(np.isfinite(p)):
            raise InvalidInputError(f'pole: expected a finite point (3,), received {pole!r}')
        _, u, _, _ = self._wrist_target(target[None])
        e1, e2 = self._swivel_basis(u)
        v = p - self.model.shoulder
        return float(math.atan2(float(v @ e2[0]), float(v @ e1[0])))

    def solve(self, T_target, swivel: Optional[float] = None, pole=None,
              q_reference=None) -> IKResult:
        """Solve for one configuration of the tip at ``T_target``.

        The swivel angle comes from, in order: ``swivel`` (radians), ``pole`` (a
        point (3,) the elbow turns toward), ``q_reference`` (its swivel angle),
        else 0. Branches are tried with the reference's branch first, then in
        the fixed order of BRANCHES; the first within the joint limits wins
        (with a reference: the one nearest it in joint space, which keeps a
        tracked motion continuous also through singularities).
        When no branch is within limits at that swivel angle, the swivel moves
        to the nearest feasible angle (the reference's branch kept whenever it
        has one).

        Returns:
            IKResult; success False with the reason when the target is out of
            reach (the wrist goes to the nearest reachable point, orientation
            kept) or no branch is within limits at any swivel angle (the
            reference, or the mid-limits configuration, is returned).

        """
        start = time.perf_counter()
        target = self._check_pose(T_target)
        q_ref = None if q_reference is None else self.chain.check_q(q_reference, 'q_reference')
        preferred = None
        if swivel is not None:
            psi = float(swivel)
            if not math.isfinite(psi):
                raise InvalidInputError(f'swivel: expected a finite angle, received {swivel!r}')
        elif pole is not None:
            psi = self.swivel_toward(target, pole)
        elif q_ref is not None:
            psi, preferred = self._reference_swivel_branch(q_ref)
        else:
            psi = 0.0
        if q_ref is not None and preferred is None:
            preferred = self.branch_of(q_ref)
        order = self._branch_order(preferred)
        fb1 = float(q_ref[0]) if q_ref is not None else 0.0
        fb5 = float(q_ref[4]) if q_ref is not None else 0.0
        q, found, pos, rot, d, d_clamped = self._first_feasible(target, psi, order, fb1, fb5,
                                                                q_ref)
        if found and q_ref is not None and swivel is None and pole is None and \
                self._near_stretched(d_clamped):
            psi = self._least_motion_swivel(target, psi, order, fb1, fb5, q_ref)
            q, found, pos, rot, d, d_clamped = self._first_feasible(target, psi, order, fb1,
                                                                    fb5, q_ref)
        reason = ''
        if not found:
            q, reason = self._nearest_feasible(target, psi, order, preferred, q_ref, fb1, fb5)
            pos, rot = self._errors(target, q)
        if d > d_clamped + REACH_TOL_M:
            reason = (f'target out of reach: wrist centre {d:.4f} m from the shoulder, reach '
                      f'{d_clamped:.4f} m; the closest reachable wrist point is used')
        elif d < d_clamped - REACH_TOL_M:
            reason = (f'target too close: wrist centre {d:.4f} m from the shoulder, the elbow '
                      f'cannot fold below {d_clamped:.4f} m within its joint limits')
        success = not reason and pos <= POSITION_TOL_M and rot <= ORIENTATION_TOL_RAD
        if not success and not reason:
            reason = f'residual {pos:.3g} m / {rot:.3g} rad above tolerance'
        return IKResult(q=q, success=success, position_error=pos, orientation_error=rot,
                        iterations=0, restarts=0, elapsed_s=time.perf_counter() - start,
                        reason=reason)

    def _check_pose(self, pose) -> FloatArray:
        """check_pose, with a compiled fast path for the valid case (~0.3 vs ~6 us)."""
        if self._jit is not None and isinstance(pose, np.ndarray) and pose.shape == (4, 4) \
                and pose.dtype == np.float64 and \
                self._jit.pose_is_valid(pose, ORTHONORMAL_TOL):
            return pose
        return check_pose(pose)  # raises with the reason

    def _near_stretched(self, d: float) -> bool:
        """Return True when the swivel circle radius is below STRETCHED_RADIUS x L1."""
        m = self.model
        cos_b = (m.upper_arm ** 2 + d * d - m.forearm ** 2) / (2.0 * m.upper_arm * d)
        return 1.0 - min(cos_b * cos_b, 1.0) < STRETCHED_RADIUS ** 2

    def _least_motion_swivel(self, target, psi, order, fb1, fb5, q_ref) -> float:
        """Swivel angle whose solution is nearest q_ref (near a stretched elbow).

        There the swivel of the reference is dominated by noise (the elbow is
        almost on the shoulder-wrist line), and following it makes joints 3, 5
        and 7 chatter; instead the joint-space distance to the reference is
        minimised over psi: a coarse grid, then golden-section refinement.
        """
        def cost(angle):
            q = self._first_feasible(target, angle, order, fb1, fb5, q_ref)[0]
            return float(np.sum((q - q_ref) ** 2))

        grid = psi + np.linspace(-np.pi, np.pi, SWIVEL_SEARCH_GRID, endpoint=False)
        costs = [cost(a) for a in grid]
        best = int(np.argmin(costs))
        step = 2.0 * np.pi / SWIVEL_SEARCH_GRID
        lo, hi = grid[best] - step, grid[best] + step
        golden = (math.sqrt(5.0) - 1.0) / 2.0
        for _ in range(SWIVEL_SEARCH_STEPS):
            a = hi - golden * (hi - lo)
            b = lo + golden * (hi - lo)
            if cost(a) < cost(b):
                hi = b
            else:
                lo = a
        found = float(_wrap(np.array(0.5 * (lo + hi))))
        # The reference's own swivel wins ties (exact when the pose is unchanged).
        return psi if cost(psi) <= cost(found) else found

    def _reference_swivel_branch(self, q_ref: FloatArray):
        if self._jit is not None:
            psi, e, s, w = self._jit.reference_swivel_branch(q_ref, self._model_vec,
                                                             self._fk_vec)
            return float(psi), (int(e), int(s), int(w))
        return self.swivel_of(q_ref), self.branch_of(q_ref)

    def _first_feasible(self, target, psi, order, fb1, fb5, q_ref):
        """Branch within limits at psi: the first of ``order``, or the nearest q_ref.

        Near a singularity a branch's label is ambiguous (at q6 = 0 both wrist
        signs meet), so with a reference the nearest feasible solution in joint
        space is taken: that is what keeps a tracked motion continuous.

        Returns:
            (q, found, position error, orientation error, distance, clamped distance).

        """
        if self._jit is not None:
            ref = q_ref if q_ref is not None else np.zeros(7)
            q, status, _, pos, rot, d, d_clamped = self._jit.solve_ordered(
                target, psi, order, fb1, fb5, self._model_vec, self._fk_vec, ref,
                q_ref is not None)
            return q, status == 0, float(pos), float(rot), float(d), float(d_clamped)
        n = order.shape[0]
        qs = self._solve_batch(np.broadcast_to(target, (n, 4, 4)), np.full(n, psi), order,
                               np.full(n, fb1), np.full(n, fb5))
        inside = np.all((qs >= self.model.lower) & (qs <= self.model.upper), axis=1)
        if q_ref is not None and inside.any():
            cost = np.where(inside, np.sum((qs - q_ref) ** 2, axis=1), np.inf)
            q = qs[int(np.argmin(cost))]
        else:
            q = qs[int(np.argmax(inside))] if inside.any() else qs[0]
        pos, rot = self._errors(target, q)
        _, _, d, d_clamped = self._wrist_target(target[None])
        return q, bool(inside.any()), pos, rot, float(d[0]), float(d_clamped[0])

    def _nearest_feasible(self, target, psi, order, preferred, q_ref, fb1, fb5):
        """Move psi to the nearest feasible swivel angle over the branches; (q, reason)."""
        best = None
        for branch in order:
            keep_branch = preferred is not None and tuple(branch) == tuple(preferred)
            for a, b in self.feasible_swivel(target, branch):
                near = min(max(psi, a), b)
                cost = abs(float(_wrap(np.array(near - psi))))
                if keep_branch:
                    cost -= 10.0  # the reference's branch whenever it is feasible
                if best is None or cost < best[0] - 1e-12:
                    best = (cost, branch, near)
            if keep_branch and best is not None:
                break  # no other branch can beat the reference's (cost - 10): skip 7 searches
        lo, hi = self.model.lower, self.model.upper
        if best is None:
            keep = q_ref if q_ref is not None else self.chain.mid_limits()
            return np.clip(keep, lo, hi), 'no branch of this target is within the joint limits'
        _, branch, near = best
        q = self._solve_batch(target[None], np.array([near]), np.asarray(branch)[None],
                              np.array([fb1]), np.array([fb5]))[0]
        # The interval edge is bisected to ~1e-15 rad; clip the last ulps.
        return np.clip(q, lo, hi), ''

    def _branch_order(self, preferred) -> FloatArray:
        """(8, 3) branches: the preferred one first, then BRANCHES' fixed order."""
        if preferred is None:
            return BRANCHES
        return _ORDERS[tuple(int(v) for v in preferred)]

    def _errors(self, target: FloatArray, q: FloatArray) -> Tuple[float, float]:
        tip = self._forward(q)[1]
        pos = float(np.linalg.norm(target[:3, 3] - tip[:3, 3]))
        err = (target[:3, :3] @ tip[:3, :3].T).tolist()
        rot = 2.0 * float(np.linalg.norm(_log1(*_from_matrix1(err))))
        return pos, rot
