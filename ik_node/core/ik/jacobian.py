# SPDX-License-Identifier: Apache-2.0

"""Numerical IK for any chain: damped least squares on a log-quaternion error.

The residual of a tip pose ``T`` against a target ``T_t`` is
``r = [p_t - p; phi]`` with ``phi = 2 log(q_t q^-1)`` (the rotation vector of
``R_t R^T``, world frame, shortest rotation: |phi| <= pi). A joint step that
turns the tip by ``omega = J_w dq`` changes ``R_t R^T`` into
``R_t R^T Exp(-omega)``, so ``d phi = -Jr^-1(phi) J_w dq`` exactly, where
``Jr^-1`` is the inverse right Jacobian of SO(3) (the derivative of the log
with respect to a rotation). Using it, rather than the small-angle
``d phi = -J_w dq``, keeps the linear model exact to first order for large
orientation errors.

Each iteration solves the damped, seed-biased least-squares problem
(Buss, "Introduction to Inverse Kinematics with Jacobian Transpose,
Pseudoinverse and Damped Least Squares methods"; Levenberg-Marquardt
acceptance)::

    min_dq |W (r - A dq)|^2 + lambda^2 |dq - z|,   A = [J_v; Jr^-1(phi) J_w]

whose solution ``dq = z + A^T (A A^T + lambda^2 I)^-1 (r - A z)`` moves the
null space of a redundant arm toward ``z = gain (q_seed - q)`` (minimal
displacement from the seed) without disturbing the task. Joint limits hold by
construction: joints whose step would cross a limit are set onto it and
removed from the problem (an active set), and the step is then solved again
for the rest. A step that does not lower the cost is rejected and the
damping raised; an accepted one lowers it.
"""

import math
import time
from typing import Callable, List, Optional, Tuple

from ik_node.core.errors import InvalidInputError
from ik_node.core.ik.base import check_budget, check_pose, IKResult, IKSolver
from ik_node.core.kernels import base as kernels
from ik_node.core.kernels.backend import resolve
from ik_node.core.kernels.lm_constants import BIAS_FULL_ABOVE, DAMPING_DOWN, DAMPING_MAX, \
    DAMPING_MIN, DAMPING_START, DAMPING_UP, STALL_FRACTION, STALL_WINDOW
from ik_node.core.model.chain import Chain
from ik_node.core.poses import split_pose
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

_gufunc_solve1: Optional[Callable[[FloatArray, FloatArray], FloatArray]]
try:  # numpy's own LAPACK gufunc behind np.linalg.solve (see _solve_spd)
    from numpy.linalg._umath_linalg import solve1 as _gufunc_solve1
except ImportError:  # pragma: no cover - other numpy layouts
    _gufunc_solve1 = None

GOALS = ('pose', 'position', 'orientation')

# Default wall-clock budget of a solve, seconds, per backend: the numpy
# reference runs the same iterations ~50x slower than the compiled twin, so
# it gets a larger budget to reach the same success rate (README, "Without
# numba": measured with ik_bench ik --backend numpy --timeout).
DEFAULT_TIMEOUT_S = {'numba': 0.01, 'numpy': 0.1}
# The numpy reference's quick solve (one descent, in a tick) stops after this
# much wall-clock time, s: ~10 of its iterations.
QUICK_BUDGET_S = 0.001


def inverse_right_jacobian(phi: FloatArray) -> FloatArray:
    """Inverse right Jacobian of SO(3) at rotation vector ``phi`` (kernels.inverse_right_jacobian).

    Args:
        phi: (3,) rotation vector, radians, |phi| <= pi.

    Returns:
        (3, 3) matrix.

    """
    return np.array(kernels.inverse_right_jacobian(phi)).reshape(3, 3)


def _solve_spd(g: FloatArray, b: FloatArray) -> FloatArray:
    """Solve g x = b for a small symmetric positive definite g.

    Calls numpy's LAPACK gufunc directly: np.linalg.solve spends ~8 of its
    ~11 us on argument handling for a 6x6 system. g is damped (eigenvalues
    >= DAMPING_MIN^2 > 0), so it is never singular; a non-finite answer
    falls back to the checked np.linalg.solve, which raises.
    """
    if _gufunc_solve1 is not None:
        x = _gufunc_solve1(g, b)
        if np.isfinite(x).all():
            return x
    return np.asarray(np.linalg.solve(g, b), dtype=np.float64)


