# SPDX-License-Identifier: Apache-2.0

"""Several end effectors held by the collision margin: a free joint goal and a path to it.

One arm's recovery (:mod:`ik_node.core.motion.route`) asks the worker for a
free solution of its target and a joint path around what holds it. A
:class:`ik_node.core.motion.group.GroupTracker` whose local steps rest short
of its final targets, held by the margin (a hand under a shelf, one arm
behind the other), asks the same worker a :class:`GroupQuestion`; its
answer (:func:`answer_group`, in the worker's thread) is:

* a **free stacked solution**: every end effector's task met together
  (:meth:`ik_node.core.ik.stacked.StackedIK.solve`, the poles refining it),
  every checked pair at least the margin apart; from the arm's joints
  first, then from random joints within the limits, until FREE_CANDIDATES
  are found or FREE_BUDGET_S has passed; the nearest to the arm's joints;
* a **joint path** to it (:class:`ik_node.core.collision.planner.JointPlanner`:
  RRT-Connect, each segment keeping the margin plus the planner's
  clearance), first over the unmet arms' own joints only, then over every
  joint; the hands near their targets kept on them at every point
  (:func:`hands_kept`; a path they cannot be kept on is planned again).

The tick follows the path by pure pursuit (route.PathRoute); at its end the
local steps finish (the tasks are met there, or within millimetres). The
collision guard still judges every step: the path is a way, the guard is
the guarantee. No free solution, or no path in MAX_PLANS plans: the arm
rests where it is held, the held end effector's verdict stays 'blocked',
and the hands near their targets settle onto them (:func:`settled`).

Joints (N,) in the union's order (rad, m); poses (4, 4) in the common base
frame; times in seconds.
"""

from dataclasses import dataclass, field
import time
from typing import List, Optional, Sequence, Tuple

from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.collision.planner import NO_PATH_IN_TIME, Validity
from ik_node.core.motion.arrival import Progress
from ik_node.core.motion.route import PathRoute
from ik_node.core.motion.worker import World
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]
BoolArray = npt.NDArray[np.bool_]

# Free solutions gathered before the nearest is taken, and the search's budget, s.
FREE_CANDIDATES = 3
FREE_BUDGET_S = 1.0
# A stall's full solve in a worker thread has this budget, s (StallQuestion).
STALL_BUDGET_S = 0.2
# Plans asked per set of targets (and world) before the arm rests held.
MAX_PLANS = 3
# An end effector this near its target (m, rad) when a question is asked stays where
# it is in the first attempt (a hand holding while the other was slid along a box
# drifted a few millimetres: it need not move round the box with the other).
NEAR_M, NEAR_RAD = 0.02, 0.1
# Kept hands (hands_kept): a joint may move at most this much between two path points, rad.
KEEP_JUMP_RAD = 0.2
# The note of a path the holding hands could not be kept along (another plan is asked;
# the last plan's path is taken as it is).
NOT_KEPT = 'no path found that keeps the holding hands on their targets'


@dataclass(frozen=True, eq=False)
class GroupQuestion:
    """What a held GroupTracker asks its worker (module docstring).

    Attributes:
        key: what the answer is for (the tracker takes it only while its key is this).
        poses: one target (4, 4) per end effector, base frame, as its task reads it.
        start: (N,) the joints asked from: the path's start, solutions near them.
        poles: per end effector an elbow pole (3,) or None; or None.
        solver: the tick's StackedIK (a worker thread solves with its twin).
        world: the collision world when asked.
        attempt: plans for the same key that ran out of time before (0 first).
        asked_at: time.perf_counter() when asked.

    """

    key: tuple
    poses: Tuple[FloatArray, ...]
    start: FloatArray
    poles: Optional[Sequence[Optional[FloatArray]]]
    solver: object
    world: World
    attempt: int = 0
    asked_at: float = field(default_factory=time.perf_counter)

    def answer_with(self, engine) -> 'GroupAnswer':
        """Return the answer of the worker's ``engine`` (GoalEngine; may raise Superseded)."""
        return answer_group(engine, self)

    def failed(self, exc: BaseException) -> 'GroupAnswer':
        """Return the answer of a question whose engine failed: no path, say why."""
        return GroupAnswer(self.key, None, f'internal error: {type(exc).__name__}: {exc}',
                           error=f'{type(exc).__name__}: {exc}')


