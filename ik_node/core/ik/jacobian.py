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

The goal need not be the whole pose (issue 52): ``goal='position'`` counts
the position rows alone, ``'orientation'`` the rotation rows, ``'axis'``
the position and a tool axis ``a`` (the tip frame's ``tool_axis``) along the
target's (its turn about itself free: a drill, a suction cup), ``'look_at'``
the tool axis pointing at the target's position (a camera; where the tip is
is free). An axis is compared with its direction ``d`` by the chord
``d - a`` (kernels/lm.py gives its exact derivative).
"""

import math
import time
from typing import List, Optional, Tuple

from ik_node.core.errors import InvalidInputError
from ik_node.core.ik.base import check_budget, check_pose, IKResult, IKSolver
from ik_node.core.ik.task import Task
from ik_node.core.kernels.backend import resolve
from ik_node.core.kernels.lm_constants import AXIS_PRIORITY, POSITION_HELD, TASK_AXIS, \
    TASK_POSITION
from ik_node.core.model.chain import Chain
from ik_node.core.poses import split_pose
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


# Default wall-clock budget of a solve, seconds, per backend: under CPython
# (numpy) the same iterations run ~30x slower than compiled, so it gets a
# larger budget to reach a similar success rate (README, "Without numba":
# measured with ik_bench ik --backend numpy --timeout).
DEFAULT_TIMEOUT_S = {'numba': 0.01, 'numpy': 0.1}
# The quick solve (one descent, in a tick) under CPython stops after this
# many iterations (~1 ms); compiled it runs max_iterations (microseconds each).
QUICK_ITERATIONS_NUMPY = 10
# An axis task not met is descended once more with its axis rows weighted this
# much (JacobianIK._position_first): the position first, then the axis.
PRIORITY_WEIGHT = AXIS_PRIORITY
# Random starts of that descent besides the seed and the compromise (its optimum is a local one).
PRIORITY_STARTS = 4


def _priority(r: FloatArray) -> Tuple[bool, float]:
    """Order residuals (6,) position first: within POSITION_HELD, then by the axis' error."""
    held = float(np.linalg.norm(r[:3])) <= POSITION_HELD
    return (not held, float(np.linalg.norm(r[3:] if held else r[:3])))


