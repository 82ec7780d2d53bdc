# SPDX-License-Identifier: Apache-2.0

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

import math
import time
from typing import List, Optional, Sequence, Tuple

from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.ik.base import check_pose, IKResult
from ik_node.core.ik.closed_form.base import BRANCH_ORDERS, BRANCHES, check_planar_elbow, \
    ClosedFormSolver, distinct, MEET_TOL_M, meeting_point, model_of, ORIENTATION_TOL_RAD, \
    POSITION_TOL_M, REACH_TOL_M, SRSModel, zero_geometry
from ik_node.core.ik.closed_form.near_srs import NEAR_SRS_BOUND_M, nearest_srs_model, \
    NearSRSPolish, POLISH_ITERATIONS, POLISH_TOL, RESCUE_BUDGET_S
from ik_node.core.ik.closed_form.swivel import SwivelIntervals
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.core.kernels import base as kernels
from ik_node.core.kernels import srs as srs_kernels
from ik_node.core.kernels.backend import resolve
from ik_node.core.model.chain import Chain
from ik_node.core.poses import residual_norms
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Near a stretched elbow (swivel-circle radius below this fraction of the
# upper arm) the swivel of a reference configuration is noise-dominated; the
# swivel is then chosen by least joint motion: a grid, then golden section.
STRETCHED_RADIUS = 0.05
SWIVEL_SEARCH_GRID = 24
SWIVEL_SEARCH_STEPS = 40
# Motion toward a target out of reach stops with the elbow this far from
# straight (rad; the iiwa14's wrist 4 mm inside its reach), on the side it is
# on (aim_within_reach). At a straight elbow its side is undefined: coming back
# from there, the side the arm took depended on rounding and on the timing of
# the ticks (the demo came back with the elbow flipped, 2.7 rad from its
# first pass, beside two CPU hogs: issue 30).
OUT_OF_REACH_BEND = 0.2


def srs_model(chain: Chain) -> SRSModel:
    """Recognise an exact SRS arm in ``chain``; raise ModelError saying which condition fails."""
    axes, points, tip = zero_geometry(chain)
    shoulder = meeting_point(axes, points, (0, 1, 2), 'shoulder', 'an SRS arm')
    wrist = meeting_point(axes, points, (4, 5, 6), 'wrist', 'an SRS arm')
    check_planar_elbow(axes, points, shoulder, wrist, 'an SRS arm')
    return model_of(chain, axes, points, tip, shoulder, wrist)


class AnalyticSRS(ClosedFormSolver, NearSRSPolish):
    """Closed-form IK of a 7-DoF SRS arm: every branch, swivel angle, pole target, limits.

    Build with :meth:`from_chain`; raises ModelError when the chain is not SRS.
    The geometry of one target at one swivel angle is :mod:`srs_kernels`; this
    class chooses swivel angles and branches (references, poles, limits).
    """

    name = 'analytic'
    uses_pole = True

    def __init__(self, chain: Chain, model: SRSModel, backend: str = 'auto',
                 deviation: float = 0.0):
        """Keep the chain (for FK checks) and its SRS geometry.

        Args:
            chain: the arm's chain.
            model: its SRS geometry (see :func:`srs_model`), or the nearest
                exact SRS model of a near-SRS chain (:func:`nearest_srs_model`).
            backend: 'numpy' (the kernels run by CPython: the reference),
                'numba' (the same kernels compiled) or 'auto' (numba if installed).
            deviation: how far the chain is from ``model``, metres; above
                MEET_TOL_M every solution of the model is polished on the chain.

        """
        self.chain = chain
        self.model = m = model
        self.deviation = float(deviation)
        self._polisher: Optional[JacobianIK] = None
        self._lm_args: Optional[tuple] = None
        self._lm_entry = None   # the compiled polish without numba's dispatch (~2 us of 8)
        self.model_note = 'exact SRS arm'
        if self.deviation > MEET_TOL_M:
            self.model_note = (f'near-SRS arm: solved on the nearest exact SRS model '
                               f'(deviation {1e3 * self.deviation:.3g} mm), each solution '
                               'polished on the chain')
            self._polisher = JacobianIK(
                chain, position_tolerance=POLISH_TOL, orientation_tolerance=POLISH_TOL,
                nullspace_gain=0.0, max_restarts=0, max_iterations=POLISH_ITERATIONS,
                backend=backend)
            self._rescuer = JacobianIK(chain, timeout_s=RESCUE_BUDGET_S, backend=backend)
            if self._polisher.backend == 'numba':
                self._lm_args = (chain.fk_arrays, chain.lower, chain.upper,
                                 self._polisher._w6, self._polisher.max_step,
                                 *self._polisher._scratch)
        a = m.elbow0 - m.shoulder
        b = m.wrist0 - m.elbow0
        # q4 solves A1 cos q4 + A2 sin q4 = k (law of cosines, srs_kernels.elbow_part).
        a1 = float(a @ b)
        a2 = float(a @ np.cross(m.axes[3], b))
        self._elbow_phase = math.atan2(a2, a1)
        # |W - S|^2 = |a|^2 + |b|^2 + 2 rho cos(q4 - phase): longest at a straight elbow.
        bent = math.sqrt(float(a @ a + b @ b) + 2.0 * math.hypot(a1, a2) *
                         math.cos(OUT_OF_REACH_BEND))
        self.out_of_reach_distance = min(m.reach_high, bent)   # m, shoulder to wrist centre
        fields = (tuple(tuple(r) for r in m.axes.tolist()), tuple(m.shoulder.tolist()),
                  tuple(a.tolist()), tuple(b.tolist()), tuple(m.wrist_in_tip.tolist()),
                  tuple(m.tip_rotation0.ravel().tolist()), m.upper_arm, m.forearm, a1, a2,
                  self._elbow_phase, tuple(m.lower.tolist()), tuple(m.upper.tolist()),
                  m.reach_low, m.reach_high)
        be = self._use_backend(resolve(backend))
        self._kernels, self._fk = be.srs, be.fk(chain)
        # Arrays where a table is indexed, compiled (one unboxing each per call).
        self._m: tuple = (be.table(m.axes, fields[0]),) + fields[1:11] + \
            (be.table(m.lower, fields[11]), be.table(m.upper, fields[12])) + fields[13:]
        # Scratch rows of the kernels, made once (a solver is used by one thread at a time).
        self._every, self._frames = self._rows(8, 7), self._rows(7, 12)
        self._zeros = np.zeros(7)
        self._intervals = SwivelIntervals(self._solve_batch, model.lower, model.upper)

    @classmethod
    def from_chain(cls, chain: Chain, backend: str = 'auto',
                   near_bound: float = NEAR_SRS_BOUND_M) -> 'AnalyticSRS':
        """Recognise the SRS geometry of ``chain``: exact, or near within ``near_bound`` m.

        An exact SRS arm (axes meeting within MEET_TOL_M) is solved in closed
        form. A near-SRS arm (deviation at most ``near_bound``, e.g. a
        description whose shoulder axes miss by 0.4 mm) is solved on its
        nearest exact SRS model (:func:`nearest_srs_model`), every solution then
        polished on the true chain to POLISH_TOL. ``near_bound=0`` accepts exact
        arms only.

        Raises:
            ModelError: not SRS in structure, or beyond the bound (the reason
                says by how much).

        """
        try:
            return cls(chain, srs_model(chain), backend)
        except ModelError as exact:
            if near_bound <= 0.0:
                raise
            try:
                model, deviation = nearest_srs_model(chain)
            except ModelError:
                raise exact from None
            if deviation > near_bound:
                raise ModelError(f'{exact}; the nearest exact SRS model deviates by '
                                 f'{deviation:.3g} m, beyond the near-SRS bound '
                                 f'{near_bound:g} m') from None
            return cls(chain, model, backend, deviation=deviation)

    def warm_up(self, q) -> None:
        """Run every path once at q (7,): reference, no hint, a swivel's limit search, pole."""
        q = self.chain.check_q(q)
        target = self.chain.forward(q)
        self.solve(target, q)
        self.solve(target)
        self.feasible_swivel(target, self.branch_of(q))
        self.solve(target, q, pole=self.model.shoulder + np.array([0.0, 0.0, 1.0]))
        # Every branch at once, as collision.free searches them.
        self.solve_batch(np.broadcast_to(target, (8, 4, 4)), np.zeros(8), BRANCHES)

    # -- the kernels, with this backend's containers ------------------------------

    def _solve_batch(self, targets, psi, branch, q1_fallback, q5_fallback) -> FloatArray:
        """Joint vectors (N, 7) for targets (N, 4, 4), swivel psi (N,), branches (N, 3)."""
        out = self._rows(targets.shape[0], 7)
        self._kernels.solve_many(*(self._arg(np.ascontiguousarray(x, dtype=np.float64))
                                   for x in (targets, psi, branch, q1_fallback, q5_fallback)),
                                 self._m, out)
        return np.asarray(out, dtype=np.float64).reshape(-1, 7)

    def _reach_gaps(self, targets: FloatArray) -> FloatArray:
        """Return d - d_clamped (N,) of targets (N, 4, 4): 0 within reach."""
        out = self._be.empty(targets.shape[0])
        self._kernels.reach_gaps(self._arg(np.ascontiguousarray(targets)), self._m, out)
        return np.asarray(out)

    def _reference(self, q: FloatArray):
        """Swivel angle and branch (3 ints) of configuration q (7,)."""
        psi, e, s, w = self._kernels.reference_swivel_branch(
            self._arg(q), self._m, self._fk, self._frames)
        return float(psi), (int(e), int(s), int(w))

    # -- public ------------------------------------------------------------------

    def swivel_of(self, q) -> float:
        """Swivel angle psi (rad, in (-pi, pi]) of configuration q (7,)."""
        return self._reference(self.chain.check_q(q))[0]

    def branch_of(self, q) -> Tuple[int, int, int]:
        """Return the (elbow, shoulder, wrist) signs of configuration q (7,)."""
        return self._reference(self.chain.check_q(q))[1]

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
        if abs(self._reach_gaps(target[None])[0]) > REACH_TOL_M:
            return []
        qs = self._solve_batch(np.broadcast_to(target, (8, 4, 4)), np.full(8, psi), BRANCHES,
                               np.zeros(8), np.zeros(8))
        lo, hi = self.model.lower, self.model.upper
        keep = np.all((qs >= lo) & (qs <= hi), axis=1)
        if self._polisher is not None:
            for k in np.flatnonzero(keep):
                qs[k], keep[k], _, _ = self._polish(target, qs[k])
        return distinct(qs[keep])

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
        valid = (np.abs(self._reach_gaps(targets)) <= REACH_TOL_M) & \
            np.all((q >= self.model.lower) & (q <= self.model.upper), axis=1)
        if self._polisher is not None:
            # Only the model's valid rows: a row out of reach or beyond a limit on
            # the model is so on the chain too, but for offsets below a
            # millimetre, and its polish would run every fallback in Python.
            for k in np.flatnonzero(valid):
                q[k], valid[k], _, _ = self._polish(targets[k], q[k])
        return q, valid

    def feasible_swivel(self, T_target, branch: Sequence[int]) -> List[Tuple[float, float]]:
        """Swivel-angle intervals in which ``branch`` stays within every joint limit.

        Args:
            T_target: (4, 4) tip pose in the base frame.
            branch: (elbow, shoulder, wrist) signs, each +1 or -1.

        Returns:
            Sorted, disjoint (start, end) intervals in [-pi, pi], radians; empty
            when the target is out of reach or no swivel angle is feasible
            (:class:`ik_node.core.ik.closed_form.swivel.SwivelIntervals`).

        """
        target = check_pose(T_target)
        signs = self._check_branch(branch)
        if abs(self._reach_gaps(target[None])[0]) > REACH_TOL_M:
            return []
        return self._intervals.of(target, signs)

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
        rows = target.tolist()
        m = self._m
        u, _, _ = srs_kernels.wrist_geometry(kernels.rotation_of_rows(rows),
                                             kernels.translation_of_rows(rows), m)
        axes = m[srs_kernels.AXES]
        e1, e2 = srs_kernels.swivel_basis(u, kernels.vec3(axes[0]), kernels.vec3(axes[1]))
        v = p - self.model.shoulder
        return float(math.atan2(float(v @ e2), float(v @ e1)))

    def solve(self, T_target, q_reference=None, *, swivel: Optional[float] = None,
              pole=None) -> IKResult:
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
            psi, preferred = self._reference(q_ref)
        else:
            psi = 0.0
        if q_ref is not None and preferred is None:
            preferred = self._reference(q_ref)[1]
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
        if self._polisher is not None:
            # The model's solutions over many swivel angles are restarts
            # wherever the target may be within the chain's reach.
            sweep = bool(reason) or d - d_clamped <= 2.0 * self.deviation
            return self._polished_result(target, q, reason, start, order, psi, sweep)
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

    def solve_quick(self, T_target, q_reference, *, pole=None) -> Optional[IKResult]:
        """Solve at the pole's (else the reference's) swivel, no search: a bounded cost.

        The branches at that swivel angle only (nearest the reference); a
        near-SRS arm's solution polished by the compiled LM steps only. When
        none is within the limits, or the polish does not converge: a failed
        result (the reference), never a search (:meth:`solve` searches).
        """
        start = time.perf_counter()
        target = self._check_pose(T_target)
        q_ref = self.chain.check_q(q_reference, 'q_reference')
        psi, preferred = self._reference(q_ref)
        if pole is not None:
            psi = self.swivel_toward(target, pole)
        q, found, pos, rot, _, _ = self._first_feasible(
            target, psi, self._branch_order(preferred), float(q_ref[0]), float(q_ref[4]), q_ref)
        if found and self._polisher is not None:
            q, found, residual = self._levenberg_marquardt(target, q)
            pos, rot = residual_norms(residual)
            found = found and self.chain.within_limits(q)
        success = found and pos <= POSITION_TOL_M and rot <= ORIENTATION_TOL_RAD
        if not found:
            q = q_ref.copy()
            pos, rot = self._errors(target, q)
        return IKResult(q=q, success=success, position_error=pos, orientation_error=rot,
                        elapsed_s=time.perf_counter() - start,
                        reason='' if success else 'no branch at this swivel angle (quick solve)')

    def aim_within_reach(self, pose: FloatArray) -> FloatArray:
        """Return ``pose`` (4, 4), or, beyond the reach, the pose with the elbow bent.

        Beyond the reach the wrist centre moves along the shoulder-wrist line
        to ``out_of_reach_distance`` from the shoulder (the elbow
        OUT_OF_REACH_BEND from straight), the orientation kept. Within the
        reach ``pose`` is returned: it is followed exactly, also through a
        straight elbow. A near-SRS arm's reach is its chain's, not its
        model's: ``pose`` unchanged.
        """
        m = self.model
        wrist = pose[:3, 3] + pose[:3, :3] @ m.wrist_in_tip
        away = wrist - m.shoulder
        distance = float(np.linalg.norm(away))
        if self._polisher is not None or not distance > m.reach_high + REACH_TOL_M:
            return pose
        aimed = pose.copy()
        aimed[:3, 3] -= away * (1.0 - self.out_of_reach_distance / distance)
        return aimed

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
        found = srs_kernels.wrap_angle(0.5 * (lo + hi))
        # The reference's own swivel wins ties (exact when the pose is unchanged).
        return psi if cost(psi) <= cost(found) else found

    def _first_feasible(self, target, psi, order, fb1, fb5, q_ref):
        """Branch within limits at psi: the first of ``order``, or the nearest q_ref.

        Near a singularity a branch's label is ambiguous (at q6 = 0 both wrist
        signs meet), so with a reference the nearest feasible solution in joint
        space is taken: that is what keeps a tracked motion continuous.

        Returns:
            (q, found, position error, orientation error, distance, clamped distance).

        """
        ref = q_ref if q_ref is not None else self._zeros
        q, status, _, pos, rot, d, d_clamped = self._kernels.solve_ordered_rows(
            self._arg(target), float(psi), self._arg(order), fb1, fb5, self._m, self._fk,
            self._arg(ref), q_ref is not None, self._every, self._frames)
        return np.array(q), status == srs_kernels.WITHIN_LIMITS, float(pos), float(rot), \
            float(d), float(d_clamped)

    def _nearest_feasible(self, target, psi, order, preferred, q_ref, fb1, fb5):
        """Move psi to the nearest feasible swivel angle over the branches; (q, reason)."""
        best = None
        for branch in order:
            keep_branch = preferred is not None and tuple(branch) == tuple(preferred)
            for a, b in self.feasible_swivel(target, branch):
                near = min(max(psi, a), b)
                cost = abs(srs_kernels.wrap_angle(near - psi))
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
        return BRANCH_ORDERS[tuple(int(v) for v in preferred)]

    def _errors(self, target: FloatArray, q: FloatArray) -> Tuple[float, float]:
        _, tip_r, tip_p = self.chain.frames(q.tolist())
        rows = target.tolist()
        return kernels.pose_error(kernels.rotation_of_rows(rows),
                                  kernels.translation_of_rows(rows), tip_r, tip_p)
