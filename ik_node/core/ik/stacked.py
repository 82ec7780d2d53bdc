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

**Elbow poles.** An end effector's chain may have more joints than its task
needs (a 7-joint arm holding a 6-D pose keeps one: the elbow's swivel). A
pole point turns that freedom toward it: after the tasks' steps, one step in
the null space of every task's rows moves the elbow (the origin of a joint
of the chain: ``EndEffector.elbow``, by default the fourth free joint from
the tip, an arm's elbow flexion; only joints of its own chain move: not a
torso several chains share) toward the pole (:meth:`StackedIK.toward_poles`:
Gauss-Newton on the elbow-to-pole distance, within that null space, a
parabola along the step, the tasks met again after it). On a shoulder-elbow-
wrist arm the elbow moves on a circle about the shoulder-wrist line, and its
point nearest the pole is the one in the plane of the line and the pole:
the closed form's swivel toward a pole. The tasks come first: a step that
leaves the tasks' summed error above what it was (or the tolerance's square),
or does not bring the elbow nearer, is not taken.

Joints (N,) in the union's order (rad, m); targets (4, 4) in the common base
frame, one per end effector, in the order given; poles (3,) in the same
frame, m, one per end effector or None.
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
# An elbow moves at most this far toward its pole per step, m.
POLE_STEP = 0.05
# A pole step that would move every elbow less than this is not taken: at rest, m.
POLE_REST = 1e-6
# Directions of the tasks' rows with a singular value below this fraction of the
# largest are free (the null space the pole steps move in).
NULL_RTOL = 1e-6
# LM iterations that meet the tasks again after a pole step (its second-order drift).
POLE_CORRECTIONS = 3
# Halvings of a pole step that does not bring the elbows nearer (after the tasks are met again).
POLE_HALVINGS = 4
# A pole step moves no joint more than this by default, rad (m): near a stretched elbow
# a millimetre of elbow motion turns the upper arm by 0.02 rad, and a step of the
# elbow's 5 cm left the tasks too far for their corrections.
POLE_JOINT_STEP = 0.1
# A joint this close to a limit (rad, m) is at it, for a pole step's active set, and
# the passes that set takes at most (each frees the step of the joints it pushes out).
AT_LIMIT = 1e-4
POLE_ACTIVE_SET = 3
# Pole steps a full solve refines its joints with, at most (within its budget), each
# moving a joint at most REFINE_JOINT_STEP (rad, m): no motion is played between them.
POLE_REFINEMENTS = 60
REFINE_JOINT_STEP = 0.3


@dataclass(frozen=True)
class EndEffector:
    """One end effector: its name, its chain from the common base, its task, its elbow.

    ``elbow`` names the free joint of the chain whose origin a pole turns
    (module docstring); '' is the fourth free joint from the tip
    (:func:`elbow_joint`).
    """

    name: str
    chain: Chain
    task: Task = POSE
    elbow: str = ''


def elbow_joint(chain: Chain, name: str = '') -> Optional[str]:
    """Return the free joint whose origin is the chain's elbow, or None (fewer than 4 joints).

    Args:
        chain: the end effector's chain.
        name: a free joint of the chain ('' : the fourth free joint from the
            tip, the elbow flexion of 7-joint arms (iiwa, Panda, Baxter, PR2,
            TIAGo, G1), with or without a torso before them).

    Raises:
        InvalidInputError: ``name`` is not a free joint of the chain.

    """
    if name:
        if name not in chain.joint_names:
            raise InvalidInputError(f'elbow: {name!r} is not a free joint of the chain to '
                                    f'{chain.tip_link} ({", ".join(chain.joint_names)})')
        return name
    return chain.joint_names[-4] if chain.n >= 4 else None