class JacobianIK(IKSolver):
    """Damped-least-squares IK on the log-quaternion pose error, for any Chain.

    Args:
        chain: the kinematic chain.
        position_tolerance: success when the position error is below this, m.
        orientation_tolerance: success when the orientation error is below
            this, rad.
        goal: 'pose' (6-D), 'position' (3-D, orientation free),
            'orientation' (3-D, position free), 'axis' (the position and
            ``tool_axis`` along the target's: 5-D) or 'look_at' (``tool_axis``
            pointing at the target's position: 2-D) (module docstring).
        tool_axis: (3,) the tool axis in the tip frame (axis, look_at), made
            unit; default z.
        task: the Task (ik.task) instead of ``goal`` and ``tool_axis``.
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
        backend: 'numpy' (the descent, kernels.lm, run by CPython), 'numba'
            (the same source compiled; about 30x faster per iteration, needs
            numba) or 'auto' (numba when it is installed). The wall-clock
            budget is checked between attempts (an attempt is bounded by
            max_iterations).

    Raises:
        InvalidInputError: an option out of range, or an unknown goal.

    """

    def __init__(self, chain: Chain, *, position_tolerance: float = 1e-6,
                 orientation_tolerance: float = 1e-6, goal: str = 'pose',
                 tool_axis=(0.0, 0.0, 1.0), task: Optional[Task] = None,
                 position_weight: float = 1.0, orientation_weight: float = 1.0,
                 max_iterations: int = 100, max_restarts: int = 200,
                 restart_candidates: int = 1, timeout_s: Optional[float] = None,
                 nullspace_gain: float = 0.2, max_step: float = 1.0, random_seed: int = 0,
                 backend: str = 'auto'):
        """Validate the options and precompute the row selection."""
        self._kernels = resolve(backend)
        self.backend = self._kernels.name
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
        self.max_iterations = max_iterations
        self.max_restarts = max_restarts
        self.restart_candidates = restart_candidates
        self.timeout_s = float(timeout_s)
        self.nullspace_gain = float(nullspace_gain)
        self.max_step = float(max_step)
        self.random_seed = random_seed
        self.task = task if task is not None else Task(goal, tool_axis)
        self.goal = self.task.name
        self.tool_axis = np.array(self.task.tool_axis)
        self._axis = self.task.tool_axis
        self._task = self.task.code
        weights = np.array([position_weight] * 3 + [orientation_weight] * 3, dtype=np.float64)
        self._lower = chain.lower
        self._upper = chain.upper
        self._continuous = chain.continuous
        self._w6 = weights
        self._reach = chain.reach_sphere()
        self._fk = self._kernels.fk(chain)
        # The descent's scratch rows (frames, Jacobian columns): one solver, one thread.
        self._scratch = (self._kernels.rows(chain.movable, 12), self._kernels.rows(chain.n, 6))

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
            q, ok, cost, its, r = self._descend(target, initial, clipped_seed)
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
        met = bool(successes)
        if successes:
            _, q, r = min(successes, key=lambda s: s[0])
            reason = ''
        else:
            assert best is not None
            _, q, r = best
            reason = beyond or self._failure_reason(restarts, deadline)
            if self._task == TASK_AXIS and not beyond:
                q, r, reason = self._position_first(target, q, r, seed, reason)
                met = not reason
        pos_err, rot_err = self._errors_of(r)
        return IKResult(q=q, success=met, position_error=pos_err,
                        orientation_error=rot_err, iterations=iterations, restarts=restarts,
                        elapsed_s=time.perf_counter() - start, reason=reason)

    def solve_quick(self, T_target, q_reference, *, pole=None) -> Optional[IKResult]:
        """One descent from the reference, no restarts: a cost bounded by max_iterations.

        What a tick may call (:meth:`solve`, with its restarts, runs in the
        worker). Its first call loads the compiled descent as :meth:`solve`
        does (the node warms the solver up before its first tick: warm_up).
        A pole is ignored.
        """
        self._load_compiled_descent()
        start = time.perf_counter()
        target = check_pose(T_target)
        seed = self.chain.check_q(q_reference, 'q_reference')
        clipped = np.clip(seed, self._lower, self._upper)
        # Compiled: bounded by max_iterations (microseconds each); under CPython
        # an iteration costs ~0.1 ms: QUICK_ITERATIONS_NUMPY of them.
        q, ok, _, its, r = self._descend(
            target, clipped, clipped,
            None if self._kernels.compiled else min(self.max_iterations, QUICK_ITERATIONS_NUMPY))
        pos_err, rot_err = self._errors_of(r)
        return IKResult(q=self._unwrap(q, seed), success=ok, position_error=pos_err,
                        orientation_error=rot_err, iterations=its,
                        elapsed_s=time.perf_counter() - start,
                        reason='' if ok else 'one descent did not converge (quick solve)')

    def _position_first(self, target: FloatArray, q: FloatArray, r: FloatArray,
                        seed: FloatArray, reason: str) -> Tuple[FloatArray, FloatArray, str]:
        """Return (q, residual, reason) of an axis not met: the position first, then the axis.

        Where the position and the axis cannot both be met (five joints asked
        for a tool pointing down where the wrist cannot get it there), the
        least-squares answer trades centimetres of position for degrees of
        axis. A descent to the position alone, then one with the axis rows
        weighted PRIORITY_WEIGHT, put the tip on the position and the axis as
        near the target's as the arm then gets, from the seed, that answer and
        PRIORITY_STARTS random joints (up to four times as many while no start
        reaches the position): the nearest axis is taken when its position is
        nearer than the answer's. A last descent with the usual
        weights from each meets both where both can be met (reason '').
        """
        w6 = self._w6.copy()
        w6[3:] *= PRIORITY_WEIGHT

        def descent(start: FloatArray, task: int, weights: FloatArray):
            return self._descend(target, start, start, task=task, weights=weights, gain=0.0)

        # Starts: the seed, the compromise, and PRIORITY_STARTS random joints (the
        # axis' optimum on the position's self-motion is a local one): the best kept.
        rng = np.random.default_rng(self.random_seed)
        found: Optional[Tuple[FloatArray, FloatArray]] = None
        for k in range(2 + 4 * PRIORITY_STARTS):
            if k >= 2 + PRIORITY_STARTS and found is not None:
                break   # more only while the position itself is not found
            start = np.clip(seed, self._lower, self._upper) if k == 0 else q if k == 1 else \
                self._random_q(rng, seed)
            at, placed = descent(start, TASK_POSITION, self._w6)[:2]
            if not placed:
                continue
            q2, _, _, _, r2 = descent(at, self._task, w6)
            # Near a pose that meets both (the restarts' compromises missed it): both.
            q3, both, _, _, r3 = descent(q2, self._task, self._w6)
            if both:
                return self._unwrap(q3, seed), r3, ''
            if found is None or _priority(r2) < _priority(found[1]):
                found = (q2, r2)
        if found is None or np.linalg.norm(found[1][:3]) >= np.linalg.norm(r[:3]):
            return q, r, reason
        q2, r2 = found
        pos, rot = self._errors_of(r2)
        return self._unwrap(q2, seed), r2, (
            f'the position and the tool axis cannot both be met: the position is met within '
            f'{pos:.2g} m, the tool axis {rot:.3g} rad from the target axis (the closest found)')

    def _errors_of(self, r: FloatArray) -> Tuple[float, float]:
        """Return (position error m, orientation error rad) of a residual (6,) (Task.errors_of)."""
        return self.task.errors_of(r)

    def _load_compiled_descent(self) -> None:
        """Load the compiled descent before a budget starts (numba compiles it on a first use).

        numba compiles at a kernel's first call, from its cache in well under a
        second, from nothing in ~30 s; inside the first solve that time came
        out of its budget, and the solve gave up after one attempt ('timeout',
        issue 30: seen with numba 0.59 on a fresh cache). The node loads the
        kernels before it uses them (ik_node.core.warm); here a first solve
        loads them first, outside its budget: it takes longer, never worse.
        """
        if not self._kernels.compiled or self._kernels.lm.descend.signatures:
            return
        q = self.chain.mid_limits()
        self._descend(self.chain.forward(q), q, q)

    # -- one attempt -----------------------------------------------------------

    def _descend(self, target: FloatArray, q0: FloatArray, q_ref: FloatArray,
                 iterations: Optional[int] = None, task: Optional[int] = None,
                 weights: Optional[FloatArray] = None, gain: Optional[float] = None
                 ) -> Tuple[FloatArray, bool, float, int, FloatArray]:
        """Run LM iterations from q0 (kernels.lm.descend); (q, converged, cost, iterations, r).

        ``iterations``, ``task``, ``weights`` (6,), ``gain``: the cap, the task,
        the rows' weights and the seed bias (default the solver's own).
        """
        target_r, target_p = split_pose(target)
        frames, columns = self._scratch
        q, ok, cost, its, r = self._kernels.lm.descend(
            self._fk, self.chain.n, self._lower, self._upper, target_r, target_p,
            np.ascontiguousarray(q0, dtype=np.float64),
            np.ascontiguousarray(q_ref, dtype=np.float64),
            self._task if task is None else task, self._axis,
            self._w6 if weights is None else weights,
            self.nullspace_gain if gain is None else gain,
            self.max_step, self.max_iterations if iterations is None else iterations,
            self.position_tolerance, self.orientation_tolerance, frames, columns)
        return q, bool(ok), float(cost), int(its), r

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
        if not self.task.uses_position:
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
