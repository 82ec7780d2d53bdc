# SPDX-License-Identifier: Apache-2.0

"""Near-SRS arms: the nearest exact SRS model, and the polish of its solutions on the true chain.

An arm whose axes miss an exact SRS geometry by at most NEAR_SRS_BOUND_M is
solved on its nearest SRS model (:func:`nearest_srs_model`), and each answer
is polished on the true chain: Levenberg-Marquardt from it, then from the
model's other branches and swivel angles, then Gauss-Newton fallbacks and a
time-budgeted Jacobian rescue (:class:`NearSRSPolish`, a base of
:class:`ik_node.core.ik.closed_form.srs.AnalyticSRS`).
"""

import math
import time
from typing import Any, Callable, Optional, Tuple

from ik_node.core.errors import ModelError
from ik_node.core.ik import local as local_ik
from ik_node.core.ik.base import IKResult
from ik_node.core.ik.closed_form.base import compiled_entry, model_of, PARALLEL_SIN, \
    point_line_distance, SRSModel, zero_geometry
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.core.model.chain import Chain
from ik_node.core.poses import residual_norms
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# A chain whose axes miss an exact SRS geometry by more than MEET_TOL_M but
# at most this (metres: the largest distance of the shoulder / wrist point
# from its three axes, or between their projections on the elbow axis) is a
# near-SRS arm: solved on its nearest exact SRS model, then polished on the
# true chain. Published descriptions carry offsets of a few tenths of a
# millimetre (rounding, calibration); on the iiwa14 with every joint origin
# moved by 3 mm (a deviation of ~6 mm) the polish still converges in a median
# of 3 Newton steps; 1 cm keeps that margin.
NEAR_SRS_BOUND_M = 0.01
# Polish of a near-SRS solution on the true chain: to this residual (m, rad),
# in at most this many Newton steps.
POLISH_TOL = 1e-10
POLISH_ITERATIONS = 50
# Gauss-Newton steps of a fallback polish (a few; near a stretched elbow the error
# is quadratic in q4 and each step only halves it).
NEWTON_ITERATIONS = 60
# Where the polish from the model's solution fails: the model is solved again
# for targets corrected by the chain's position error, this many times.
MODEL_CORRECTIONS = 3
# Elbow angles (rad) to restart the polish from, off a stretched elbow.
ELBOW_NUDGES = (0.05, 0.15)
# Swivel angles of the sweep that restarts the polish near a stretched elbow
# (where the chain reaches over a narrow band of swivel angles only).
SWEEP_ANGLES = 24
# ... and model solutions beyond a limit by at most this (rad) are clipped in
# and polished (the chain's solutions differ from the model's by ~deviation /
# link length, a few 0.01 rad).
SWEEP_LIMIT_MARGIN = 0.1
# ... and if that fails too (a few in 10^4 poses, all near a stretched elbow),
# the Jacobian solver with restarts (to its default 1e-6), from the polish's
# best, for at most this long (s), then the Gauss-Newton polish again.
RESCUE_BUDGET_S = 0.02


def _least_squares_point(points: FloatArray, axes: FloatArray) -> Tuple[FloatArray, float]:
    """Point (3,) nearest the three lines (point, unit axis) in the least-squares sense.

    Returns the point and its largest distance from one of the lines (m).

    Raises:
        ModelError: the lines are parallel (no nearest point).

    """
    normal = np.zeros((3, 3))
    rhs = np.zeros(3)
    for p, w in zip(points, axes):
        project = np.eye(3) - np.outer(w, w)
        normal += project
        rhs += project @ p
    if np.linalg.cond(normal) > 1.0 / PARALLEL_SIN:
        raise ModelError('parallel')
    x: FloatArray = np.linalg.solve(normal, rhs).astype(np.float64)
    return x, max(point_line_distance(x, p, w) for p, w in zip(points, axes))


def nearest_srs_model(chain: Chain) -> Tuple[SRSModel, float]:
    """Return the exact SRS arm nearest ``chain`` and how far the chain is from it (m).

    The shoulder point is the least-squares meeting point of axes 1-3, the
    wrist point that of axes 5-7, moved along the elbow axis to where the
    shoulder projects onto it (so the elbow bends in a plane); every axis
    keeps its direction (so orientations are exact, only positions differ,
    by about the deviation). The deviation is the largest of: a shoulder or
    wrist axis's distance from its point, the wrist point's move.

    Raises:
        ModelError: the chain is not SRS in structure (see :func:`srs_model`).

    """
    axes, points, tip = zero_geometry(chain)
    try:
        shoulder, miss_s = _least_squares_point(points[:3], axes[:3])
        wrist, miss_w = _least_squares_point(points[4:], axes[4:])
    except ModelError:
        raise ModelError('not an SRS arm: the shoulder or wrist axes are parallel') from None
    w4, p4 = axes[3], points[3]
    shift = float(np.dot(wrist - p4, w4)) - float(np.dot(shoulder - p4, w4))
    wrist = wrist - shift * w4
    model = model_of(chain, axes, points, tip, shoulder, wrist)
    return model, max(miss_s, miss_w, abs(shift))


