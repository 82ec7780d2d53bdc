# SPDX-License-Identifier: Apache-2.0
"""The worker: the questions of motion whose cost is open-ended, answered beside the tick.

The tick (:meth:`ik_node.core.motion.session.MotionSession.tick`) never
searches: a full solve with its branch, swivel and joint-limit searches,
restarts and fallback polishes, the search for a collision-free solution,
a joint-space path around what holds the arm. It asks a worker a
:class:`Question` (the pose to head for, the joints it starts from, the
elbow pole, the world it was asked in, a path wanted or not) and takes the
:class:`Answer` when there is one; meanwhile it follows its last good goal,
every limit kept. One mailbox each way: a newer question replaces one not
yet started (and abandons one under way at the worker's next checkpoint);
the tick drops an answer whose key is not its current one.

:class:`GoalEngine` does the work; three workers run it:

* :class:`ImmediateWorker`: answers as it is asked, in the caller's thread
  (plain Python use and most simulations: deterministic, the tick then does
  the open-ended work itself);
* :class:`DeferredWorker`: answers when :meth:`DeferredWorker.run` is called
  (tests of what the tick does while it waits);
* :class:`ThreadWorker`: a thread of its own with its own solver and
  collision model (the tick's are never touched from two threads). The
  tick pauses it while it runs (:meth:`ThreadWorker.pause`): the engine
  waits at its next checkpoint (every distance query, solve or planner
  step), and at a checkpoint it sleeps briefly once per HAND_OVER_EVERY_S,
  so a tick waits for the GIL at most about that long and one checkpoint's
  work. The compiled kernels keep the GIL while they run (microseconds):
  a worker releasing it thousands of times a second starved the tick's
  thread (CPython hands the GIL to a waiting thread only after a whole
  switch interval without a release).

Times are seconds of ``time.perf_counter``; joints in chain order (rad, m);
poses (4, 4) in the chain's base frame.
"""

import contextlib
from dataclasses import dataclass, field
import math
import sys
import threading
import time
from typing import Callable, Dict, Optional, Tuple

from ik_node.core.collision.free import branch_solutions, closest_free_pose, closest_pair, \
    FreeSolutions
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.collision.planner import JointPlanner
from ik_node.core.collision.shapes import Shape
from ik_node.core.ik.base import IKResult, IKSolver
from ik_node.core.ik.factory import make_solver
from ik_node.core.ik.task import POSE
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# The GIL switch interval while a worker thread runs beside the ticks, s: a
# tick that wakes while the worker's Python runs waits at most this long.
SWITCH_INTERVAL_S = 0.0005
# A worker thread hands the GIL over at its first checkpoint after this much
# running, s, by sleeping HAND_OVER_S: CPython gives a waiting thread the GIL
# only after a switch interval with no release at all, and a worker whose
# calls release it briefly and often (numpy's linear algebra, OMPL) could
# otherwise keep a tick from starting for a whole answer (40 ms and more).
HAND_OVER_EVERY_S = 0.001
HAND_OVER_S = 0.0001
# A worker thread asked to stop is waited for this long, s (it stops at its
# next checkpoint; a compiled kernel under way ends first).
STOP_WAIT_S = 2.0


class Superseded(Exception):
    """Raised at a checkpoint when a newer question waits: the one under way is abandoned."""


@dataclass(frozen=True, eq=False)
class World:
    """What a question was asked against: the tick's collision model and margin.

    Attributes:
        guard: the tick's collision guard (a thread's engine checks on a copy
            of its model).
        generation: the guard's generation (obstacles, margin, pairs) when asked.
        obstacles: the model's obstacles when asked (name -> shapes, base frame).
        margin: the margin when asked, m.

    """

    guard: CollisionGuard
    generation: int
    obstacles: Dict[str, Tuple[Shape, ...]]
    margin: float

    @classmethod
    def of(cls, guard: CollisionGuard) -> 'World':
        """Return the world of the tick's ``guard`` now."""
        return cls(guard, guard.generation, guard.model.obstacles, guard.margin)


