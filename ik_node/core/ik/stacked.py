# SPDX-License-Identifier: Apache-2.0

"""Several end effectors solved at once: one Jacobian stacked over the chains, shared joints once.

Two arms on a torso (PR2, TIAGo dual, Baxter) are two chains from one base
link whose first joints are the same: solving each arm apart either leaves
the torso out or lets each move it its own way. :class:`StackedIK` solves
every end effector's task (ik.task.Task) together over the union of their
joints (:class:`JointUnion`): the task rows of each chain
(kernels.lm.task_rows: the pose's, a position's, an axis' chord, ...) are
scattered into the union's columns and stacked, and one Levenberg-Marquardt
step (kernels.lm.step: the seed bias, the active set of joints at their
limits, damped least squares) moves all joints. A joint shared by several
chains gets one value for all of them.

**Joint weights.** A torso should move only where the arms need it. A
weight ``w_j`` in (0, 1] makes joint j ``1 / w_j`` times dearer to move: the
step is solved in scaled joints ``z_j = q_j / sqrt(w_j)`` (the damped
least-squares step of minimal norm in z; the rows' columns scaled by
``sqrt(w_j)``), so with a weight of 0.01 the torso moves a tenth as much
for the same help. A locked joint does not move at all (its range shrunk
to where it is).

Joints (N,) in the union's order (rad, m); targets (4, 4) in the common base
frame, one per end effector, in the order given.
"""

from dataclasses import dataclass
import math
import time
from typing import List, Optional, Sequence, Tuple

from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.ik.base import check_pose
from ik_node.core.ik.task import POSE, Task
from ik_node.core.kernels.backend import resolve
from ik_node.core.kernels.lm_constants import DAMPING_DOWN, DAMPING_MAX, DAMPING_MIN, \
    DAMPING_START, DAMPING_UP, STALL_FRACTION, STALL_WINDOW