class JacobianIK(IKSolver):
    """Damped-least-squares IK on the log-quaternion pose error, for any Chain.

    Args:
        chain: the kinematic chain.
        position_tolerance: success when the position error is below this, m.
        orientation_tolerance: success when the orientation error is below
            this, rad.
        goal: 'pose' (6-D), 'position' (3-D, orientation free) or
            'orientation' (3-D, position free).
        position_weight, orientation_weight: relative weights of the position
            rows (per metre) and orientation rows (per radian) in the
            least-squares problem.
        max_iterations: iteration cap per attempt.
        max_restarts: random restarts after the attempt from the seed fails.
        restart_candidates: successful restarts to collect before choosing the
            one closest to the seed (1: take the first).
        timeout_s: wall-clock budget of a whole solve, seconds; None: the
            backend's default (DEFAULT_TIMEOUT_S).
        nullspace_gain: fraction of the way back to the seed that the null
            space moves per iteration (0 disables the bias).
        max_step: largest joint change per iteration, rad (or m).
        random_seed: seed of the restart generator; each solve restarts it,
            so the same call gives the same answer.
        backend: 'numpy' (the reference implementation), 'numba' (the same
            descent compiled; about 50x faster per iteration, needs numba) or
            'auto' (numba when it is installed). With numba the wall-clock
            budget is checked between attempts (an attempt is bounded by
            max_iterations), with numpy also between iterations.

    Raises:
        InvalidInputError: an option out of range, or an unknown goal.

    """

    def __init__(self, chain: Chain, *, position_tolerance: float = 1e-6,
                 orientation_tolerance: float = 1e-6, goal: str = 'pose',
                 position_weight: float = 1.0, orientation_weight: float = 1.0,
                 max_iterations: int = 100, max_restarts: int = 200,
                 restart_candidates: int = 1, timeout_s: Optional[float] = None,
                 nullspace_gain: float = 0.2, max_step: float = 1.0, random_seed: int = 0,
                 backend: str = 'auto'):
        """Validate the options and precompute the row selection."""
        if goal not in GOALS:
            raise InvalidInputError(f'goal: expected one of {", ".join(GOALS)}, received {goal!r}')
        self._jit = resolve(backend).lm
        self.backend = 'numba' if self._jit is not None else 'numpy'
        if timeout_s is None:
            timeout_s = DEFAULT_TIMEOUT_S[self.backend]
        positive = {'position_tolerance': position_tolerance,
                    'orientation_tolerance': orientation_tolerance,
                    'position_weight': position_weight, 'orientation_weight': orientation_weight,
                    'timeout_s': timeout_s, 'max_step': max_step}
        for label, value in positive.items():
            if not (isinstance(value, (int, float)) and math.isfinite(value) and value > 0):
                raise InvalidInputError(f'{label}: expected a finite number > 0, '
                                        f'received {value!r}')
        for label, value, low in (('max_iterations', max_iterations, 1),
                                  ('max_restarts', max_restarts, 0),
                                  ('restart_candidates', restart_candidates, 1)):
            if not isinstance(value, int) or value < low:
                raise InvalidInputError(f'{label}: expected an integer >= {low}, '
                                        f'received {value!r}')
        if not (math.isfinite(nullspace_gain) and 0.0 <= nullspace_gain <= 1.0):
            raise InvalidInputError(f'nullspace_gain: expected a number in [0, 1], '
                                    f'received {nullspace_gain!r}')
        self.chain = chain
        self.position_tolerance = float(position_tolerance)
        self.orientation_tolerance = float(orientation_tolerance)
        self.goal = goal
        self.max_iterations = max_iterations
        self.max_restarts = max_restarts
        self.restart_candidates = restart_candidates
        self.timeout_s = float(timeout_s)
        self.nullspace_gain = float(nullspace_gain)
        self.max_step = float(max_step)
        self.random_seed = random_seed
        rows = {'pose': slice(0, 6), 'position': slice(0, 3), 'orientation': slice(3, 6)}[goal]
        self._rows = rows
        weights = np.array([position_weight] * 3 + [orientation_weight] * 3, dtype=np.float64)
        self._w = weights[rows]
        self._unit_weights = bool(np.all(self._w == 1.0))
        self._use_position = goal != 'orientation'
        self._use_orientation = goal != 'position'
        self._lower = chain.lower
        self._upper = chain.upper
        self._continuous = chain.continuous
        self._w6 = weights
        self._reach = chain.reach_sphere()

    name = 'jacobian'

    # -- public -----------------------------------------------------------------

    @property
    def budget_s(self) -> Optional[float]:
        """Wall-clock budget of a solve, seconds (``timeout_s``)."""
        return self.timeout_s

    def set_budget(self, seconds: float) -> None:
        """Set ``timeout_s`` for later solves (InvalidInputError unless finite > 0)."""
        self.timeout_s = check_budget(seconds)

    def solve(self, T_target, q_reference=None, *, pole=None) -> IKResult:
        """Solve for joints that put the tip at ``T_target``.

        Args:
            T_target: (4, 4) target pose of the tip in the chain's base frame.
            q_reference: (n,) seed, the starting joint values (default: the
                middle of the limits); clipped into the limits. The answer
                stays near it (continuous joints are unwrapped to it).
            pole: ignored: a general chain has no elbow model (IKSolver.uses_pole).

        Returns:
            IKResult; when no attempt succeeds, the best configuration found
            (lowest weighted residual), within limits, with the reason.

        Raises:
            InvalidInputError: a non-finite or non-rigid target, a bad seed.

        """
        if self._jit is not None and not self._jit.descend.signatures:
            self._load_compiled_descent()
        start = time.perf_counter()
        target = check_pose(T_target)
        seed = self.chain.mid_limits() if q_reference is None else \
            self.chain.check_q(q_reference, 'q_reference')
        clipped_seed = np.clip(seed, self._lower, self._upper)
        deadline = start + self.timeout_s
        rng: Optional[np.random.Generator] = None
        successes: List[Tuple[float, FloatArray, FloatArray]] = []
        best: Optional[Tuple[float, FloatArray, FloatArray]] = None
        iterations = restarts = 0
        initial = clipped_seed
        beyond = self._beyond_reach(target)
        while True:
            q, ok, cost, its, r = self._descend(target, initial, clipped_seed, deadline)
            iterations += its
            q = self._unwrap(q, seed)
            if ok:
                successes.append((float(np.linalg.norm(q - seed)), q, r))
                if len(successes) >= self.restart_candidates or restarts == 0:
                    break
            elif best is None or cost < best[0]:
                best = (cost, q, r)
            if beyond or restarts >= self.max_restarts or time.perf_counter() > deadline:
                break
            restarts += 1
            if rng is None:
                rng = np.random.default_rng(self.random_seed)
            initial = self._random_q(rng, clipped_seed)
        if successes:
            _, q, r = min(successes, key=lambda s: s[0])
            reason = ''
        else:
            assert best is not None
            _, q, r = best
            reason = beyond or self._failure_reason(restarts, deadline)
        pos_err, rot_err = self._errors_of(r)
        return IKResult(q=q, success=bool(successes), position_error=pos_err,
                        orientation_error=rot_err, iterations=iterations, restarts=restarts,
                        elapsed_s=time.perf_counter() - start, reason=reason)

    def solve_quick(self, T_target, q_reference, *, pole=None) -> Optional[IKResult]:
        """One descent from the reference, no restarts: a cost bounded by max_iterations.

        What a tick may call (:meth:`solve`, with its restarts, runs in the
        worker). Its first call loads the compiled descent as :meth:`solve`
        does (the node warms the solver up before its first tick: warm_up).
        A pole is ignored.
        """
        if self._jit is not None and not self._jit.descend.signatures:
            self._load_compiled_descent()
        start = time.perf_counter()
        target = check_pose(T_target)
        seed = self.chain.check_q(q_reference, 'q_reference')
        clipped = np.clip(seed, self._lower, self._upper)
        # Compiled: bounded by max_iterations (microseconds each); numpy's
        # iterations cost ~0.1 ms each, bounded by QUICK_BUDGET_S as well.
        deadline = math.inf if self._jit is not None else start + QUICK_BUDGET_S
        q, ok, _, its, r = self._descend(target, clipped, clipped, deadline)
        pos_err, rot_err = self._errors_of(r)
        return IKResult(q=self._unwrap(q, seed), success=ok, position_error=pos_err,
                        orientation_error=rot_err, iterations=its,
                        elapsed_s=time.perf_counter() - start,
                        reason='' if ok else 'one descent did not converge (quick solve)')

    def _errors_of(self, r: FloatArray) -> Tuple[float, float]:
        pos = float(np.linalg.norm(r[:3])) if self._use_position else 0.0
        rot = float(np.linalg.norm(r[3:])) if self._use_orientation else 0.0
        return pos, rot

    def _load_compiled_descent(self) -> None:
        """Load the compiled descent before a budget starts (numba compiles it on a first use).

        numba compiles at a kernel's first call, from its cache in well under a
        second, from nothing in ~30 s; inside the first solve that time came
        out of its budget, and the solve gave up after one attempt ('timeout',
        issue 30: seen with numba 0.59 on a fresh cache). The node loads the
        kernels before it uses them (ik_node.core.warm); here a first solve
        loads them first, outside its budget: it takes longer, never worse.
        """
        q = self.chain.mid_limits()
        self._descend(self.chain.forward(q), q, q, float('inf'))

    # -- one attempt -----------------------------------------------------------

    def _descend(self, target: FloatArray, q0: FloatArray, q_ref: FloatArray,
                 deadline: float) -> Tuple[FloatArray, bool, float, int, FloatArray]:
        """Run LM iterations from q0; return (q, converged, cost, iterations, residual)."""
        target_r, target_p = split_pose(target)
        if self._jit is not None:
            q, ok, cost, its, r = self._jit.descend(
                self.chain.fk_arrays, self.chain.n, self._lower, self._upper, target_r,
                target_p, q0, q_ref, self._use_position, self._use_orientation, self._w6,
                self.nullspace_gain, self.max_step, self.max_iterations,
                self.position_tolerance, self.orientation_tolerance)
            return q, bool(ok), float(cost), int(its), r
        return self._descend_numpy(target_r, target_p, q0, q_ref, deadline)

    def _evaluate(self, target_r, target_p, q: FloatArray):
        """Forward kinematics of q and its residual: (frames, tip position, residual (6,))."""
        frames, tip_r, tip_p = self.chain.frames(q.tolist())
        r = np.array(kernels.pose_residual(target_r, target_p, tip_r, tip_p))
        return frames, tip_p, r

    def _descend_numpy(self, target_r, target_p, q0: FloatArray, q_ref: FloatArray,
                       deadline: float) -> Tuple[FloatArray, bool, float, int, FloatArray]:
        """Run one attempt with numpy: the reference implementation (module docstring)."""
        chain = self.chain
        q = np.clip(q0, self._lower, self._upper)   # as the compiled twin
        frames, tip_p, r = self._evaluate(target_r, target_p, q)
        cost = self._cost(r)
        damping = DAMPING_START
        history = [cost]
        for it in range(self.max_iterations):
            if self._converged(r):
                return q, True, cost, it, r
            if time.perf_counter() > deadline:
                return q, False, cost, it, r
            a = self._task_matrix(chain.jacobian_of_frames(frames, tip_p), r)
            rhs = self._weighted(r)
            bias = self.nullspace_gain > 0.0
            while True:
                dq = self._step(a, rhs, q, q_ref if bias else None, damping)
                q_new = q + dq
                np.clip(q_new, self._lower, self._upper, out=q_new)
                frames_new, tip_p_new, r_new = self._evaluate(target_r, target_p, q_new)
                cost_new = self._cost(r_new)
                if cost_new < cost:
                    damping = max(damping * DAMPING_DOWN, DAMPING_MIN)
                    break
                # Retry without the seed bias: with it, a heavily damped step
                # tends to the bias itself rather than to zero.
                bias = False
                damping *= DAMPING_UP
                if damping > DAMPING_MAX:
                    return q, self._converged(r), cost, it + 1, r
            q, frames, tip_p, r, cost = q_new, frames_new, tip_p_new, r_new, cost_new
            history.append(cost)
            if len(history) > STALL_WINDOW and \
                    cost > (1.0 - STALL_FRACTION) * history[-1 - STALL_WINDOW]:
                return q, self._converged(r), cost, it + 1, r
        return q, self._converged(r), cost, self.max_iterations, r

    def _weighted(self, r: FloatArray) -> FloatArray:
        wr = r[self._rows]
        return wr if self._unit_weights else self._w * wr

    def _cost(self, r: FloatArray) -> float:
        wr = self._weighted(r)
        return float(np.dot(wr, wr))

    def _converged(self, r: FloatArray) -> bool:
        if self._use_position and r[0] ** 2 + r[1] ** 2 + r[2] ** 2 > \
                self.position_tolerance ** 2:
            return False
        if self._use_orientation and r[3] ** 2 + r[4] ** 2 + r[5] ** 2 > \
                self.orientation_tolerance ** 2:
            return False
        return True

    def _task_matrix(self, jac: FloatArray, r: FloatArray) -> FloatArray:
        """Return A = [J_v; Jr^-1(phi) J_w] restricted to the goal rows (weighted)."""
        if not self._use_orientation:
            a = jac[:3].copy()
        else:
            a = np.empty_like(jac)
            a[:3] = jac[:3]
            np.dot(inverse_right_jacobian(r[3:]), jac[3:], out=a[3:])
            if not self._use_position:
                a = a[3:]
        if not self._unit_weights:
            a *= self._w[:, None]
        return a

    def _step(self, a: FloatArray, rhs: FloatArray, q: FloatArray,
              q_ref: Optional[FloatArray], damping: float) -> FloatArray:
        """Damped step, biased toward ``q_ref`` (None: no bias), joint limits as an active set.

        ``rhs`` is the weighted residual of the goal rows. Joints whose step
        would leave their range are put on the limit and removed; the rest is
        solved again (at most n passes; one when no limit is touched).
        """
        room_lo = self._lower - q
        room_hi = self._upper - q
        # The seed bias fades with the residual: a constant pull would keep
        # injecting second-order task error and spoil the final quadratic
        # convergence (measured: 8 -> 20-70 iterations on the 7-DoF arm).
        if q_ref is None:
            z = np.zeros_like(q)
            dq = self._dls(a, rhs, damping)
        else:
            fade = min(1.0, math.sqrt(float(np.dot(rhs, rhs))) / BIAS_FULL_ABOVE)
            z = np.minimum(np.maximum((self.nullspace_gain * fade) * (q_ref - q), room_lo),
                           room_hi)
            dq = z + self._dls(a, rhs - np.dot(a, z), damping)
        over = (dq < room_lo) | (dq > room_hi)
        if over.any():
            dq = self._step_with_limits(a, rhs, z, dq, over, room_lo, room_hi, damping)
        biggest = float(np.max(np.abs(dq)))
        if biggest > self.max_step:
            dq *= self.max_step / biggest
        return dq

    def _step_with_limits(self, a, rhs, z, dq, over, room_lo, room_hi, damping):
        """Repeat the step with the joints that crossed a limit pinned to it."""
        free = ~over
        dq = np.minimum(np.maximum(dq, room_lo), room_hi)
        for _ in range(dq.shape[0]):
            if not free.any():
                break
            af = a[:, free]
            resid = rhs - np.dot(a[:, ~free], dq[~free]) - np.dot(af, z[free])
            dq_f = z[free] + self._dls(af, resid, damping)
            lo, hi = room_lo[free], room_hi[free]
            crossed = (dq_f < lo) | (dq_f > hi)
            idx = np.flatnonzero(free)
            dq[idx] = np.minimum(np.maximum(dq_f, lo), hi)
            if not crossed.any():
                break
            free[idx[crossed]] = False
        return dq

    @staticmethod
    def _dls(a: FloatArray, resid: FloatArray, damping: float) -> FloatArray:
        """Minimum-norm damped least squares: argmin |resid - a x|^2 + damping^2 |x|^2."""
        m, k = a.shape
        if k >= m:
            g = np.dot(a, a.T)
            g.flat[::m + 1] += damping * damping
            return np.dot(a.T, _solve_spd(g, resid))
        g = np.dot(a.T, a)
        g.flat[::k + 1] += damping * damping
        return _solve_spd(g, np.dot(a.T, resid))

    # -- restarts and bookkeeping ---------------------------------------------

    def _random_q(self, rng: np.random.Generator, around: FloatArray) -> FloatArray:
        lo = np.where(np.isfinite(self._lower), self._lower, around - math.pi)
        hi = np.where(np.isfinite(self._upper), self._upper, around + math.pi)
        return rng.uniform(lo, hi)

    def _unwrap(self, q: FloatArray, seed: FloatArray) -> FloatArray:
        """Bring continuous joints to within pi of the seed (same rotation)."""
        if not self._continuous.any():
            return q
        delta = np.mod(q - seed + math.pi, 2.0 * math.pi) - math.pi
        return np.where(self._continuous, seed + delta, q)

    def _beyond_reach(self, target: FloatArray) -> str:
        """Return why no joint values reach ``target``'s position (Chain.reach_sphere), or ''.

        Such a target gets the attempt from the seed (the closest pose it
        reaches is returned) and no restarts: none can succeed, and 200 of
        them took ~30 ms, at every tick of a trajectory through such poses.
        """
        if not self._use_position:
            return ''
        centre, radius = self._reach
        distance = float(np.linalg.norm(target[:3, 3] - centre))
        if distance <= radius * (1.0 + 1e-9) + self.position_tolerance:
            return ''
        x, y, z = centre
        return (f'target out of reach: its position is {distance:.4f} m from ({x:.4f}, '
                f'{y:.4f}, {z:.4f}) in the base frame, and no joint values put the tip '
                f'farther than {radius:.4f} m from there; returning the closest pose reached')

    def _failure_reason(self, restarts: int, deadline: float) -> str:
        budget = 'timeout' if time.perf_counter() > deadline else f'{restarts} restarts'
        return (f'no configuration within tolerance ({self.position_tolerance:g} m, '
                f'{self.orientation_tolerance:g} rad) found before the {budget}; returning the '
                'closest pose reached (target out of reach or blocked by joint limits?)')