@dataclass(frozen=True, eq=False)
class Question:
    """What the tick asks (see the module docstring).

    Attributes:
        key: what the answer is for; the tick takes an answer only while its
            key is the tick's current one.
        pose: (4, 4) the pose whose solve is reported (a target), base frame.
        aim: (4, 4) the pose to head for: ``pose``, or one within reach.
        start: (n,) the joints asked from (the command): solutions near them.
        pole: (3,) the elbow pole, base frame, m, or None.
        solver: the tick's solver (a thread solves with a twin of it).
        world: the collision world, or None (nothing checked).
        path_from: (n,) plan a joint path from here to the goal, or None.
        attempt: plans for the same target that ran out of time before (0 first).
        asked_at: time.perf_counter() when asked.

    """

    key: tuple
    pose: FloatArray
    aim: FloatArray
    start: FloatArray
    pole: Optional[FloatArray]
    solver: IKSolver
    world: Optional[World] = None
    path_from: Optional[FloatArray] = None
    attempt: int = 0
    asked_at: float = field(default_factory=time.perf_counter)


@dataclass(frozen=True, eq=False)
class Answer:
    """The worker's answer to one question.

    Attributes:
        key: the question's key.
        result: the solve of the question's pose (its reachability report).
        goal: (n,) joints to head for: a solution of the aim, or the closest
            pose found (and, the aim in collision, the closest free one).
        solves: the goal puts the tip on the aim (and keeps the margin).
        path: (k, n) joints from ``path_from`` to the goal, each step free
            (None: no path asked, or none found).
        path_note: why no path was found ('' otherwise).
        elapsed_s: the answer's wall-clock time, s.
        error: an unexpected failure of the engine ('' otherwise): the
            answer holds the start.
        start: (n,) the joints the question was asked from (None: not kept).

    """

    key: tuple
    result: IKResult
    goal: FloatArray
    solves: bool
    path: Optional[FloatArray] = None
    path_note: str = ''
    elapsed_s: float = 0.0
    error: str = ''
    start: Optional[FloatArray] = None


def _no_checkpoint() -> None:
    """Wait for nothing (the checkpoint of an engine in the caller's thread)."""