@dataclass(frozen=True, eq=False)
class GroupAnswer:
    """The worker's answer to a GroupQuestion.

    Attributes:
        key: the question's key.
        path: (k, N) joints from the question's start to a free solution of
            every task (its last point), each step free; or None (no such
            solution, or no path found).
        note: why there is no path ('' otherwise).
        elapsed_s: the answer's wall-clock time, s.
        error: an unexpected failure of the engine ('' otherwise).

    """

    key: tuple
    path: Optional[FloatArray]
    note: str = ''
    elapsed_s: float = 0.0
    error: str = ''


@dataclass(frozen=True, eq=False)
class StallQuestion:
    """A full stacked solve for final targets the local steps stall short of (GroupTracker).

    Attributes:
        key: what the answer is for (the tracker takes it only while its key is this).
        poses: one target (4, 4) per end effector, base frame.
        start: (N,) the joints the local steps stalled at (the solve's reference).
        poles: per end effector an elbow pole (3,) or None; or None.
        solver: the tick's StackedIK (a worker thread solves with its twin).

    """

    key: tuple
    poses: Tuple[FloatArray, ...]
    start: FloatArray
    poles: Optional[Sequence[Optional[FloatArray]]]
    solver: object

    def answer_with(self, engine) -> 'StallAnswer':
        """Return the solve's joints when every task is met there, else None.

        In a worker thread the solve has STALL_BUDGET_S (its twin's: the
        ticks share the interpreter with it, and the tick's own budget ran
        out before its restarts did); in the caller's thread, the solver's.
        """
        solver = engine.solver_for(self.solver)
        if solver is not self.solver:
            solver = solver.twin(timeout_s=STALL_BUDGET_S)
        result = solver.solve(self.poses, q_reference=self.start, poles=self.poles)
        return StallAnswer(self.key, result.q if result.success else None)

    def failed(self, exc: BaseException) -> 'StallAnswer':
        """Return the answer of a question whose engine failed: no joints."""
        return StallAnswer(self.key, None)


@dataclass(frozen=True, eq=False)
class StallAnswer:
    """The worker's answer to a StallQuestion: joints (N,) meeting every task, or None."""

    key: tuple
    q: Optional[FloatArray]


