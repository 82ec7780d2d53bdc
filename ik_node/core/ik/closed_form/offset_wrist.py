# SPDX-License-Identifier: Apache-2.0

"""Closed-form IK of 7-DoF arms whose last axis misses the wrist (Franka Panda class).

The class, read from the chain at q = 0 (nothing per robot): axes 1-3 meet
(a spherical shoulder S); axes 5 and 6 meet (the wrist point W0); S and W0
project onto axis 4 at one point (the elbow bends in a plane, offsets along
the links allowed); axis 7 misses W0 (else the arm is SRS: see
:mod:`ik_node.core.ik.closed_form.srs`). The Franka Panda / FR3 is one: elbow offsets of
0.0825 m at joints 4 and 5, axis 7 0.088 m from the wrist point.

q7 is the free parameter (the idea of He & Liu 2021, derived here in product
of exponentials): a given q7 fixes the wrist point and the rotation of the
first six joints; the elbow triangle then gives q4, and one condition (axis
6 on its cone about axis 5) gives the swivel angle in closed form, two roots
(:mod:`ik_node.core.kernels.offset_wrist`). The swivel angle is measured as on the
SRS arm, so an elbow-swivel parameter and the node's pole keep their meaning:
the q7 that gives a wanted swivel is found by sampling q7 and bisecting
(each sample a closed form). Joint limits are feasible intervals of q7 per
branch, bracketed on a grid and bisected (as the SRS solver does with the
swivel angle, Shimizu et al. 2008).
"""

from dataclasses import dataclass
import math
import time
from typing import List, Optional, Sequence, Tuple

from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.ik.base import check_pose, IKResult
from ik_node.core.ik.closed_form.base import BRANCH_ORDERS, BRANCHES, check_planar_elbow, \
    ClosedFormSolver, distinct, line_gap, MEET_TOL_M, meeting_point, model_of, \
    ORIENTATION_TOL_RAD, point_line_distance, POSITION_TOL_M, REACH_TOL_M, SRSModel, \
    zero_geometry
from ik_node.core.kernels import offset_wrist as offset_kernels
from ik_node.core.kernels.backend import resolve
from ik_node.core.model.chain import Chain
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

KIND = 'an offset-wrist (Panda-class) arm'
# Grid of q7 values over its limits on which feasibility (limits, reach, the
# cone condition) and swivel crossings are sampled, then bisected this many
# times (5.8 rad / 256 / 2^40 ~ 2e-14 rad).
Q7_GRID = 256
BISECTION_STEPS = 40
# The coarse grid on which a new q7 is first looked for when the wanted one
# has no solution within the limits.
Q7_COARSE = 33
# ... searched outward from the wanted q7 this many grid steps at a time, and
# the edge toward it bisected this many times (to ~1e-8 rad: the solution is
# exact at any q7, the edge need not be).
COARSE_RING = 2
COARSE_STEPS = 24
# Cells of that grid where a branch's joint moves by more than this (rad)
# are split REFINE_SPLIT ways, up to REFINE_LEVELS times (0.023 rad / 8^4 ~
# 6e-6 rad at the finest).
REFINE_JUMP = 0.1
REFINE_SPLIT = 8
REFINE_LEVELS = 4
# The nearest feasible q7 without a preferred branch: the grid is searched
# outward from the wanted q7 in chunks of this many points.
SEARCH_CHUNK = 32
# Where q7 is searched (limits, swivel), a branch counts as reaching the pose
# only with no gap at all (offset_kernels.solve_one), so that an edge found by
# bisection is exact; a given q7 is accepted with a gap up to REACH_TOL_M
# (a target built at full stretch computes as out of reach by rounding).
SEARCH_GAP = 0.0
# With a reference, a wanted swivel is first searched within this window of
# q7 (rad) around the reference's, on this many points.
LOCAL_WINDOW = 0.25
LOCAL_GRID = 24
# At most this many q7 values (per wanted swivel) come back from the search.
MAX_SWIVEL_ROOTS = 32