class GoalEngine:
    """Answers questions: full solves, free solutions, paths (module docstring).

    Args:
        separate: True: solve with twins of the questions' solvers and check
            collision on a copy of their model (another thread's engine);
            False: use them as they are (the tick's own thread).
        planner: joint-space planner ``plan(guard, start, goal, checkpoint,
            attempt=0) -> (path (k, n) or None, note)`` (default: a JointPlanner, OMPL's
            RRT-Connect when it imports, else the own one).

    """

    def __init__(self, separate: bool = False, planner=None):
        """Nothing asked yet."""
        self.separate = separate
        self.planner = planner if planner is not None else JointPlanner()
        self.checkpoint: Callable[[], None] = _no_checkpoint
        self._solvers: Dict[int, Tuple[IKSolver, IKSolver]] = {}
        self._world: Optional[Tuple[CollisionGuard, CollisionGuard, FreeSolutions]] = None
        self._generation: Optional[int] = None
        self.answered = 0

    # -- what the engine works with ------------------------------------------------------

    def solver_for(self, solver: IKSolver) -> IKSolver:
        """Return the engine's solver for the tick's ``solver`` (a twin when separate)."""
        if not self.separate:
            return solver
        known = self._solvers.get(id(solver))
        if known is None or known[0] is not solver:
            self._solvers = {id(solver): (solver, twin_solver(solver))}
            known = self._solvers[id(solver)]
        return known[1]

    def free_for(self, world: Optional[World]) -> Optional[FreeSolutions]:
        """Return the free-solution search on the question's world (None: no collision)."""
        if world is None:
            return None
        tick = world.guard
        if self._world is None or self._world[0] is not tick:
            guard = CollisionGuard(tick.model.copy(), tick.margin) if self.separate else tick
            self._world = (tick, guard, FreeSolutions(guard))
            self._generation = None
        _, guard, free = self._world
        if self.separate and self._generation != world.generation:
            guard.model.set_obstacles(world.obstacles)
            guard.set_margin(world.margin)
            self._generation = world.generation
        free.checkpoint = self.checkpoint
        return free

    # -- answers ---------------------------------------------------------------------------

    def answer(self, question: Question) -> Answer:
        """Answer ``question`` (may raise Superseded at a checkpoint).

        A question of another kind (group_route.GroupQuestion) answers itself
        with this engine (``answer_with``).
        """
        custom = getattr(question, 'answer_with', None)
        if custom is not None:
            answer = custom(self)
            self.answered += 1
            return answer
        start = time.perf_counter()
        solver = self.solver_for(question.solver)
        free = self.free_for(question.world)
        result = self._solve_free(solver, free, question.pose, question.start, question.pole)
        goal, solves = result.q, result.success and not result.in_collision
        if question.aim is not question.pose:
            aimed = self._solve_free(solver, free, question.aim, question.start, question.pole)
            if aimed.success:
                goal, solves = aimed.q, not aimed.in_collision
        elif not result.success:
            goal = _closer_of(solver, question.pose, result, question.start)
        goal = nearest_turns(solver.chain, goal, question.start)
        if free is not None and not solves and closest_pair(free.guard, goal) is not None:
            # Reachable only inside the margin (or its closest pose is): the closest
            # free pose in task space, from the arm's joints (connected to them).
            goal = closest_free_pose(free.guard, question.start, question.aim, self.checkpoint,
                                     solver.task)
        path, note = None, ''
        if question.path_from is not None:
            if free is None:
                note = 'no collision model: nothing to plan around'
            else:
                path, note = self.planner.plan(free.guard, question.path_from, goal,
                                               self.checkpoint, attempt=question.attempt)
                if path is not None:
                    goal = path[-1]   # the goal, or its twin whole turns away the path reached
        self.answered += 1
        return Answer(question.key, result, goal, solves, path, note,
                      time.perf_counter() - start, start=question.start)

    def _solve_free(self, solver: IKSolver, free: Optional[FreeSolutions], pose: FloatArray,
                    start: FloatArray, pole: Optional[FloatArray]) -> IKResult:
        """Solve pose (4, 4) from ``start`` (n,); with collision checking prefer a free answer."""
        self.checkpoint()
        res = solver.solve(pose, start, pole=pole)
        self.checkpoint()
        if pole is None:
            res = self._nearest(solver, pose, start, res)
        if free is not None:
            res = free.prefer_free(solver, pose, start, pole, res)
        return res

    def _nearest(self, solver: IKSolver, pose: FloatArray, start: FloatArray,
                 res: IKResult) -> IKResult:
        """Return the solution of pose nearest ``start`` (n,): ``res``, or another branch's.

        A closed form keeps the reference's branch and swivel (or q7); where
        that one is far (a limit pushed it along), another branch or free
        parameter can be much nearer (issue 50: the panda's wrist turned 5.6
        rad for a target 0.33 m away). Every branch at the sampled values of
        the free parameter is compared (Euclidean in joint space, each a
        whole number of turns nearer: nearest_turns), and the nearest solved
        again from itself (exact on a near-SRS arm).
        """
        if not res.success:
            return res
        candidates = branch_solutions(solver, pose)
        if not candidates:
            return res
        chain = solver.chain
        near = min((nearest_turns(chain, c, start) for c in candidates),
                   key=lambda c: float(np.sum((c - start) ** 2)))
        if float(np.sum((near - start) ** 2)) >= \
                float(np.sum((nearest_turns(chain, res.q, start) - start) ** 2)):
            return res
        self.checkpoint()
        again = solver.solve(pose, near)
        if again.success and float(np.sum((again.q - start) ** 2)) < \
                float(np.sum((res.q - start) ** 2)):
            return again
        return res