class GroupRecovery:
    """Rest, a free goal and a path for a GroupTracker held short of its final targets.

    The tracker asks :meth:`goal` at each motion step toward final targets
    (with a collision guard): None lets the local steps lead; otherwise the
    joints (N,) to head for. In turn:

    * **a stall**: the tasks' summed error (arrival.Progress, a radian as
      ROT_WEIGHT_M metres) gained nothing over STALL_S while the guard held
      the steps (a hand sliding along a box for ever, a torso creeping): the
      arm brakes to rest and stays there (a goal at its stopping point was
      slid by the guard at every step: the arm hummed there);
    * **a question**: at rest, held (by the guard, or after a stall) with a
      task not met, a GroupQuestion is asked of the tracker's worker, at
      most MAX_PLANS per key (again only after a plan that ran out of time,
      or a route given up);
    * **a route**: a path answer is followed by pure pursuit
      (route.PathRoute), the shared joints and the kept arms still in slides
      (:meth:`still_joints`); at its end the local steps lead again. A route
      that stops advancing is given up: rest.

    A key is the targets' revision (:meth:`forget` bumps it: new targets,
    poles, twists, a re-sync, a reset) and the guard's generation (the
    world, the margin): a new one drops the rest, the route and the answer
    under way.

    Attributes:
        route: the PathRoute followed, or None.
        no_path: why the last question for this key gave no path ('' otherwise).

    """

    def __init__(self):
        """Nothing held yet."""
        self.route: Optional[PathRoute] = None
        self.no_path = ''
        self._revision = 0
        self._rest: Optional[tuple] = None   # the key the arm rests for (braking to rest)
        self._settle: Optional[FloatArray] = None   # then the near hands put on their targets
        self._asking: Optional[tuple] = None
        self._plans: Tuple[Optional[tuple], int, bool] = (None, 0, True)
        self._progress = Progress()
        self._asked_poses: List[FloatArray] = []
        self._route_still: Optional[BoolArray] = None
        self._fixed: Optional[FloatArray] = None   # Progress's goal: the error alone counts

    @property
    def resting(self) -> bool:
        """Return True while the arm rests held (a stall, no path): its verdict says 'blocked'."""
        return self._rest is not None

    def still_joints(self) -> Optional[BoolArray]:
        """Return (N,) bool, the joints a slid step keeps on the route's values, or None.

        Those the route does not move, the shared ones (a torso) and the
        arms of the hands it keeps on their targets (hands_kept): a slide
        along what the path grazes moves the held arm's own joints only (a
        slide that moved the torso off the path, the kept arm on it, moved
        that hand 2.5 cm on a loaded machine).
        """
        if self.route is None:
            return None
        return self._route_still

    @property
    def revision(self) -> int:
        """Return the targets' revision, which each forget() call bumps."""
        return self._revision

    def forget(self) -> None:
        """Start anew: new targets or poles, a re-sync, a reset (a new key)."""
        self._revision += 1
        self.route, self.no_path = None, ''
        self._rest_for(None)

    def goal(self, host, poses: List[FloatArray], time: float) -> Optional[FloatArray]:
        """Return (N,) the joints to head for, or None (the local steps lead).

        NaN in every joint: brake to rest (the limiting step's braking, which
        the guard never refuses: the arm stops, it does not hum at a margin).

        Args:
            host: the GroupTracker (its q, v, solver, stepper, guard, worker, poles).
            poses: one final target (4, 4) per end effector, base frame.
            time: the step's time, s.

        """
        key = (self._revision, host.guard.generation)
        self._take_answer(host, key, time)
        if self._rest is not None and self._rest != key:
            self._rest_for(None)
        if self.route is not None and self.route.key != key:
            self.route = None
        if self.route is not None:
            return self._along_route(host, key, time)
        if self._rest is None:
            self._watch(host, key, poses, time)
        if self._asking is None and self._held_here(host, poses) and self._may_plan(key):
            self._ask(host, key, poses, time)
            if self.route is not None:   # an ImmediateWorker has answered
                return self.route.goal(host.q, time)
        return None if self._rest is None else self._resting_goal(host, poses)

    def _rest_for(self, key: Optional[tuple]) -> None:
        """Rest for ``key`` (braking, then settling), or not (None)."""
        self._rest, self._settle = key, None

    def _resting_goal(self, host, poses: List[FloatArray]) -> FloatArray:
        """Return NaN (brake) till the arm rests; then the near hands settled (once: settled)."""
        if self._settle is None:
            if not host.at_rest():
                return np.full(host.chain.n, np.nan)
            self._settle = settled(host.solver, poses, host.q)
        return self._settle

    def _along_route(self, host, key: tuple, time: float) -> Optional[FloatArray]:
        """Return the route's goal; at its end None (the local steps finish); stuck, rest (NaN)."""
        route = self.route
        assert route is not None
        goal = route.goal(host.q, time)
        if route.done:   # the local steps finish (a hand that stayed: its last millimetres)
            self.route = None
            self._rest_for(None)
            return None
        if not route.stuck(time):
            return goal
        self.route, self.no_path = None, 'the path was held: the arm stopped on it'
        self._plans = (key, self._plans[1], True)   # another plan may go another way
        self._rest_for(key)
        return np.full(host.chain.n, np.nan)

    def _watch(self, host, key: tuple, poses: List[FloatArray], time: float) -> None:
        """Sample the tasks' error; on a stall while the guard holds the steps, rest."""
        progress = self._progress
        if not progress.due(time):
            return
        if self._fixed is None or len(self._fixed) != host.chain.n:
            self._fixed = np.zeros(host.chain.n)
        errors = host.solver.errors(poses, host.q)
        blocked = host.stepper.report.blocked
        progress.sample(key, time, sum(e[0] for e in errors), sum(e[1] for e in errors),
                        host.q, self._fixed, free=blocked is None)
        if blocked is not None and progress.stalled():
            self._rest_for(key)

    def _held_here(self, host, poses: List[FloatArray]) -> bool:
        """Return True when the arm rests held (the guard, or a stall) with a task not met."""
        return (host.stepper.report.blocked is not None or self.resting) and \
            host.at_rest() and not all(host.solver.met(poses, host.q))

    def _may_plan(self, key: tuple) -> bool:
        """Return True when a plan may be asked for ``key`` (MAX_PLANS, and one may help)."""
        if self._plans[0] != key:
            self._plans = (key, 0, True)
        return self._plans[2] and self._plans[1] < MAX_PLANS

    def _ask(self, host, key: tuple, poses: List[FloatArray], time: float) -> None:
        """Ask the worker for a free goal and a path from the arm's joints."""
        plans = self._plans[1]
        self._plans = (key, plans + 1, False)
        self._asking, self._asked_poses = key, list(poses)
        host.worker.ask(GroupQuestion(key, tuple(poses), host.q.copy(), host.active_poles(),
                                      host.solver, World.of(host.guard), attempt=plans))
        self._take_answer(host, key, time)

    def _take_answer(self, host, key: tuple, time: float) -> None:
        """Take the worker's answer to the question under way, if it came and is current."""
        if self._asking is None:
            return
        answer = host.answer_of(GroupAnswer)
        if answer is None:   # not yet
            return
        self._asking = None
        if answer.key != key:
            return
        if answer.path is None:
            self.no_path = answer.note or 'no path'
            # Another plan may find one when this one ran out of time.
            self._plans = (key, self._plans[1], answer.note.startswith(NO_PATH_IN_TIME) or
                           answer.note == NOT_KEPT)
            self._rest_for(key)
            return
        self.no_path = ''
        self.route = PathRoute(key, answer.path, time)
        kept = near_and_own(host.solver, self._asked_poses, answer.path[0], near_ones=True)[1]
        self._route_still = (np.ptp(answer.path, axis=0) == 0.0) | kept | \
            host.solver.shared_joints
        self._rest_for(None)
        self._progress.restart(key, time)