@dataclass(frozen=True)
class OffsetWristModel:
    """Geometry of an offset-wrist arm at q = 0, base frame, metres.

    ``arm``: the shoulder / elbow / wrist-point part, as for an SRS arm (its
    ``wrist_in_tip`` unused); axis 7 as a point, direction and the wrist
    point's offset from that point, all in the tip frame; ``normal6`` a unit
    vector normal to axis 6; ``offset7`` the distance of W0 from axis 7.
    """

    arm: SRSModel
    axis7_point: FloatArray   # (3,) tip frame
    axis7: FloatArray         # (3,) tip frame, unit
    wrist_from_axis7: FloatArray  # (3,) tip frame
    normal6: FloatArray       # (3,) base frame at q = 0
    offset7: float


def offset_wrist_model(chain: Chain) -> OffsetWristModel:
    """Recognise an offset-wrist arm in ``chain``; raise ModelError saying what fails."""
    axes, points, tip = zero_geometry(chain, KIND)
    shoulder = meeting_point(axes, points, (0, 1, 2), 'shoulder', KIND)
    wrist = meeting_point(axes, points, (4, 5), 'wrist', KIND)
    offset7 = point_line_distance(wrist, points[6], axes[6])
    if offset7 <= MEET_TOL_M:
        raise ModelError(f'not {KIND}: axis 7 passes through the wrist point (an SRS arm)')
    check_planar_elbow(axes, points, shoulder, wrist, KIND)
    arm = model_of(chain, axes, points, tip, shoulder, wrist, KIND)
    try:
        line_gap(points[4], axes[4], points[5], axes[5])
    except ModelError:
        raise ModelError(f'not {KIND}: axes 5 and 6 are parallel') from None
    w5, w6 = axes[4], axes[5]
    normal6 = w5 - float(w5 @ w6) * w6
    normal6 /= np.linalg.norm(normal6)
    r_m, p_m = tip[:3, :3], tip[:3, 3]
    return OffsetWristModel(arm=arm, axis7_point=r_m.T @ (points[6] - p_m),
                            axis7=r_m.T @ axes[6], wrist_from_axis7=r_m.T @ (wrist - points[6]),
                            normal6=normal6, offset7=offset7)