def _closer_of(solver: IKSolver, pose: FloatArray, result: IKResult,
               start: FloatArray) -> FloatArray:
    """Return the failed solve's joints if its residual is below the start's, else the start.

    A failed solve gives the closest pose its attempt found; it is headed for
    only when it puts the tip closer to pose (4, 4) than the joints ``start``
    (n,) already do (the task's error, Task.cost).
    """
    task, chain = solver.task, solver.chain
    cost = task.cost(result.position_error, result.orientation_error)
    return result.q if cost < task.cost(*task.error(pose, chain.forward(start))) else start.copy()


def nearest_turns(chain, q: FloatArray, start: FloatArray) -> FloatArray:
    """Return q (n,) with each turnable joint a whole number of turns nearer ``start`` (n,).

    The same pose (a revolute joint of a UR arm spans two turns): the arm
    does not go the long way round. Within the limits; other joints as they are.
    """
    turn = 2.0 * math.pi
    k = np.round((start - q) / turn)
    out = q + np.where(chain.turnable, k * turn, 0.0)
    # A shift that leaves the limits is undone one turn at a time.
    out = np.where(out > chain.upper, out - turn, out)
    out = np.where(out < chain.lower, out + turn, out)
    return np.where((out >= chain.lower) & (out <= chain.upper), out, q)


def twin_solver(solver: IKSolver) -> IKSolver:
    """Return a solver like ``solver`` for another thread: make_solver's, same class and budget.

    A solver make_solver cannot build again (the caller's own class) is
    shared as it is: the tick never solves with it in full.
    """
    make_twin = getattr(solver, 'twin', None)   # a StackedIK makes its own
    try:
        if make_twin is not None:
            stacked = make_twin()
            stacked.warm_up()   # its kernels load here, once (as below)
            return stacked
        twin = make_solver(solver.chain, solver.name, solver.budget_s, solver.backend,
                           solver.task)
        if type(twin) is not type(solver):
            return solver
        # Its compiled kernels load here, once (numba holds the GIL while it
        # loads or compiles: in a worker's first answer that is a tick's wait).
        twin.warm_up(solver.chain.mid_limits())
    except Exception:  # noqa: B902 - any failure: share the caller's solver
        return solver
    return twin


def failed_answer(question: Question, exc: BaseException) -> Answer:
    """Return the answer of a question whose engine failed: hold the start, say why.

    A question of another kind says it itself (``failed``).
    """
    custom = getattr(question, 'failed', None)
    if custom is not None:
        return custom(exc)
    chain = question.solver.chain
    task = getattr(question.solver, 'task', POSE)   # the last resort: it never fails itself
    pos, rot = task.error(question.pose, chain.forward(question.start))
    reason = f'internal error: {type(exc).__name__}: {exc}'
    result = IKResult(question.start.copy(), False, pos, rot, reason=reason)
    return Answer(question.key, result, question.start.copy(), False, error=reason,
                  start=question.start)


class ImmediateWorker:
    """Answers each question as it is asked, in the caller's thread (module docstring)."""

    def __init__(self, planner=None):
        """Answer with an engine on the caller's own solver and model."""
        self.engine = GoalEngine(separate=False, planner=planner)
        self._answer: Optional[Answer] = None

    busy = False

    def ask(self, question: Question) -> None:
        """Answer ``question`` now; poll() returns it."""
        try:
            self._answer = self.engine.answer(question)
        except Exception as exc:  # noqa: B902 - a failed answer, never a failed tick
            self._answer = failed_answer(question, exc)

    def poll(self) -> Optional[Answer]:
        """Return the newest answer not yet taken, or None."""
        answer, self._answer = self._answer, None
        return answer

    def run(self) -> None:
        """Nothing pending: every question was answered as it was asked."""

    @contextlib.contextmanager
    def pause(self):
        """Nothing runs beside the caller."""
        yield

    def stop(self) -> None:
        """Nothing to stop."""