def answer_group(engine, question: GroupQuestion) -> GroupAnswer:
    """Return a free solution of the question's targets and a path to it (module docstring).

    First only the end effectors whose tasks are not met at the start move,
    by their own joints (not a joint shared with another, a torso): the
    others are solved where their tips are, and they and their hands stay
    there all the way (the local steps finish their last millimetres after
    the route). When that finds no free solution or no path, every joint
    toward every target.

    Args:
        engine: the worker's GoalEngine (its solver twins, collision copy,
            planner and checkpoint).
        question: what is asked.

    """
    started = time.perf_counter()
    solver = engine.solver_for(question.solver)
    guard = engine.free_for(question.world).guard
    start = question.start
    note = ''
    for moving, poses in _attempts(solver, question.poses, start):
        goal = free_solution(solver, guard, poses, start, question.poles, engine.checkpoint,
                             moving=moving)
        if goal is None:
            note = 'no solution of every task keeps the collision margin'
            continue
        path, note = plan_in(engine.planner, guard, start, goal, moving, engine.checkpoint,
                             question.attempt)
        if path is None:
            continue
        kept = hands_kept(solver, guard, path, question.poses, start, engine.checkpoint)
        if kept is None and question.attempt < MAX_PLANS - 1:
            note = NOT_KEPT   # another plan (other samples) may keep them
            continue
        path = path if kept is None else kept   # the last plan: the way, hands or not
        # Its end: the goal, or a twin whole turns away that the path reached.
        return GroupAnswer(question.key, path, '', time.perf_counter() - started)
    return GroupAnswer(question.key, None, note, time.perf_counter() - started)