class AnalyticOffsetWrist(ClosedFormSolver):
    """Closed-form IK of an offset-wrist 7-DoF arm: q7 or swivel given, every branch, limits.

    Build with :meth:`from_chain` (ModelError when the chain is not in the
    class). A branch is (elbow, shoulder, root) signs, rows of
    :data:`ik_node.core.ik.closed_form.base.BRANCHES`.
    """

    name = 'analytic'
    uses_pole = True

    def __init__(self, chain: Chain, model: OffsetWristModel, backend: str = 'auto'):
        """Keep the chain (for FK checks) and its geometry; backend as AnalyticSRS."""
        self.chain = chain
        self.model = model
        a = model.arm
        self.model_note = (f'offset-wrist arm (axis 7 {1e3 * model.offset7:.4g} mm from the '
                           'wrist point): closed form in q7')
        va, vb = a.elbow0 - a.shoulder, a.wrist0 - a.elbow0
        a1, a2 = float(va @ vb), float(va @ np.cross(a.axes[3], vb))
        tup = lambda v: tuple(np.ravel(v).tolist())  # noqa: E731
        fields = (tuple(tuple(r) for r in a.axes.tolist()), tup(a.shoulder), tup(va), tup(vb),
                  tup(model.axis7_point), tup(a.tip_rotation0), a.upper_arm, a.forearm, a1, a2,
                  math.atan2(a2, a1), tup(a.lower), tup(a.upper), a.reach_low, a.reach_high,
                  tup(model.axis7), tup(model.wrist_from_axis7), tup(model.normal6),
                  float(a.axes[4] @ a.axes[5]))
        be = self._use_backend(resolve(backend))
        self._kernels, self._fk = be.offset_wrist, be.fk(chain)
        self._m: tuple = (be.table(a.axes, fields[0]),) + fields[1:11] + \
            (be.table(a.lower, fields[11]), be.table(a.upper, fields[12])) + fields[13:]
        self._every, self._frames = self._rows(8, 7), self._rows(7, 12)
        self._gaps = be.zeros(2)
        self._zeros = np.zeros(7)
        self._reach = be.zeros(6)
        self._special = be.zeros(offset_kernels.REACH_SAMPLES)
        # q7 is searched over its limits; over one turn where it has none (continuous).
        lo7, hi7 = float(a.lower[6]), float(a.upper[6])
        if not (math.isfinite(lo7) and math.isfinite(hi7)):
            lo7, hi7 = -math.pi, math.pi
        self._grid = np.linspace(lo7, hi7, Q7_GRID)
        self._q7_mid = 0.5 * (lo7 + hi7)

    @classmethod
    def from_chain(cls, chain: Chain, backend: str = 'auto') -> 'AnalyticOffsetWrist':
        """Build the solver for an offset-wrist chain (ModelError with the reason otherwise)."""
        return cls(chain, offset_wrist_model(chain), backend)

    def warm_up(self, q) -> None:
        """Run every path once at q (7,): given q7, reference, a q7 moved, swivel, pole."""
        q = self.chain.check_q(q)
        target = self.chain.forward(q)
        moved = q.copy()
        moved[6] = self._grid[0] if q[6] > self._q7_mid else self._grid[-1]
        self.solve(target, q)
        self.solve(target, moved)
        self.solve(target, q7=q[6])
        self.solve(target)
        self.solve(target, q, pole=self.model.arm.shoulder + np.array([0.0, 0.0, 1.0]))
        self.feasible_q7(target, self.branch_of(q))
        # The searches for a q7 to move to, whether or not this pose needed them.
        self._coarse_move(target, float(moved[6]), q)
        self._nearest_feasible(target, float(moved[6]), BRANCHES, self.branch_of(q))
        # Every branch at once, as collision.free searches them.
        self.solve_batch(np.broadcast_to(target, (8, 4, 4)), np.full(8, q[6]), BRANCHES)

    # -- the kernels, with this backend's containers ------------------------------

    def _solve_ordered(self, target: FloatArray, q7: float, order: FloatArray,
                       q_ref: Optional[FloatArray]):
        """Every branch at q7; the first of order within limits (or nearest q_ref).

        Returns (q (7,), within limits, position error, orientation error, gap).
        """
        fb1 = float(q_ref[0]) if q_ref is not None else 0.0
        fb5 = float(q_ref[4]) if q_ref is not None else 0.0
        ref = q_ref if q_ref is not None else self._zeros
        q, status, pos, rot, gap = self._kernels.solve_ordered_rows(
            self._arg(target), float(q7), self._arg(order), fb1, fb5, self._m, self._fk,
            self._arg(ref), q_ref is not None, REACH_TOL_M, self._every, self._gaps,
            self._frames)
        return np.array(q), status == offset_kernels.WITHIN_LIMITS, float(pos), float(rot), \
            float(gap)

    def _margins(self, target: FloatArray, q7s: FloatArray) -> FloatArray:
        """Feasibility margins (len(q7s), 8) of every branch (offset_kernels.margin_grid)."""
        out = self._rows(len(q7s), 8)
        self._kernels.margin_grid(self._arg(target), self._arg(np.ascontiguousarray(q7s)),
                                  SEARCH_GAP, self._m, self._every, self._gaps, out)
        return np.asarray(out, dtype=np.float64).reshape(-1, 8)

    def _edge(self, target: FloatArray, row: int, inside: float, outside: float) -> float:
        """Bisect the feasibility edge of branch ``row`` between q7 values inside / outside."""
        return float(self._kernels.margin_edge(self._arg(target), row, float(inside),
                                               float(outside), SEARCH_GAP, BISECTION_STEPS,
                                               self._m))

    # -- public ------------------------------------------------------------------

    def swivel_of(self, q) -> float:
        """Swivel angle psi (rad, in (-pi, pi]) of configuration q (7,)."""
        return self._swivel_and_branch(self.chain.check_q(q))[0]

    def branch_of(self, q) -> Tuple[int, int, int]:
        """Return the (elbow, shoulder, root) signs of configuration q (7,)."""
        return self._swivel_and_branch(self.chain.check_q(q))[1]

    def _swivel_and_branch(self, q: FloatArray):
        psi, e, s, r = self._kernels.swivel_and_branch(self._arg(q), self._m, self._fk,
                                                       self._frames)
        return float(psi), (int(e), int(s), int(r))

    def solve_all(self, T_target, q7: float) -> List[FloatArray]:
        """Every branch at joint 7 = ``q7`` (rad) that reaches the pose within the limits.

        Returns:
            Up to 8 joint vectors (7,), chain order; empty when at this q7 the
            pose is out of reach or every branch violates a limit.

        """
        target = check_pose(T_target)
        q7 = self._check_angle(q7, 'q7')
        qs, gaps = self._solve_batch(np.broadcast_to(target, (8, 4, 4)), np.full(8, q7),
                                     BRANCHES)
        return distinct(qs[self._reaches(qs, gaps)])

    def solve_batch(self, T_targets, q7, branch) -> Tuple[FloatArray, FloatArray]:
        """Solve many targets at once for given q7 values and branches.

        Args:
            T_targets: (N, 4, 4) tip poses in the base frame.
            q7: (N,) or scalar joint 7 values, radians.
            branch: (3,) or (N, 3) (elbow, shoulder, root) signs.

        Returns:
            q: (N, 7) joint vectors (where out of reach or the swivel has no
            root: the closest the branch gives); valid: (N,) bool, the pose
            reached within every limit.

        """
        targets = np.asarray(T_targets, dtype=np.float64)
        if targets.ndim != 3 or targets.shape[1:] != (4, 4):
            raise InvalidInputError(f'T_targets: expected shape (N, 4, 4), received '
                                    f'{targets.shape}')
        n = targets.shape[0]
        q7s = np.broadcast_to(np.asarray(q7, dtype=np.float64), (n,))
        branches = np.broadcast_to(np.asarray(branch, dtype=np.float64), (n, 3))
        if not np.all(np.isfinite(targets)) or not np.all(np.isfinite(q7s)):
            raise InvalidInputError('solve_batch: targets and q7 must be finite')
        if not np.all(np.abs(branches) == 1.0):
            raise InvalidInputError('branch: expected signs +1 / -1')
        q, gaps = self._solve_batch(targets, q7s, branches)
        return q, self._reaches(q, gaps)

    def _reaches(self, qs: FloatArray, gaps: FloatArray) -> FloatArray:
        """Rows (K,) of solutions qs (K, 7) with gaps (K,) that reach the pose within limits."""
        lo, hi = self.model.arm.lower, self.model.arm.upper
        return (gaps <= REACH_TOL_M) & np.all((qs >= lo) & (qs <= hi), axis=1)

    def _solve_batch(self, targets, q7s, branches) -> Tuple[FloatArray, FloatArray]:
        n = targets.shape[0]
        out = self._rows(n, 7)
        gaps = self._be.empty(n)
        zeros = np.zeros(n)
        self._kernels.solve_many(*(self._arg(np.ascontiguousarray(x, dtype=np.float64))
                                   for x in (targets, q7s, branches, zeros, zeros)),
                                 self._m, out, gaps)
        return np.asarray(out, dtype=np.float64).reshape(-1, 7), np.asarray(gaps)

    def feasible_q7(self, T_target, branch: Sequence[int]) -> List[Tuple[float, float]]:
        """Intervals of q7 (rad, within joint 7's limits) where ``branch`` reaches the pose.

        Within the limits of every joint; each edge bisected to ~1e-14 rad.
        """
        target = check_pose(T_target)
        row = self._branch_row(branch)
        q7s, margins = self._samples(target)
        inside = margins[:, row] >= 0.0
        intervals = []
        g = 0
        while g < len(q7s):
            if not inside[g]:
                g += 1
                continue
            start = g
            while g + 1 < len(q7s) and inside[g + 1]:
                g += 1
            lo = q7s[start] if start == 0 else \
                self._edge(target, row, q7s[start], q7s[start - 1])
            hi = q7s[g] if g == len(q7s) - 1 else self._edge(target, row, q7s[g], q7s[g + 1])
            intervals.append((float(lo), float(hi)))
            g += 1
        return intervals

    def _samples(self, target: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """q7 samples (K,) over joint 7's range and every branch's margins there (K, 8).

        The grid of Q7_GRID points; cells where a branch's joint moves by more
        than REFINE_JUMP (near a singular shoulder q1 and q3 turn fast with
        q7 and can cross a limit band between two grid points) are split
        REFINE_SPLIT ways, up to REFINE_LEVELS times; plus the edges where an
        elbow sign's solutions begin or end (bisected; a branch is often
        feasible only in a narrow band next to such a fold).
        """
        q7s = self._grid_for(target)
        qs, margins = self._branch_grid(target, q7s)
        for _ in range(REFINE_LEVELS):
            valid = margins > offset_kernels.NO_ROOT_MARGIN
            jump = np.abs(np.diff(qs, axis=0)).max(axis=2)
            fast = np.flatnonzero(np.any((jump > REFINE_JUMP) & valid[1:] & valid[:-1], axis=1))
            if fast.size == 0:
                break
            t = np.arange(1, REFINE_SPLIT) / REFINE_SPLIT
            extra = (q7s[fast, None] + t[None, :] * (q7s[fast + 1] - q7s[fast])[:, None]).ravel()
            q7s, qs, margins = self._merged(target, q7s, qs, margins, extra)
        edges = []
        for elbow in (0, 1):
            valid = margins[:, 4 * elbow] > offset_kernels.NO_ROOT_MARGIN
            for g in np.flatnonzero(valid[1:] != valid[:-1]):
                inside, outside = (g, g + 1) if valid[g] else (g + 1, g)
                edges.append(self._kernels.root_edge(
                    self._arg(target), 1.0 - 2.0 * elbow, float(q7s[inside]),
                    float(q7s[outside]), SEARCH_GAP, BISECTION_STEPS, self._m))
        if edges:
            q7s, qs, margins = self._merged(target, q7s, qs, margins, np.array(edges))
        return q7s, margins

    def _grid_for(self, target: FloatArray) -> FloatArray:
        """Return the q7 grid with the target's reach samples (reach_samples) added.

        Those fall inside or on the edges of a band of reachable q7 narrower
        than the grid.
        """
        count = self._kernels.reach_samples(self._arg(target), float(self._grid[0]),
                                            float(self._grid[-1]), self._m, self._reach,
                                            self._special)
        special = np.asarray(self._special[:count], dtype=np.float64)
        return np.unique(np.concatenate((self._grid, special)))

    def _branch_grid(self, target: FloatArray, q7s: FloatArray):
        """Every branch's solution (K, 8, 7) and margin (K, 8) at q7s (K,)."""
        k = len(q7s)
        qs, margins = self._rows(8 * k, 7), self._rows(k, 8)
        self._kernels.branch_grid(self._arg(target), self._arg(np.ascontiguousarray(q7s)),
                                  SEARCH_GAP, self._m, self._every, self._gaps, qs, margins)
        return np.asarray(qs, dtype=np.float64).reshape(k, 8, 7), \
            np.asarray(margins, dtype=np.float64).reshape(k, 8)

    def _merged(self, target, q7s, qs, margins, extra):
        """Return the samples with ``extra`` q7 values added, in order."""
        more_qs, more_margins = self._branch_grid(target, extra)
        q7s = np.concatenate((q7s, extra))
        order = np.argsort(q7s, kind='stable')
        return q7s[order], np.concatenate((qs, more_qs))[order], \
            np.concatenate((margins, more_margins))[order]

    def solve(self, T_target, q_reference=None, *, q7: Optional[float] = None,
              swivel: Optional[float] = None, pole=None) -> IKResult:
        """Solve for one configuration of the tip at ``T_target``.

        The free parameter comes from, in order: ``q7`` (radians), ``swivel``
        (the elbow's swivel angle, radians), ``pole`` (a point (3,) the elbow
        turns toward), ``q_reference`` (its q7), else the middle of joint 7's
        range. With a reference the branch nearest it in joint space wins
        (no branch flips while tracking), else the first of BRANCHES within
        the limits. When no branch reaches the pose within the limits at that
        value (and ``q7`` itself was not given), q7 moves: to the feasible
        solution nearest the reference in joint space (without one: nearest
        that q7) on a coarse grid of q7, then along its branch toward the
        reference's q7 up to the edge of feasibility; only when the coarse
        grid has none, to the nearest feasible value on the fine grid (the
        reference's branch kept whenever it has one). A swivel or pole no
        branch can meet within the limits falls back to the reference's q7
        the same way.

        Returns:
            IKResult; success False with the reason when no q7 reaches the
            pose within the limits (q is then the closest the parameter's
            branch gives, clipped into the limits: never NaN).

        """
        start = time.perf_counter()
        target = self._check_pose(T_target)
        q_ref = None if q_reference is None else self.chain.check_q(q_reference, 'q_reference')
        wanted = q7_default = self._q7_mid if q_ref is None else float(q_ref[6])
        if q7 is not None:
            wanted = self._check_angle(q7, 'q7')
        elif swivel is not None or pole is not None:
            found = self._solve_swivel(target, swivel, pole, q_ref)
            if found is not None:
                return self._result(start, *found, '')
        q, ok, pos, rot, gap = self._solve_ordered(target, wanted, BRANCHES, q_ref)
        if not ok or gap > REACH_TOL_M:
            if q7 is not None:
                return self._result(start, q, False, pos, rot, gap,
                                    f'no branch reaches the pose within the limits at q7 = '
                                    f'{wanted:.6g} rad')
            order = BRANCHES
            moved = self._coarse_move(target, q7_default, q_ref)
            if moved is None:
                preferred = None if q_ref is None else self._swivel_and_branch(q_ref)[1]
                order = BRANCHES if preferred is None else BRANCH_ORDERS[preferred]
                moved = self._nearest_feasible(target, q7_default, order, preferred)
            if moved is None:
                return self._result(start, q, False, pos, rot, gap,
                                    self._unreachable_reason(target))
            q, ok, pos, rot, gap = self._solve_ordered(target, moved, order, q_ref)
        return self._result(start, q, ok, pos, rot, gap, '')

    def _result(self, start: float, q: FloatArray, ok: bool, pos: float, rot: float,
                gap: float, reason: str) -> IKResult:
        success = ok and gap <= REACH_TOL_M and pos <= POSITION_TOL_M and \
            rot <= ORIENTATION_TOL_RAD
        if not success and not reason:
            reason = f'residual {pos:.3g} m / {rot:.3g} rad above tolerance'
        if not success:
            q = np.clip(q, self.model.arm.lower, self.model.arm.upper)
        return IKResult(q=q, success=success, position_error=pos, orientation_error=rot,
                        iterations=0, restarts=0, elapsed_s=time.perf_counter() - start,
                        reason='' if success else reason)

    def _solve_swivel(self, target, swivel, pole, q_ref
                      ) -> Optional[Tuple[FloatArray, bool, float, float, float]]:
        """Solve for a wanted swivel angle or pole: (q, ok, pos, rot, gap) or None if unmet."""
        if swivel is not None:
            psi, p, use_pole = self._check_angle(swivel, 'swivel'), np.zeros(3), False
        else:
            p = np.asarray(pole, dtype=np.float64)
            if p.shape != (3,) or not np.all(np.isfinite(p)):
                raise InvalidInputError(f'pole: expected a finite point (3,), received {pole!r}')
            psi, use_pole = 0.0, True
        lo7, hi7 = self._grid[0], self._grid[-1]
        if q_ref is not None:
            # Tracking: the wanted swivel near the reference's q7 first (cheap, and
            # the continuous choice), the whole range only when none is there.
            near = np.linspace(max(lo7, q_ref[6] - LOCAL_WINDOW),
                               min(hi7, q_ref[6] + LOCAL_WINDOW), LOCAL_GRID)
            found = self._swivel_solution(target, psi, p, use_pole, near, q_ref)
            if found is not None:
                return found
        return self._swivel_solution(target, psi, p, use_pole, self._grid_for(target), q_ref)

    def _swivel_solution(self, target, psi, pole, use_pole, q7s, q_ref
                         ) -> Optional[Tuple[FloatArray, bool, float, float, float]]:
        """Best solution at the q7 values of q7s (K,) where a branch's swivel is the wanted one."""
        out = self._rows(MAX_SWIVEL_ROOTS, 3)
        count = self._kernels.swivel_parameter(self._arg(target), psi, self._arg(pole),
                                               use_pole, self._arg(q7s), SEARCH_GAP,
                                               BISECTION_STEPS, self._m, out)
        best = None
        for q7, e, r in np.asarray(out[:count], dtype=np.float64).reshape(-1, 3):
            rows = BRANCHES[(BRANCHES[:, 0] == e) & (BRANCHES[:, 2] == r)]
            q, ok, pos, rot, gap = self._solve_ordered(target, q7, rows, q_ref)
            if not ok or gap > REACH_TOL_M:
                continue
            # With a reference the nearest solution, else the one nearest mid-range q7.
            cost = float(np.sum((q - q_ref) ** 2)) if q_ref is not None else \
                abs(q7 - self._q7_mid)
            if best is None or cost < best[0]:
                best = (cost, (q, ok, pos, rot, gap))
        return None if best is None else best[1]

    def _coarse_move(self, target: FloatArray, q7: float,
                     q_ref: Optional[FloatArray]) -> Optional[float]:
        """q7 to move to on a coarse grid (offset_kernels.coarse_move), or None."""
        lo7, hi7 = float(self._grid[0]), float(self._grid[-1])
        moved = self._kernels.coarse_move(
            self._arg(target), float(q7), self._arg(q_ref if q_ref is not None else self._zeros),
            q_ref is not None, lo7, hi7, Q7_COARSE, COARSE_RING, SEARCH_GAP, COARSE_STEPS,
            self._m, self._every, self._gaps, self._reach, self._special)
        return None if math.isnan(moved) else float(moved)

    def _nearest_feasible(self, target, q7, order, preferred) -> Optional[float]:
        """q7 (rad) nearest the given one where a branch is feasible; the preferred one's first.

        The grid is searched outward from q7 in chunks (usually one chunk
        suffices); only when no grid point is feasible (for the preferred
        branch), all samples (:meth:`_samples`: also narrow bands next to
        folds and fast joints). A band narrower than a grid cell nearer q7
        than a feasible grid point can be passed over.
        """
        found = self._nearest_on_grid(target, q7, None if preferred is None
                                      else self._branch_row(preferred))
        if found is not None:
            return found
        q7s, margins = self._samples(target)
        rows = [self._branch_row(b) for b in order]
        if preferred is not None and np.any(margins[:, rows[0]] >= 0.0):
            rows = rows[:1]
        best = None
        for row in rows:
            feasible = np.flatnonzero(margins[:, row] >= 0.0)
            if feasible.size == 0:
                continue
            g = int(feasible[np.argmin(np.abs(q7s[feasible] - q7))])
            edge = float(q7s[g])
            # Refine toward q7: the edge between the feasible sample and its neighbour.
            step = -1 if q7s[g] > q7 else 1
            if 0 <= g + step < len(q7s) and margins[g + step, row] < 0.0:
                edge = self._edge(target, row, q7s[g], q7s[g + step])
            if best is None or abs(edge - q7) < abs(best - q7) - 1e-12:
                best = edge
        return best

    def _nearest_on_grid(self, target: FloatArray, q7: float,
                         row: Optional[int]) -> Optional[float]:
        """Nearest q7 to the given one where branch ``row`` (None: any) is feasible on the grid.

        Chunks of SEARCH_CHUNK grid points outward from q7; the cell toward
        q7 refined and the edge bisected.
        """
        grid = self._grid_for(target)
        margins = np.full((len(grid), 8), -np.inf)
        for chunk in np.array_split(np.argsort(np.abs(grid - q7), kind='stable'),
                                    max(1, len(grid) // SEARCH_CHUNK)):
            margins[chunk] = self._margins(target, grid[chunk])
            found = self._nearest_feasible_point(target, q7, grid, margins, chunk, row)
            if found is not None:
                return found
        return None

    def _nearest_feasible_point(self, target, q7, grid, margins, indices,
                                row) -> Optional[float]:
        """Feasible edge nearest q7 among ``indices`` of grid for ``row`` (None: any), or None."""
        cols = margins[indices] if row is None else margins[indices][:, [row]]
        feasible = np.flatnonzero(np.any(cols >= 0.0, axis=1))
        if feasible.size == 0:
            return None
        k = int(feasible[np.argmin(np.abs(grid[indices[feasible]] - q7))])
        g = int(indices[k])
        use = row if row is not None else int(np.argmax(margins[g]))
        toward = g - 1 if grid[g] > q7 else g + 1
        bound = grid[toward] if 0 <= toward < len(grid) and \
            (grid[toward] - q7) * (grid[g] - q7) > 0.0 else q7
        # The cell toward q7, split REFINE_SPLIT ways: a band within it is nearer.
        sub = np.linspace(grid[g], bound, REFINE_SPLIT + 1)
        inside = np.flatnonzero(self._margins(target, sub[1:-1])[:, use] >= 0.0)
        last = int(inside[-1]) + 1 if inside.size else 0
        return self._edge(target, use, sub[last], sub[last + 1])

    def _unreachable_reason(self, target: FloatArray) -> str:
        if np.all(self._margins(target, self._grid_for(target)) <=
                  offset_kernels.NO_ROOT_MARGIN):
            return ('target out of reach: at no q7 within its limits does an elbow solution '
                    'reach the pose (the closest the parameter gives is used)')
        return 'no branch reaches the pose within the joint limits at any q7'

    def _check_angle(self, value, label: str) -> float:
        angle = float(value)
        if not math.isfinite(angle):
            raise InvalidInputError(f'{label}: expected a finite angle, received {value!r}')
        return angle

    @staticmethod
    def _branch_row(branch) -> int:
        b = [int(v) for v in branch]
        if len(b) != 3 or any(v not in (1, -1) for v in b):
            raise InvalidInputError(f'branch: expected three signs +1 / -1, received {branch!r}')
        return (0 if b[0] > 0 else 4) + (0 if b[1] > 0 else 2) + (0 if b[2] > 0 else 1)