class DeferredWorker(ImmediateWorker):
    """Answers the newest question when :meth:`run` is called (module docstring)."""

    def __init__(self, planner=None):
        """Nothing asked yet."""
        super().__init__(planner)
        self._pending: Optional[Question] = None

    @property
    def busy(self) -> bool:  # type: ignore[override]
        """Return True while a question waits for run()."""
        return self._pending is not None

    def ask(self, question: Question) -> None:
        """Keep ``question`` (replacing one not answered yet) until run()."""
        self._pending = question

    def run(self) -> None:
        """Answer the pending question, if any."""
        question, self._pending = self._pending, None
        if question is not None:
            ImmediateWorker.ask(self, question)


class ThreadWorker:
    """Answers questions in a thread of its own (module docstring).

    Args:
        planner: the joint-space planner (GoalEngine), or None.

    Attributes:
        errors: questions whose engine failed (answered with the start held).

    """

    def __init__(self, planner=None):
        """Start the thread; the GIL is handed over every SWITCH_INTERVAL_S from now on."""
        self.engine = GoalEngine(separate=True, planner=planner)
        self.engine.checkpoint = self._checkpoint
        self.errors = 0
        self._lock = threading.Condition()
        self._pending: Optional[Question] = None
        self._answer: Optional[Answer] = None
        self._working: Optional[Question] = None
        self._go = threading.Event()   # cleared while a tick runs
        self._go.set()
        self._stopping = False
        self._hand_over_at = 0.0
        self._switch = sys.getswitchinterval()
        sys.setswitchinterval(min(self._switch, SWITCH_INTERVAL_S))
        self._thread = threading.Thread(target=self._loop, name='ik_node worker', daemon=True)
        self._thread.start()

    @property
    def busy(self) -> bool:
        """Return True while a question waits or is being answered."""
        with self._lock:
            return self._pending is not None or self._working is not None

    def ask(self, question: Question) -> None:
        """Post ``question``: it replaces one not started and abandons one under way."""
        with self._lock:
            self._pending = question
            self._lock.notify()

    def poll(self) -> Optional[Answer]:
        """Return the newest answer not yet taken, or None."""
        with self._lock:
            answer, self._answer = self._answer, None
        return answer

    def run(self) -> None:
        """Nothing to do here: the thread answers by itself."""

    @contextlib.contextmanager
    def pause(self):
        """Hold the worker at its next checkpoint while the block (a tick) runs."""
        self._go.clear()
        try:
            yield
        finally:
            self._go.set()

    def wait_idle(self, timeout_s: float) -> bool:
        """Wait until no question waits or runs (tests, benches); return True if so."""
        end = time.monotonic() + timeout_s
        with self._lock:
            while self._pending is not None or self._working is not None:
                left = end - time.monotonic()
                if left <= 0.0:
                    return False
                self._lock.wait(min(left, 0.05))
        return True

    def stop(self) -> None:
        """Stop the thread (at its next checkpoint) and restore the switch interval."""
        with self._lock:
            self._stopping = True
            self._pending = None
            self._lock.notify()
        self._go.set()
        if self._thread.is_alive() and threading.current_thread() is not self._thread:
            self._thread.join(STOP_WAIT_S)
        sys.setswitchinterval(self._switch)

    def _checkpoint(self) -> None:
        """Hand the GIL over now and then; wait while a tick runs; abandon when superseded.

        Superseded is raised when a newer question or a stop waits.
        """
        if time.perf_counter() >= self._hand_over_at:
            time.sleep(HAND_OVER_S)
            self._hand_over_at = time.perf_counter() + HAND_OVER_EVERY_S
        self._go.wait()
        if self._pending is not None or self._stopping:
            raise Superseded()

    def _loop(self) -> None:
        while True:
            with self._lock:
                while self._pending is None and not self._stopping:
                    self._lock.wait()
                if self._stopping or self._pending is None:
                    return
                question = self._pending
                self._pending = None
                self._working = question
            try:
                answer: Optional[Answer] = self.engine.answer(question)
            except Superseded:
                answer = None
            except Exception as exc:  # noqa: B902 - the thread must go on answering
                self.errors += 1
                answer = failed_answer(question, exc)
            with self._lock:
                if answer is not None:
                    self._answer = answer
                self._working = None
                self._lock.notify_all()