def near_and_own(solver, poses: Sequence[FloatArray], q: FloatArray, near_ones: bool,
                 within: Tuple[float, float] = (NEAR_M, NEAR_RAD)) -> Tuple[List[bool], BoolArray]:
    """Return (per end effector: within ``within`` (m, rad) of its target at q, their joints).

    The joints (N,) bool: those of the chains of the near end effectors
    (``near_ones``) or of the others, not shared with another chain (a torso).
    """
    union = solver.union
    near = [pos <= within[0] and rot <= within[1] for pos, rot in solver.errors(poses, q)]
    own = np.zeros(union.n, dtype=bool)
    for ok, cols in zip(near, union.columns):
        if ok == near_ones:
            own[cols] = True
    return near, own & ~solver.shared_joints


def _attempts(solver, poses: Sequence[FloatArray],
              start: FloatArray) -> List[Tuple[BoolArray, List[FloatArray]]]:
    """Return the (moving joints (N,) bool, targets) to try, in order (answer_group)."""
    near, own = near_and_own(solver, poses, start, near_ones=False)
    every = (np.ones(solver.union.n, dtype=bool), list(poses))
    if not own.any() or own.all():
        return [every]
    tips = solver.forward(start)
    first = [pose if not ok else tip for pose, tip, ok in zip(poses, tips, near)]
    return [(own, first), every]


def settled(solver, poses: Sequence[FloatArray], q: FloatArray) -> FloatArray:
    """Return (N,) q with the hands near their targets put on them by their own joints.

    The others' joints (and shared ones) stay: an arm resting held, the
    other hand finishes its last millimetres (it drifted while the held one
    was slid). q itself when there is none, or its solve fails.
    """
    near, own = near_and_own(solver, poses, q, near_ones=True)
    if not own.any() or all(near):
        return q
    tips = solver.forward(q)
    targets = [pose if ok else tip for pose, tip, ok in zip(poses, tips, near)]
    result = solver.solve(targets, q_reference=q, fixed=~own)
    return result.q if result.success else q


def hands_kept(solver, guard: CollisionGuard, path: FloatArray, poses: Sequence[FloatArray],
               start: FloatArray, checkpoint) -> Optional[FloatArray]:
    """Return ``path`` (k, N) with the hands that were near their targets kept on them, or None.

    A path over every joint moves a torso, and a planner's samples move the
    other arm too: a hand that only held (NEAR_M, NEAR_RAD of its target at
    ``start``) swung 11 cm on the way. Each point's joints of such an end
    effector's own chain (not shared) are solved again for its target, from
    the previous point's, every other joint as the path has it. None when a
    point is not solved, a joint jumps more than KEEP_JUMP_RAD between two
    points, or a segment leaves the margin plus the planner's clearance
    (Validity); ``path`` itself when no hand holds.
    """
    near, own = near_and_own(solver, poses, start, near_ones=True)
    if not own.any() or all(near):
        return path
    out = path.copy()
    previous = out[0]
    for k in range(1, len(out)):
        checkpoint()
        seed = np.where(own, previous, out[k])
        tips = solver.forward(out[k])
        targets = [pose if ok else tip for pose, tip, ok in zip(poses, tips, near)]
        result = solver.solve(targets, q_reference=seed, fixed=~own)
        if not result.success or float(np.max(np.abs(result.q - previous))) > KEEP_JUMP_RAD:
            return None
        out[k] = previous = result.q
    valid = Validity(guard, start, checkpoint, out[-1])
    if not all(valid.segment(a, b) for a, b in zip(out[:-1], out[1:])):
        return None
    return out