class Elbow:
    """The origin of one free joint of a chain and its (3, n) Jacobian (a pole's point).

    Args:
        chain: the end effector's chain.
        joint: a free joint of it (:func:`elbow_joint`).

    """

    def __init__(self, chain: Chain, joint: str):
        """Keep the chain's motion tables up to the joint's frame."""
        self.chain = chain
        self.joint = joint
        movable = [j.name for j in chain.joints if j.type != 'fixed']
        self.frame = movable.index(joint)
        tables = chain.fk_tables
        m = self.frame + 1
        self._axis = np.array(tables.axis[:m], dtype=np.float64).reshape(m, 3)
        self._prismatic = np.array(tables.prismatic[:m], dtype=bool)
        self._driver = np.array(tables.driver[:m], dtype=np.int64)
        self._mult = np.array(tables.mult[:m], dtype=np.float64)

    def point_and_jacobian(self, q: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """Return the elbow point (3,) and its (3, n) Jacobian at the chain's joints q (n,).

        Column k is the elbow's velocity per unit speed of free joint k, base
        frame: ``z x (e - o)`` of each movable frame up to the elbow's (axis z
        through o), ``z`` for a prismatic one, mimic followers added to their
        leader's column; joints after the elbow do not move it.
        """
        frames, _, _ = self.chain.frames(q.tolist())
        m = self.frame + 1
        f = np.array(frames[:m], dtype=np.float64)
        point = f[-1, 9:12].copy()
        z = np.einsum('jab,jb->ja', f[:, :9].reshape(m, 3, 3), self._axis)
        lin = np.where(self._prismatic[:, None], z, np.cross(z, point - f[:, 9:12]))
        jac = np.zeros((3, self.chain.n))
        np.add.at(jac.T, self._driver, lin * self._mult[:, None])
        return point, jac


class JointUnion:
    """The joints of several chains from one base link, each once (module docstring).

    Args:
        chains: the chains; all from the same base link, to different tips.

    Attributes:
        names: (N,) joint names: the first chain's, then each next chain's new ones.
        lower, upper, velocity: (N,) the joints' limits.
        continuous: (N,) bool.
        turnable: (N,) bool: a whole turn of the joint is the same pose (as
            Chain.turnable: revolute, not a mimic's leader).
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
        turnable: List[bool] = []
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
                    turnable.append(bool(chain.turnable[k]))
                cols.append(j)
            self.columns.append(np.array(cols, dtype=np.int64))
        self.names = list(index)
        self.chains = list(chains)
        self.base_link = base
        self.lower = np.array(lower)
        self.upper = np.array(upper)
        self.velocity = np.array(velocity)
        self.continuous = np.array(continuous)
        self.turnable = np.array(turnable, dtype=bool)

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


def _elapsed(start: float) -> float:
    """Return the wall-clock time since ``start`` (perf_counter), s."""
    return time.perf_counter() - start


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
        shared = set(self.union.shared())
        #: (N,) bool: the joints of more than one chain (a torso).
        self.shared_joints = np.array([name in shared for name in self.union.names], dtype=bool)
        self.elbows: List[Optional[Elbow]] = []
        for e in effectors:
            joint = elbow_joint(e.chain, e.elbow)
            self.elbows.append(None if joint is None else Elbow(e.chain, joint))

    def twin(self, timeout_s: Optional[float] = None) -> 'StackedIK':
        """Return a solver like this one with buffers of its own (for another thread).

        The same end effectors, weights, locks, options and backend (and
        budget, unless ``timeout_s``, s, is given); not warmed up.
        """
        return StackedIK(self.effectors, joint_weights=self.weights,
                         locked=[n for n, lock in zip(self.union.names, self.locked) if lock],
                         tolerance=self.tolerance, max_iterations=self.max_iterations,
                         max_restarts=self.max_restarts,
                         timeout_s=self.timeout_s if timeout_s is None else timeout_s,
                         nullspace_gain=self.nullspace_gain, max_step=self.max_step,
                         backend=self.backend, random_seed=self.random_seed)

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

    def solve(self, targets: Sequence, q_reference=None, poles=None,
              fixed=None) -> StackedResult:
        """Solve every end effector's task at its target together, near q_reference.

        Args:
            targets: one pose (4, 4) per end effector, in their order, base frame.
            q_reference: (N,) the seed (default: mid-limits), union order.
            poles: per end effector a pole point (3,) or None (default none):
                a solution that meets every task is then refined by pole steps
                (:meth:`toward_poles`, at most POLE_REFINEMENTS, within the budget).
            fixed: (N,) bool, joints held at q_reference in this solve (as locked ones).

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
        held = self.locked if fixed is None else self.locked | np.asarray(fixed, dtype=bool)
        lower = np.where(held, np.clip(seed, self.union.lower, self.union.upper),
                         self.union.lower)
        upper = np.where(held, lower, self.union.upper)
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
        if poles is not None and self._all_met(residuals):
            q = self._refine_toward_poles(split, q, poles, lower, upper, start)
            residuals = self._evaluate(split, q)[0]
        errors = tuple(e.task.errors_of(np.asarray(r)) for e, r in zip(self.effectors, residuals))
        met = [self._converged(e.task.code, r) for e, r in zip(self.effectors, residuals)]
        reason = '' if all(met) else 'not met: ' + '; '.join(
            f'{e.name} {1e3 * err[0]:.2f} mm, {err[1]:.4f} rad'
            for e, err, m in zip(self.effectors, errors, met) if not m)
        return StackedResult(q, all(met), errors, iterations, restarts,
                             time.perf_counter() - start, reason)

    def warm_up(self) -> None:
        """Load the kernels before a first budget starts (numba loads a kernel at its first call).

        One descent from mid-limits toward the tips' poses 0.05 rad away, and
        a pole step of each elbow (both joint scales), once: inside the first
        solve's budget, loading took it all (a first solve gave up), and a
        first pole step loaded kernels for 0.4 s inside a tick.
        """
        if self._warm:
            return
        self._warm = True
        q = self.union.mid_limits()
        near = np.clip(q + 0.05, self.union.lower, self.union.upper)
        targets = self.forward(near)
        split = [split_pose(pose) for pose in targets]
        self._descend(split, q, q, self.union.lower, self.union.upper)
        poles = [None if e is None else e + 0.3 for e in self.elbow_points(near)]
        for timed in (False, True):
            self.toward_poles(targets, near, poles, timed=timed,
                              joint_step=np.full(self.union.n, 0.01))

    def follow(self, targets: Sequence, q: FloatArray, iterations: int,
               timed: bool = False, fixed=None) -> FloatArray:
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
            fixed: (N,) bool, joints that stay at q in this step (as locked ones).

        """
        self.warm_up()
        split = [split_pose(np.asarray(t, dtype=np.float64)) for t in targets]
        held = self.locked if fixed is None else self.locked | np.asarray(fixed, dtype=bool)
        lower = np.where(held, q, self.union.lower)   # a locked joint stays where it is
        upper = np.where(held, q, self.union.upper)
        scale = self._timed_scale if timed else None
        return self._descend(split, np.clip(q, lower, upper), q, lower, upper, iterations,
                             scale)[0]

    def toward_poles(self, targets: Sequence, q: FloatArray, poles, step: float = POLE_STEP,
                     timed: bool = False, joint_step=None, quick: bool = False) -> FloatArray:
        """Return (N,) the joints one pole step from q (N,) takes (module docstring).

        Args:
            targets: one pose (4, 4) per end effector, base frame.
            q: (N,) joints, union order, within the limits.
            poles: per end effector a pole point (3,), base frame, m, or None.
            step: each elbow moves at most this far, m (at most POLE_STEP).
            timed: the joints' scale of :meth:`follow`'s ``timed``.
            joint_step: (N,) the most each joint may move, the step scaled down
                as a whole to it (default: POLE_JOINT_STEP each).
            quick: one length per arm, checked once (no Newton length along
                the path, no halvings): a moving goal's step, a few mm, which
                the next tick's steps correct; its cost is one correction per arm.

        Each end effector's elbow takes its own step, one after the other,
        and only its chain's own joints move (not another arm's, nor a torso
        several chains share; the tasks' corrections after it too).

        Returns:
            q itself when no step is taken: no pole, no free direction, every
            elbow already nearest its pole (a step under POLE_REST), or steps
            that would raise the tasks' error or not bring the elbows nearer.

        """
        split = [split_pose(np.asarray(t, dtype=np.float64)) for t in targets]
        q = np.asarray(q, dtype=np.float64)
        lower = np.where(self.locked, q, self.union.lower)
        upper = np.where(self.locked, q, self.union.upper)
        return self._arms_toward_poles(split, q, poles, lower, upper,
                                       self._timed_scale if timed else self._scale,
                                       min(max(float(step), 0.0), POLE_STEP), joint_step, quick)

    def elbow_points(self, q: FloatArray) -> List[Optional[FloatArray]]:
        """Return per end effector its elbow point (3,) at union joints q (N,), base frame.

        None for an end effector whose chain has no elbow (fewer than 4 joints).
        """
        return [None if elbow is None else elbow.point_and_jacobian(
            np.asarray(q, dtype=np.float64)[cols])[0]
            for elbow, cols in zip(self.elbows, self.union.columns)]

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

    def tip_jacobians(self, q: FloatArray) -> FloatArray:
        """Return (6k, N) each tip's Jacobian at union joints q (N,), stacked, base frame.

        Per end effector its chain's (linear rows first, then angular), in the
        union's columns (zero where its chain has no joint).
        """
        out = np.zeros((6 * len(self.effectors), self.union.n))
        for k, (e, cols) in enumerate(zip(self.effectors, self.union.columns)):
            out[6 * k:6 * k + 6, cols] = e.chain.jacobian(q[cols])
        return out

    # -- poles ---------------------------------------------------------------------------

    def _pole_rows(self, q: FloatArray, poles) -> Optional[Tuple[FloatArray, FloatArray]]:
        """Return (elbow-minus-pole (3k,), its Jacobian (3k, N)) of the k poles, or None."""
        gaps, rows = [], []
        for elbow, cols, pole in zip(self.elbows, self.union.columns, poles):
            if elbow is None or pole is None:
                continue
            point, jac = elbow.point_and_jacobian(q[cols])
            block = np.zeros((3, self.union.n))
            block[:, cols] = jac
            gaps.append(point - np.asarray(pole, dtype=np.float64))
            rows.append(block)
        if not gaps:
            return None
        return np.concatenate(gaps), np.vstack(rows)

    def _pole_distance(self, q: FloatArray, poles) -> float:
        """Return the summed squared elbow-to-pole distances at q, m^2."""
        found = self._pole_rows(q, poles)
        return 0.0 if found is None else float(found[0] @ found[0])

    def _arms_toward_poles(self, split, q: FloatArray, poles, lower: FloatArray,
                           upper: FloatArray, scale: FloatArray, step: float,
                           joint_step=None, quick: bool = False) -> FloatArray:
        """Return q after each arm's pole step (toward_poles), q itself when none is taken."""
        if len(poles) != len(self.effectors):
            raise InvalidInputError(f'poles: expected {len(self.effectors)} (one per end '
                                    f'effector, None for none), received {len(poles)}')
        for k, pole in enumerate(poles):   # each arm's own joints: one after the other
            if pole is None:
                continue
            own = [pole if i == k else None for i in range(len(poles))]
            mine = np.zeros(self.union.n, dtype=bool)
            mine[self.union.columns[k]] = True
            mine &= ~self.shared_joints   # nor a torso several chains share
            q = self._pole_step(split, q, own, np.where(mine, lower, q), np.where(mine, upper, q),
                                scale, step, joint_step, quick)
        return q

    def _pole_step(self, split, q: FloatArray, poles, lower: FloatArray, upper: FloatArray,
                   s: FloatArray, cap: float = POLE_STEP, joint_step=None,
                   quick: bool = False) -> FloatArray:
        """Return the joints one pole step from q takes (toward_poles), q when none is taken.

        The way is Gauss-Newton's on the elbow-to-pole distances within the
        null space of every task's rows (:meth:`_pole_direction`). How far: at
        most ``cap`` of elbow motion (m), ``joint_step`` (N,) of each joint's
        and the way left: Newton's along the path (a first length's squared
        gap after the tasks are met again, POLE_CORRECTIONS LM iterations: the
        null space is flat only to first order, and an elbow far from its pole
        on a circle would overshoot a linear step). A length that does not
        bring the elbows nearer, or leaves a met task unmet (an unmet one's
        error higher), is halved, at most POLE_HALVINGS times. ``quick``: the
        first length only, taken when it passes that check.
        """
        found = self._pole_direction(split, q, poles, lower, upper, s)
        if found is None:
            return q
        gap, per_metre, slope, value, met = found
        most = POLE_JOINT_STEP if joint_step is None else np.asarray(joint_step, dtype=np.float64)
        by_joints = 1.0 / max(float(np.max(np.abs(per_metre) / most)), 1e-300)
        # No joint past its limit: the step ends where the first one reaches it (the next
        # step's active set then leaves that one out).
        room = np.where(per_metre > 0.0, upper - q, q - lower)
        with np.errstate(divide='ignore', invalid='ignore'):
            by_limits = float(np.min(np.where(per_metre != 0.0, room / np.abs(per_metre),
                                              math.inf)))

        def longest(way: float) -> float:
            """Return the elbow motion this step may take, m, with ``way`` (m) left."""
            return min(cap, way, by_joints, by_limits)

        def projected(length: float) -> Tuple[float, FloatArray]:
            """Return the squared gap after ``length`` (m) of elbow motion, corrected (inf)."""
            q1 = np.clip(q + length * per_metre, lower, upper)
            q2 = self._descend(split, q1, q1, lower, upper, POLE_CORRECTIONS, s, at_least=1)[0]
            residuals, _, _, error = self._evaluate(split, q2)
            if not self._all_met(residuals) if met else error > value:
                return math.inf, q2   # the tasks come first
            return self._pole_distance(q2, poles), q2

        first = longest(math.inf)
        if not first > POLE_REST:
            return q
        f0 = float(gap @ gap)
        f1, q_t = projected(first)
        if quick:
            return q_t if f1 < f0 else q
        bend = f1 - f0 - slope * first
        way = math.inf if not (math.isfinite(f1) and bend > 0.0) else \
            -slope * first * first / (2.0 * bend)   # Newton's along the path
        length = longest(way)
        if not length > POLE_REST:
            return q   # the elbows are as near as the tasks let them be
        if length < first:
            f1, q_t = projected(length)
        for _ in range(POLE_HALVINGS):
            if f1 < f0:
                return q_t
            length *= 0.5
            if not length > POLE_REST:
                break
            f1, q_t = projected(length)
        return q_t if f1 < f0 else q

    def _pole_direction(self, split, q: FloatArray, poles, lower: FloatArray, upper: FloatArray,
                        s: FloatArray) -> Optional[tuple]:
        """Return the pole step's way at q, or None (no pole, no free direction, at rest).

        Gauss-Newton on the elbows' gaps to their poles (3k,) within the null
        space of every task's rows (scaled joints ``s``; a joint pinned by its
        range not free, nor one at a limit the step would push it past: then
        the others' null space, up to POLE_ACTIVE_SET passes; near a shoulder
        singularity the first and third joints turn alike, and one at its
        limit left the other idle). Returns (the gaps (3k,), the joints'
        motion (N,) per metre of the elbows' along it, the squared gaps' slope
        per metre, the tasks' summed error at q, whether every task is met at q).
        """
        found = self._pole_rows(q, poles)
        if found is None:
            return None
        gap, jac = found
        free = np.where(upper > lower, s, 0.0)   # a joint pinned (upper = lower) does not move
        residuals, rots, poss, value = self._evaluate(split, q)
        rows = self._rows(split, q, residuals, rots, poss)[0]
        at_lower, at_upper = q <= lower + AT_LIMIT, q >= upper - AT_LIMIT
        for _ in range(POLE_ACTIVE_SET):
            a = rows * free
            _, sv, vt = np.linalg.svd(a, full_matrices=True)
            rank = int(np.sum(sv > NULL_RTOL * max(float(sv[0]) if len(sv) else 0.0, 1.0)))
            basis = vt[rank:].T
            if basis.shape[1] == 0:
                return None
            m = (jac * free) @ basis
            y = -np.linalg.lstsq(m, gap, rcond=1e-9)[0]
            dq = free * (basis @ y)
            pushed = (at_lower & (dq < 0.0)) | (at_upper & (dq > 0.0))
            if not np.any(pushed & (free > 0.0)):
                break
            free = np.where(pushed, 0.0, free)
        move = m @ y
        size = float(np.linalg.norm(move))
        if not size > POLE_REST:
            return None
        return gap, dq / size, 2.0 * float(gap @ move) / size, value, \
            self._all_met(residuals)

    def _refine_toward_poles(self, split, q: FloatArray, poles, lower: FloatArray,
                             upper: FloatArray, start: float) -> FloatArray:
        """Return q after pole steps until none is taken, POLE_REFINEMENTS or the budget."""
        for _ in range(POLE_REFINEMENTS):
            if _elapsed(start) > self.timeout_s:
                break
            nearer = self._arms_toward_poles(split, q, poles, lower, upper, self._scale,
                                             POLE_STEP, np.full(self.union.n, REFINE_JOINT_STEP))
            if nearer is q:
                break
            q = nearer
        return q

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
                 scale: Optional[FloatArray] = None, at_least: int = 0):
        """Run one LM attempt from q0; return (q, all met, cost, iterations, residuals).

        As kernels.lm.descend, on the stacked rows, in the weights' scaled joints;
        at most ``iterations`` (default max_iterations); ``scale`` (N,): the
        joints' scale (default the weights'); ``at_least`` iterations even
        where every task is met (a pole step's correction: errors within the
        tolerance would otherwise add up over the steps).
        """
        cap = self.max_iterations if iterations is None else iterations
        lm = self._kernels.lm
        s = self._scale if scale is None else scale
        q = np.clip(q0, lower, upper)
        residuals, rots, poss, value = self._evaluate(split, q)
        damping = DAMPING_START
        history = [value]
        for it in range(cap):
            if it >= at_least and self._all_met(residuals):
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