class NearSRSPolish:
    """The polish of a near-SRS AnalyticSRS: its model's solutions made exact on the chain.

    Uses the solver's ``chain``, ``model``, ``_polisher`` / ``_rescuer``
    (JacobianIK on the chain), ``_solve_batch``, ``_reference`` and ``_errors``.
    """

    chain: Chain
    model: SRSModel
    _polisher: Optional[JacobianIK]
    _rescuer: JacobianIK
    _lm_args: Optional[tuple]
    _lm_entry: Any
    _errors: Callable[[FloatArray, FloatArray], Tuple[float, float]]
    _solve_batch: Callable[..., FloatArray]
    _reference: Callable[[FloatArray], Any]

    def _polish(self, target: FloatArray, q: FloatArray) -> Tuple[FloatArray, bool, float, float]:
        """Polish a model solution q (7,) on the true chain.

        Compiled Levenberg-Marquardt steps first (a few suffice from a model
        solution; their steps are clipped into the limits); where they stall
        (near a stretched elbow the model's solution is farther off), a model
        solution corrected by the chain's error (:meth:`_closer_model_start`)
        and Gauss-Newton steps with line search
        (:func:`ik_node.core.ik.local.polish`); as the last resort the Jacobian
        solver with restarts.

        Returns:
            (q (7,), converged within the limits, position error m, orientation error rad).

        """
        out, ok, r = self._levenberg_marquardt(target, q)   # starts from q within the limits
        if ok:
            return (out, True) + residual_norms(r)
        return self._fallback_polish(target, q)

    def _fallback_polish(self, target: FloatArray,
                         q: FloatArray) -> Tuple[FloatArray, bool, float, float]:
        """Polish q (7,) where LM from it failed: Gauss-Newton restarts, then the rescue.

        Returns what :meth:`_polish` returns.
        """
        for start in self._fallback_starts(target, q):
            out, ok = local_ik.polish(self.chain, start, target, POLISH_TOL, NEWTON_ITERATIONS)
            if ok:
                break
        if not ok:
            res = self._rescuer.solve(target, out)
            if res.success:
                out, ok = local_ik.polish(self.chain, res.q, target, POLISH_TOL,
                                          NEWTON_ITERATIONS)
        pos, rot = self._errors(target, out)
        return out, bool(ok and self.chain.within_limits(out)), pos, rot

    def _levenberg_marquardt(self, target: FloatArray, q: FloatArray):
        """Run the polisher's LM descent from q (7,); return (q, converged, residual (6,)).

        Compiled, the descent kernel is called directly with the arguments
        prepared once (JacobianIK._descend's wrapping costs as much as the
        few iterations a polish needs).
        """
        polisher = self._polisher
        assert polisher is not None
        if self._lm_args is None:
            out, ok, _, _, r = polisher._descend(target, q, q)
            return out, bool(ok), r
        fk, lower, upper, w6, max_step, frames, columns = self._lm_args
        entry = self._lm_entry
        if entry is not None and target.dtype == np.float64 and q.dtype == np.float64 and \
                target.flags.c_contiguous and q.flags.c_contiguous:
            out, ok, r = entry(fk, lower, upper, target, q, w6, max_step, POLISH_ITERATIONS,
                               POLISH_TOL, frames, columns)
            return out, bool(ok), r
        polish = polisher._kernels.lm.polish
        out, ok, r = polish(fk, lower, upper, target, q, w6, max_step, POLISH_ITERATIONS,
                            POLISH_TOL, frames, columns)
        self._lm_entry = compiled_entry(polish)
        return out, bool(ok), r

    def _fallback_starts(self, target: FloatArray, q: FloatArray):
        """Yield starts (7,) for the Gauss-Newton polish when LM from the model's q failed.

        First the model solved for a corrected target; then, for a stretched
        elbow (where the reach's derivative in q4 vanishes, so no Newton step
        can lengthen the arm), q with the elbow bent off the singularity by
        ELBOW_NUDGES (rad), on the model's elbow side first.
        """
        yield self._closer_model_start(target, q)
        side = 1.0 if q[3] >= 0.0 else -1.0
        for bend in ELBOW_NUDGES:
            for sign in (side, -side):
                start = q.copy()
                start[3] = sign * bend
                yield np.clip(start, self.model.lower, self.model.upper)

    def _closer_model_start(self, target: FloatArray, q: FloatArray) -> FloatArray:
        """Return a model solution (7,) whose position on the true chain is nearer the target.

        Near a stretched elbow the model's reach differs from the chain's by
        about the deviation, and its solution can be centimetres off on the
        chain. The model is solved again (same swivel and branch) for the
        target moved by the chain's position error, MODEL_CORRECTIONS times.
        """
        psi, branch = self._reference(q)
        signs = np.array(branch, dtype=np.float64)[None]
        aim = target.copy()
        for _ in range(MODEL_CORRECTIONS):
            aim[:3, 3] += target[:3, 3] - self.chain.forward(q)[:3, 3]
            q = self._solve_batch(aim[None], np.array([psi]), signs, q[None, 0], q[None, 4])[0]
        return np.clip(q, self.model.lower, self.model.upper)

    def _polished_result(self, target: FloatArray, q: FloatArray, reason: str,
                         start: float, order: FloatArray, psi: float,
                         sweep: bool) -> IKResult:
        """Return the IKResult of a near-SRS solve: the model's solution q (7,) polished.

        The model's reach differs from the chain's by about the deviation, so
        its verdict (out of reach, no branch within limits) stands only when
        the polish does not converge. When LM from q fails (about 1 pose in
        10^4), LM from the model's other branches (offsets make the chain's
        limits and reach differ between branches); with ``sweep`` (the
        target possibly within the chain's reach) over a sweep of swivel
        angles too (:meth:`_other_starts`): within ~0.01 rad of a stretched
        elbow the swivel is ill-defined and the chain reaches over a narrow
        band of swivel angles only, and near a limit the chain's solution
        can need another swivel than the model's. Then the Gauss-Newton
        fallbacks and the rescue (:meth:`_fallback_polish`).
        """
        polished, ok, residual = self._levenberg_marquardt(target, q)
        if not ok:
            for other in self._other_starts(target, q, order, psi, sweep):
                polished, ok, residual = self._levenberg_marquardt(target, other)
                if ok:
                    break
        if ok:
            pos, rot = residual_norms(residual)
        else:   # LM from q already failed: the rest of the polish
            polished, ok, pos, rot = self._fallback_polish(target, q)
        if not ok and not reason:
            reason = (f'the near-SRS polish did not converge: residual {pos:.3g} m / '
                      f'{rot:.3g} rad')
        return IKResult(q=polished, success=ok, position_error=pos, orientation_error=rot,
                        iterations=0, restarts=0, elapsed_s=time.perf_counter() - start,
                        reason='' if ok else reason)

    def _other_starts(self, target: FloatArray, q: FloatArray, order: FloatArray,
                      psi: float, sweep: bool):
        """Yield model solutions (7,) to polish from, after q failed.

        Every branch (in ``order``) at the requested swivel psi and at q's own
        swivel; with ``sweep`` also at SWEEP_ANGLES swivel angles spread
        around psi, nearest first, each start also with its elbow bent
        ELBOW_NUDGES[0] off the stretch (where no Newton step can lengthen the
        arm). Starts are clipped into the limits (skipped when beyond them by
        more than SWEEP_LIMIT_MARGIN).
        """
        angles = np.array([psi, self._reference(q)[0]])
        if sweep:
            steps = np.arange(1, SWEEP_ANGLES // 2 + 1) * (2.0 * np.pi / SWEEP_ANGLES)
            around = np.stack((steps, -steps), axis=1).ravel()[:SWEEP_ANGLES - 1]
            angles = np.concatenate((angles, psi + around))
        count = angles.size * len(order)
        starts = self._solve_batch(np.broadcast_to(target, (count, 4, 4)),
                                   angles.repeat(len(order)), np.tile(order, (angles.size, 1)),
                                   np.full(count, q[0]), np.full(count, q[4]))
        lo, hi = self.model.lower, self.model.upper
        beyond = np.max(np.maximum(lo - starts, starts - hi), axis=1)
        for start in np.clip(starts[beyond <= SWEEP_LIMIT_MARGIN], lo, hi):
            if np.max(np.abs(start - q)) <= 1e-9:
                continue
            yield start
            if not sweep:
                continue
            bent = start.copy()
            bent[3] = math.copysign(ELBOW_NUDGES[0], start[3])
            yield np.clip(bent, lo, hi)