def plan_in(planner, guard: CollisionGuard, start: FloatArray, goal: FloatArray,
            moving: BoolArray, checkpoint, attempt: int = 0):
    """Return (path (k, N) or None, note): the planner's, over the ``moving`` joints only.

    The others stay at ``start`` (N,) all the way (the planner sees a guard
    of those joints alone: :class:`JointSlice`).
    """
    if moving.all():
        return planner.plan(guard, start, goal, checkpoint, attempt=attempt)
    view = JointSlice(guard, moving, start)
    path, note = planner.plan(view, start[moving], goal[moving], checkpoint, attempt=attempt)
    if path is None:
        return None, note
    full = np.repeat(start[None, :], len(path), axis=0)
    full[:, moving] = path
    return full, note


class JointSlice:
    """A collision guard seen in some joints only, the others held (for the planner).

    The planner reads ``margin``, ``model.chain`` (lower, upper, turnable)
    and ``model.distances``; each gets the sliced joints' part, the held
    joints put back from ``held`` (N,).

    Args:
        guard: the guard of every joint.
        moving: (N,) bool, the joints in the slice.
        held: (N,) joints, the values of the others.

    """

    def __init__(self, guard: CollisionGuard, moving: BoolArray, held: FloatArray):
        """Slice ``guard``'s joints."""
        self.margin = guard.margin
        self.model = _SlicedModel(guard.model, np.asarray(moving, dtype=bool),
                                  np.asarray(held, dtype=np.float64))


class _SlicedModel:
    """A CollisionModel's distances in some joints only (JointSlice)."""

    def __init__(self, model, moving: BoolArray, held: FloatArray):
        """Keep the full model, the slice and the held values."""
        self._model, self._moving, self._held = model, moving, held
        chain = model.chain
        self.chain = _SlicedLimits(chain.lower[moving], chain.upper[moving],
                                   chain.turnable[moving])

    def distances(self, q, threshold, *args, **kwargs):
        """Return the full model's distances with q (m,) in the slice's joints."""
        full = self._held.copy()
        full[self._moving] = q
        return self._model.distances(full, threshold, *args, **kwargs)


@dataclass(frozen=True)
class _SlicedLimits:
    """The joint limits of a slice (what the planner reads of a chain)."""

    lower: FloatArray
    upper: FloatArray
    turnable: FloatArray


def free_solution(solver, guard: CollisionGuard, poses: Sequence[FloatArray],
                  start: FloatArray, poles, checkpoint, budget_s: float = FREE_BUDGET_S,
                  candidates: int = FREE_CANDIDATES, seed: int = 0,
                  moving: Optional[BoolArray] = None) -> Optional[FloatArray]:
    """Return (N,) the free solution of every task nearest ``start`` found, or None.

    Stacked solves from ``start``, then from random joints within the limits
    (locked joints, and those not ``moving`` (N,) bool, held at start), until
    ``candidates`` solutions that meet every task and keep the guard's
    margin are found or ``budget_s`` has passed (at least the first solve is
    made). ``checkpoint`` is called before each solve (a worker thread's: it
    may raise Superseded).
    """
    union = solver.union
    held = solver.locked.copy() if moving is None else solver.locked | ~moving
    rng = np.random.default_rng(seed)
    lower = np.where(np.isfinite(union.lower), union.lower, start - np.pi)
    upper = np.where(np.isfinite(union.upper), union.upper, start + np.pi)
    found: List[FloatArray] = []
    deadline = time.perf_counter() + budget_s
    seed_q = start
    while True:
        checkpoint()
        result = solver.solve(poses, q_reference=seed_q, poles=poles, fixed=held)
        if result.success and keeps_margin(guard, result.q):
            found.append(result.q)
        if len(found) >= candidates or time.perf_counter() > deadline:
            break
        seed_q = np.where(held, start, rng.uniform(lower, upper))
    if not found:
        return None
    return min(found, key=lambda q: float(np.sum((q - start) ** 2)))


def keeps_margin(guard: CollisionGuard, q: FloatArray) -> bool:
    """Return True when every checked pair is at least the guard's margin apart at q (N,)."""
    margin = guard.margin
    return float(guard.model.distances(q, margin + 1e-9).lowest) >= margin