from ik_node.core.model.chain import Chain, checked_joints, joints_within
from ik_node.core.model.tree import FrameTree
from ik_node.core.poses import split_pose
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Default wall-clock budget of a stacked solve, s, per backend (twice the one-arm solver's).
DEFAULT_TIMEOUT_S = {'numba': 0.02, 'numpy': 0.2}
# Two joints of the same name in two chains are one joint when their limits agree this well.
SAME_LIMIT = 1e-9


@dataclass(frozen=True)
class EndEffector:
    """One end effector: its name, its chain from the common base, its task."""

    name: str
    chain: Chain
    task: Task = POSE


class JointUnion:
    """The joints of several chains from one base link, each once (module docstring).

    Args:
        chains: the chains; all from the same base link, to different tips.

    Attributes:
        names: (N,) joint names: the first chain's, then each next chain's new ones.
        lower, upper, velocity: (N,) the joints' limits.
        continuous: (N,) bool.
        columns: per chain, (n_k,) the union index of each of its joints.

    Raises:
        ModelError: no chain, chains from different base links, two on the same
            tip, or one joint with different limits in two chains.

    """

    def __init__(self, chains: Sequence[Chain]):
        """Collect the joints of every chain, each once."""
        if not chains:
            raise ModelError('end effectors: expected at least one chain, received none')
        base = chains[0].base_link
        tips = [c.tip_link for c in chains]
        for chain in chains:
            if chain.base_link != base:
                raise ModelError(f'end effectors: every chain must start at the same base link; '
                                 f'{chain.tip_link} starts at {chain.base_link}, not {base}')
        doubles = sorted({t for t in tips if tips.count(t) > 1})
        if doubles:
            raise ModelError(f'end effectors: two end effectors on the same tip link '
                             f'{", ".join(doubles)}')
        index: dict = {}
        lower: List[float] = []
        upper: List[float] = []
        velocity: List[float] = []
        continuous: List[bool] = []
        self.columns: List[np.ndarray] = []
        for chain in chains:
            cols = []
            for k, name in enumerate(chain.joint_names):
                if name in index:
                    j = index[name]
                    same = (abs(lower[j] - chain.lower[k]) <= SAME_LIMIT or
                            lower[j] == chain.lower[k]) and \
                        (abs(upper[j] - chain.upper[k]) <= SAME_LIMIT or
                         upper[j] == chain.upper[k])
                    if not same:
                        raise ModelError(f'end effectors: joint {name} has other limits in the '
                                         f'chain to {chain.tip_link}')
                else:
                    j = index[name] = len(lower)
                    lower.append(float(chain.lower[k]))
                    upper.append(float(chain.upper[k]))
                    velocity.append(float(chain.velocity[k]))
                    continuous.append(bool(chain.continuous[k]))
                cols.append(j)
            self.columns.append(np.array(cols, dtype=np.int64))
        self.names = list(index)
        self.chains = list(chains)
        self.base_link = base
        self.lower = np.array(lower)
        self.upper = np.array(upper)
        self.velocity = np.array(velocity)
        self.continuous = np.array(continuous)

    @property
    def n(self) -> int:
        """The number of joints."""
        return len(self.names)

    @property
    def joint_names(self) -> List[str]:
        """(N,) joint names, union order (as Chain.joint_names: a tracker steps either)."""
        return self.names

    def check_q(self, q, name: str = 'q') -> FloatArray:
        """Validate a joint vector: (N,) finite floats in union order (InvalidInputError)."""
        return checked_joints(q, self.names, name)

    def within_limits(self, q, tol: float = 0.0) -> bool:
        """Return True when every joint of ``q`` (N,) is within its limits (+- tol)."""
        return joints_within(q, self.lower, self.upper, tol)

    @property
    def frame_tree(self) -> FrameTree:
        """The chains' joint frames as one tree (shared ones once), built once (collision)."""
        tree = self.__dict__.get('_frame_tree')
        if tree is None:
            tree = self.__dict__['_frame_tree'] = FrameTree(self.chains, self.columns,
                                                            self.lower, self.upper)
        return tree

    def shared(self) -> List[str]:
        """Return the joints of more than one chain (a torso), union order."""
        counts = np.zeros(self.n, dtype=int)
        for cols in self.columns:
            counts[cols] += 1
        return [name for name, c in zip(self.names, counts) if c > 1]

    def mid_limits(self) -> FloatArray:
        """Return (N,) the middle of each range (0 for an unbounded joint)."""
        lo = np.where(np.isfinite(self.lower), self.lower, 0.0)
        hi = np.where(np.isfinite(self.upper), self.upper, 0.0)
        return 0.5 * (lo + hi)


@dataclass(frozen=True)
class StackedResult:
    """Outcome of a stacked solve.

    Attributes:
        q: (N,) joints, union order, within the limits (the best found when
            not every task is met).
        success: every end effector's task met within the tolerances.
        errors: per end effector, (position m, orientation rad) of its task.
        iterations: over all attempts.
        restarts: random restarts used.
        elapsed_s: wall-clock time, s.
        reason: '' on success, else which end effectors are not met, by how much.

    """

    q: FloatArray
    success: bool
    errors: Tuple[Tuple[float, float], ...]
    iterations: int = 0
    restarts: int = 0
    elapsed_s: float = 0.0
    reason: str = ''


class StackedIK:
    """Every end effector's task at once, over the union of their joints (module docstring).

    Args:
        effectors: the end effectors (EndEffector), chains from one base link.
        joint_weights: (N,) weights in (0, 1], union order (default all 1); or a
            dict joint name -> weight (the others 1).
        locked: names of joints that do not move.
        tolerance: success when each task's position (m) and orientation
            (rad, or an axis' chord) errors are below this.
        max_iterations: iteration cap per attempt.
        max_restarts: random restarts after the attempt from the seed fails.
        timeout_s: wall-clock budget of a solve, s (None: the backend's default).
        nullspace_gain: the fraction of the way back to the seed per iteration.
        max_step: largest scaled joint change per iteration.
        backend: 'numpy', 'numba' or 'auto' (the kernels' backend).
        random_seed: seed of the restarts (each solve restarts it).

    Raises:
        ModelError: the chains cannot be joined (JointUnion).
        InvalidInputError: a weight not in (0, 1], an unknown joint name, an
            option out of range.

    """

    def __init__(self, effectors: Sequence[EndEffector], *, joint_weights=None,
                 locked: Sequence[str] = (), tolerance: float = 1e-6,
                 max_iterations: int = 100, max_restarts: int = 50,
                 timeout_s: Optional[float] = None, nullspace_gain: float = 0.2,
                 max_step: float = 1.0, backend: str = 'auto', random_seed: int = 0):
        """Join the chains, check the weights, prepare each chain's kernels."""
        names = [e.name for e in effectors]
        if len(set(names)) != len(names):
            raise InvalidInputError(f'end effectors: names must differ, received {names}')
        self.effectors = list(effectors)
        self.union = JointUnion([e.chain for e in effectors])
        self.weights = self._weights(joint_weights)
        unknown = [name for name in locked if name not in self.union.names]
        if unknown:
            raise InvalidInputError(f'locked: not joints of the end effectors: {unknown}')
        self.locked = np.array([name in locked for name in self.union.names], dtype=bool)
        if not (math.isfinite(tolerance) and tolerance > 0.0):
            raise InvalidInputError(f'tolerance: expected a finite number > 0, received '
                                    f'{tolerance!r}')
        self._kernels = resolve(backend)
        self.backend = self._kernels.name
        self.tolerance = float(tolerance)
        self.max_iterations = int(max_iterations)
        self.max_restarts = int(max_restarts)
        self.timeout_s = float(DEFAULT_TIMEOUT_S[self.backend] if timeout_s is None
                               else timeout_s)
        self.nullspace_gain = float(nullspace_gain)
        self.max_step = float(max_step)
        self.random_seed = random_seed
        self._scale = np.sqrt(self.weights)
        k = self._kernels
        self._fk = [k.fk(e.chain) for e in effectors]
        self._scratch = [(k.rows(e.chain.movable, 12), k.rows(e.chain.n, 6)) for e in effectors]
        self._unit = np.ones(6)
        self._warm = False

    def _weights(self, joint_weights) -> FloatArray:
        """Return (N,) the joint weights of the argument (module docstring), checked."""
        union = self.union
        if joint_weights is None:
            return np.ones(union.n)
        if isinstance(joint_weights, dict):
            unknown = [name for name in joint_weights if name not in union.names]
            if unknown:
                raise InvalidInputError(f'joint_weights: not joints of the end effectors: '
                                        f'{unknown}')
            out = np.array([float(joint_weights.get(name, 1.0)) for name in union.names])
        else:
            out = np.asarray(joint_weights, dtype=np.float64)
            if out.shape != (union.n,):
                raise InvalidInputError(f'joint_weights: expected {union.n} values '
                                        f'({union.names}), received shape {out.shape}')
        if not np.all(np.isfinite(out) & (out > 0.0) & (out <= 1.0)):
            raise InvalidInputError(f'joint_weights: expected numbers in (0, 1], received '
                                    f'{out.tolist()}')
        return out

    # -- public -----------------------------------------------------------------------------

    def solve(self, targets: Sequence, q_reference=None) -> StackedResult:
        """Solve every end effector's task at its target together, near q_reference.

        Args:
            targets: one pose (4, 4) per end effector, in their order, base frame.
            q_reference: (N,) the seed (default: mid-limits), union order.

        Returns:
            StackedResult: the first attempt that meets every task, else the one
            with the lowest summed error, with the reason.

        Raises:
            InvalidInputError: not one valid pose per end effector, a bad seed.

        """
        self.warm_up()
        start = time.perf_counter()
        if len(targets) != len(self.effectors):
            raise InvalidInputError(f'targets: expected {len(self.effectors)} poses (one per '
                                    f'end effector), received {len(targets)}')
        split = [split_pose(check_pose(t, f'target of {e.name}'))
                 for t, e in zip(targets, self.effectors)]
        seed = self.union.mid_limits() if q_reference is None else \
            np.asarray(q_reference, dtype=np.float64)
        if seed.shape != (self.union.n,) or not np.all(np.isfinite(seed)):
            raise InvalidInputError(f'q_reference: expected {self.union.n} finite values')
        lower = np.where(self.locked, np.clip(seed, self.union.lower, self.union.upper),
                         self.union.lower)
        upper = np.where(self.locked, lower, self.union.upper)
        seed_in = np.clip(seed, lower, upper)
        rng = np.random.default_rng(self.random_seed)
        best: Optional[Tuple[float, FloatArray, list]] = None
        iterations = restarts = 0
        initial = seed_in
        while True:
            q, ok, cost, its, residuals = self._descend(split, initial, seed_in, lower, upper)
            iterations += its
            if ok:
                best = (cost, q, residuals)
                break
            if best is None or cost < best[0]:
                best = (cost, q, residuals)
            if restarts >= self.max_restarts or time.perf_counter() - start > self.timeout_s:
                break
            restarts += 1
            lo = np.where(np.isfinite(lower), lower, seed_in - math.pi)
            hi = np.where(np.isfinite(upper), upper, seed_in + math.pi)
            initial = rng.uniform(lo, hi)
        _, q, residuals = best
        errors = tuple(e.task.errors_of(np.asarray(r)) for e, r in zip(self.effectors, residuals))
        met = [self._converged(e.task.code, r) for e, r in zip(self.effectors, residuals)]
        reason = '' if all(met) else 'not met: ' + '; '.join(
            f'{e.name} {1e3 * err[0]:.2f} mm, {err[1]:.4f} rad'
            for e, err, m in zip(self.effectors, errors, met) if not m)
        return StackedResult(q, all(met), errors, iterations, restarts,
                             time.perf_counter() - start, reason)

    def warm_up(self) -> None:
        """Load the kernels before a first budget starts (numba loads a kernel at its first call).

        One descent from mid-limits toward the tips' poses 0.05 rad away, once:
        inside the first solve's budget, loading took it all (a first solve
        gave up).
        """
        if self._warm:
            return
        self._warm = True
        q = self.union.mid_limits()
        near = np.clip(q + 0.05, self.union.lower, self.union.upper)
        split = [split_pose(pose) for pose in self.forward(near)]
        self._descend(split, q, q, self.union.lower, self.union.upper)

    def follow(self, targets: Sequence, q: FloatArray, iterations: int,
               timed: bool = False) -> FloatArray:
        """Return (N,) the joints a few LM iterations from q take toward every target.

        A motion step's goal (the tracker's, each tick): one bounded descent
        from the current joints, biased to stay near them, no restarts; its
        cost is at most ``iterations`` stacked steps. At a local minimum of
        the summed error (targets that cannot all be met) it returns q itself:
        a goal that rests.

        Args:
            targets: one pose (4, 4) per end effector, base frame (checked by the caller).
            q: (N,) joints now, union order, within the limits.
            iterations: the most LM iterations, >= 1.
            timed: each joint's move also costs its time at its speed limit
                (``timing_scale``): a slow joint (a torso lift at 0.07 m/s beside
                arm joints at 2 rad/s) moves only where the fast ones cannot
                serve, so the limiting step, which caps each joint's speed on
                its own, does not bend the tips' way off the goal's.

        """
        self.warm_up()
        split = [split_pose(np.asarray(t, dtype=np.float64)) for t in targets]
        lower = np.where(self.locked, q, self.union.lower)   # a locked joint stays where it is
        upper = np.where(self.locked, q, self.union.upper)
        scale = self._timed_scale if timed else None
        return self._descend(split, np.clip(q, lower, upper), q, lower, upper, iterations,
                             scale)[0]

    @property
    def _timed_scale(self) -> FloatArray:
        """Return (N,) the joints' scale with their speed limits in (follow's ``timed``).

        ``sqrt(w_j) * min(1, v_j / v_median)``: the weights' scale, and a joint
        slower than the median speed limit as much dearer as it is slower
        (its time at its limit); unbounded speeds count as the median.
        """
        scale = self.__dict__.get('_timed')
        if scale is None:
            speeds = self.union.velocity
            finite = speeds[np.isfinite(speeds) & (speeds > 0.0)]
            ref = float(np.median(finite)) if len(finite) else 1.0
            ratio = np.where(np.isfinite(speeds) & (speeds > 0.0), speeds / ref, 1.0)
            scale = self.__dict__['_timed'] = self._scale * np.minimum(1.0, ratio)
        return scale

    def errors(self, targets: Sequence, q: FloatArray) -> List[Tuple[float, float]]:
        """Return per end effector (position m, orientation rad) of its task at q (N,)."""
        split = [split_pose(np.asarray(t, dtype=np.float64)) for t in targets]
        residuals = self._evaluate(split, np.asarray(q, dtype=np.float64))[0]
        return [e.task.errors_of(np.asarray(r)) for e, r in zip(self.effectors, residuals)]

    def met(self, targets: Sequence, q: FloatArray) -> List[bool]:
        """Return per end effector whether its task at q (N,) is within the tolerance."""
        split = [split_pose(np.asarray(t, dtype=np.float64)) for t in targets]
        residuals = self._evaluate(split, np.asarray(q, dtype=np.float64))[0]
        return [self._converged(e.task.code, r) for e, r in zip(self.effectors, residuals)]

    def forward(self, q: FloatArray) -> List[FloatArray]:
        """Return each end effector's tip pose (4, 4) at union joints q (N,)."""
        return [e.chain.forward(q[cols]) for e, cols in zip(self.effectors, self.union.columns)]

    # -- one attempt ---------------------------------------------------------------------

    def _converged(self, task: int, r) -> bool:
        """Return True when a residual (6,) of the task is within the tolerance."""
        tol = self.tolerance
        return bool(self._kernels.lm.converged(np.asarray(r), task, tol, tol))

    def _all_met(self, residuals) -> bool:
        """Return True when every end effector's residual is within the tolerance."""
        return all(self._converged(e.task.code, r) for e, r in zip(self.effectors, residuals))

    def _evaluate(self, split, q: FloatArray):
        """Return (residuals, tip rotations, tip positions, summed cost) at union joints q."""
        lm = self._kernels.lm
        residuals, rots, poss = [], [], []
        total = 0.0
        for k, (e, cols) in enumerate(zip(self.effectors, self.union.columns)):
            target_r, target_p = split[k]
            r, tip_r, tip_p = lm.evaluate(np.ascontiguousarray(q[cols]), self._fk[k],
                                          e.task.code, e.task.tool_axis, target_r, target_p,
                                          self._scratch[k][0])
            residuals.append(r)
            rots.append(tip_r)
            poss.append(tip_p)
            total += lm.cost(r, e.task.code, self._unit)
        return residuals, rots, poss, total

    def _rows(self, split, q: FloatArray, residuals, rots, poss) -> Tuple[FloatArray, FloatArray]:
        """Return the stacked task rows (sum k_i, N) and their errors at q.

        The scratch frames hold q's poses (the last evaluation was q's).
        """
        lm = self._kernels.lm
        blocks, errors = [], []
        for k, (e, cols) in enumerate(zip(self.effectors, self.union.columns)):
            frames, columns = self._scratch[k]
            jac = lm.jacobian(frames, self._fk[k], poss[k], e.chain.n, columns)
            a, rhs = lm.task_rows(jac, residuals[k], e.task.code, e.task.tool_axis, rots[k],
                                  poss[k], split[k][1], self._unit)
            block = np.zeros((a.shape[0], self.union.n))
            block[:, cols] = a
            blocks.append(block)
            errors.append(rhs)
        return np.vstack(blocks), np.concatenate(errors)

    def _descend(self, split, q0: FloatArray, q_ref: FloatArray, lower: FloatArray,
                 upper: FloatArray, iterations: Optional[int] = None,
                 scale: Optional[FloatArray] = None):
        """Run one LM attempt from q0; return (q, all met, cost, iterations, residuals).

        As kernels.lm.descend, on the stacked rows, in the weights' scaled joints;
        at most ``iterations`` (default max_iterations); ``scale`` (N,): the
        joints' scale (default the weights').
        """
        cap = self.max_iterations if iterations is None else iterations
        lm = self._kernels.lm
        s = self._scale if scale is None else scale
        q = np.clip(q0, lower, upper)
        residuals, rots, poss, value = self._evaluate(split, q)
        damping = DAMPING_START
        history = [value]
        for it in range(cap):
            if self._all_met(residuals):
                return q, True, value, it, residuals
            a, rhs = self._rows(split, q, residuals, rots, poss)
            a = np.ascontiguousarray(a * s)
            bias = self.nullspace_gain > 0.0
            while True:
                dz = lm.step(a, rhs, q / s, q_ref / s, bias, self.nullspace_gain, lower / s,
                             upper / s, damping, self.max_step)
                q_new = np.clip(q + s * dz, lower, upper)
                new = self._evaluate(split, q_new)
                if new[3] < value:
                    damping = max(damping * DAMPING_DOWN, DAMPING_MIN)
                    break
                bias = False
                damping *= DAMPING_UP
                if damping > DAMPING_MAX:
                    return q, False, value, it + 1, residuals
            q = q_new
            residuals, rots, poss, value = new
            history.append(value)
            if len(history) > STALL_WINDOW and \
                    value > (1.0 - STALL_FRACTION) * history[-1 - STALL_WINDOW]:
                return q, self._all_met(residuals), value, it + 1, residuals
        return q, self._all_met(residuals), value, cap, residuals
