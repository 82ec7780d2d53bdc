# SPDX-License-Identifier: Apache-2.0
"""Goal selection: the joints a pose asks for, from local steps in the tick and the worker.

A :class:`GoalSelector` turns a pose (4x4, the chain's base frame) into
joint positions (n,) to head for, at a cost the tick can bound. A moving
pose (a trajectory under way, a twist) is followed by a few damped
least-squares steps from the reference (the last command, or the measured
joints); with an elbow pole, a closed form's bounded solve at the pole's
swivel first. A pose at rest (the newest target, an ended trajectory) is a
question for the worker (:mod:`ik_node.core.motion.worker`: the full solve,
the free solution nearest the joints, a path when asked); until its answer
comes the goal is the local steps' (continued from where they got, a few
per tick), and once it comes the goal is **held**: the same pose gives the
same goal at every tick (no creeping between solutions), so the arm comes
to rest. It keeps what the diagnostics report: the solve times, the last
result, the newest target's reachability (the worker's answer).
"""

import collections
from dataclasses import dataclass, field
import math
import time as _time
from typing import Deque, Optional, Tuple, TYPE_CHECKING

from ik_node.core.ik.base import IKResult, IKSolver
from ik_node.core.ik.local import follow, polish
from ik_node.core.kernels.backend import Backend
from ik_node.core.model.chain import Chain
from ik_node.core.motion.worker import Answer, ImmediateWorker, Question, World
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:   # the collision layer is optional (coal)
    from ik_node.core.collision.guard import CollisionGuard

FloatArray = npt.NDArray[np.float64]

# Solve times kept for the percentiles of the diagnostics.
SOLVE_TIME_WINDOW = 1000
# A moving goal's bounded solve (with a pole) is taken only this many commands
# at full joint speed from the reference (GoalSelector.moving_goal).
LOCAL_HORIZON_STEPS = 2.0
# Damped least-squares steps per command toward a moving pose, and per tick
# toward a pose at rest while the worker's answer is awaited.
LOCAL_ITERATIONS = 3
# A held goal replaced by one this close in every joint (rad, m: a solution
# made exact) moves on smoothly; farther, it jumps (HeldGoal.replace).
SMOOTH_JUMP = 1e-4
# An answer asked from joints farther than this from the arm (largest joint, rad)
# is asked again when the pose comes to rest unsolved by the local steps: its
# solution was the nearest the arm where it was, not where it is.
ASKED_NEAR_RAD = 0.3
# Of two closest free poses of a target in collision, the one sought from farther
# away is kept only when this much nearer the pose (m + rad, GoalSelector._adopt).
CLOSER_BY = 0.01
# The local steps' solution kept for a pose at rest is polished to this (m, rad).
EXACT_TOL = 1e-12
# The local steps are stuck when they leave at least this fraction of the
# squared error: the bounded solve's answer is then followed, even far.
STUCK = 0.99


@dataclass
class SolveStats:
    """What the last solves did, for the diagnostics."""

    last_result: Optional[IKResult] = None
    last_solve_s: float = 0.0
    times: Deque[float] = field(default_factory=lambda: collections.deque(
        maxlen=SOLVE_TIME_WINDOW))

    def record(self, seconds: float, more: bool = False) -> None:
        """Record one solve's time (more=True: part of the last solve, added to it)."""
        if more and self.times:
            self.last_solve_s += seconds
            self.times[-1] += seconds
        else:
            self.last_solve_s = seconds
            self.times.append(seconds)

    def percentiles(self) -> Optional[Tuple[float, float, float]]:
        """Return the (p50, p99, max) solve time of the window, seconds; None before any."""
        if not self.times:
            return None
        p50, p99, top = np.percentile(self.times, [50, 99, 100])
        return float(p50), float(p99), float(top)


@dataclass
class HeldGoal:
    """The goal of one pose at rest (GoalSelector.final_goal).

    Attributes:
        key: the question's key (pose, pole, world, solver).
        q: (n,) the joints headed for.
        solved: q puts the tip on the aim (within the local steps' tolerance).
        answer: the worker's answer, once taken.
        revision: counts the jumps of q (another goal taken; not the drift).
        fallback: an earlier answer for the same key (asked from elsewhere),
            taken if the newer one does not solve the pose.

    """

    key: tuple
    q: FloatArray
    solved: bool
    answer: Optional[Answer] = None
    revision: int = 0
    fallback: Optional[Answer] = None

    def replace(self, q: FloatArray, solved: bool) -> None:
        """Head for goal q (n,): farther than SMOOTH_JUMP, a jump (velocity not fed forward)."""
        if np.max(np.abs(q - self.q)) > SMOOTH_JUMP:
            self.revision += 1
        self.q, self.solved = q, solved

    def source(self, moving: tuple) -> tuple:
        """Return what the goal's velocity is measured within (GoalVelocity.of).

        ``moving``: the source of the moving goals before it (a trajectory's):
        a goal not replaced since continues their motion smoothly.
        """
        return moving if self.revision == 0 else ('held', self.key, self.revision)


class GoalSelector:
    """Joints to head for, per pose (see the module docstring).

    Args:
        chain: the arm's chain.
        solver: its IK solver (budget set by the caller).
        worker: answers the open-ended questions (default: ImmediateWorker,
            in the caller's thread).

    Attributes:
        solver: the solver in use.
        worker: the worker asked.
        guard: the collision guard whose world questions are asked in (None: none).
        stats: solve times and the last result (SolveStats).
        target_result: the newest target's reachability: the worker's answer
            (None before one, and while it is awaited).
        target_unchecked: a new target waits for its question to be asked.
        local_solves: how many times the local steps ran.

    """

    def __init__(self, chain: Chain, solver: IKSolver, worker=None):
        """No target asked yet, nothing held."""
        self.chain = chain
        self.solver = solver
        self.worker = worker if worker is not None else ImmediateWorker()
        self.guard: Optional['CollisionGuard'] = None
        self.stats = SolveStats()
        self.target_result: Optional[IKResult] = None
        self.target_unchecked = False
        self.local_solves = 0
        #: The Backend of the local steps (None: numpy's; the tracker sets it).
        self.follow_kernels: Optional[Backend] = None
        #: The last goal given solves its pose (else: a local minimum, the closest known).
        self.solves_pose = True
        self._held: Optional[HeldGoal] = None
        self._target_key: Optional[tuple] = None
        self._aims: dict = {}   # key -> the aim (4, 4) of the newest question
        self._asked_from: Optional[Tuple[tuple, FloatArray]] = None   # its key, start (n,)
        self._answer: Optional[Answer] = None   # the newest answer taken
        self._target_answer: Optional[Answer] = None   # the newest to the target's question
        self._path_answer: Optional[Answer] = None   # the newest path answer, until taken
        # A target in collision asked again from the arm: (key, start, the earlier
        # answer) until answered; then the one of the two kept (_take_sought).
        self._seeking: Optional[Tuple[tuple, FloatArray, Answer]] = None
        self.kept: Optional[Answer] = None

    @property
    def seeking(self) -> bool:
        """True while the target's closest free pose is sought again from the arm (unanswered)."""
        return self._seeking is not None

    @property
    def held(self) -> Optional[HeldGoal]:
        """The goal held for the pose at rest (None: none yet)."""
        return self._held

    @property
    def falling_back(self) -> bool:
        """Return True while the goal held does not solve its pose (the closest known)."""
        return self._held is not None and not self._held.solved

    def forget_fallback(self) -> None:
        """Forget the goal held (the arm moved elsewhere: start it anew from the arm)."""
        self._held = None

    def new_target(self) -> None:
        """Mark a new target: its question is asked at the next tick (or check())."""
        self.target_unchecked = True
        self._seeking = self.kept = None

    def no_target(self) -> None:
        """Drop the target's report and the goal held (the goal is a twist or a reset)."""
        self.target_result, self.target_unchecked = None, False
        self._held = self._target_key = self._answer = self._target_answer = None
        self._path_answer = self._seeking = self.kept = None

    # -- the questions -------------------------------------------------------------------

    def key(self, pose: FloatArray, pole: Optional[FloatArray]) -> tuple:
        """Return the key of a question on pose (4, 4): pose, pole, world and solver."""
        world = None if self.guard is None else self.guard.generation
        return (pose.tobytes(), None if pole is None else pole.tobytes(), world,
                id(self.solver))

    def ask(self, pose: FloatArray, aim: FloatArray, start: FloatArray,
            pole: Optional[FloatArray], path_from: Optional[FloatArray] = None) -> tuple:
        """Ask the worker for pose (aim: the pose to head for) from joints ``start``; the key."""
        key = self.key(pose, pole)
        world = None if self.guard is None else World.of(self.guard)
        self._aims = {key: aim}
        self._asked_from = (key, np.array(start, dtype=np.float64))
        self.worker.ask(Question(key, pose, aim, np.array(start, dtype=np.float64), pole,
                                 self.solver, world, path_from))
        return key

    def ask_target(self, target: FloatArray, aim: FloatArray, q: FloatArray,
                   pole: Optional[FloatArray]) -> None:
        """Ask the newest target's question (from joints q), once per target."""
        if self.target_unchecked:
            self.target_unchecked = False
            self.target_result = None
            self._target_key = self.ask(target, aim, q, pole)

    def run_worker(self) -> Optional[IKResult]:
        """Let a deferred worker answer, take the answer; return the target's result.

        An ImmediateWorker answered as it was asked, a DeferredWorker answers
        here, a thread by itself (its answer taken here or at a tick). None
        while the target's answer has not come.
        """
        self.worker.run()
        self.take_answers()
        return self.target_result

    def ask_path(self, pose: FloatArray, aim: FloatArray, start: FloatArray,
                 pole: Optional[FloatArray], attempt: int = 0) -> None:
        """Ask the worker for a joint path from ``start`` (n,) to a free solution of the pose.

        ``attempt``: plans for it that ran out of time before (the planner's
        budget grows with it).
        """
        key = ('path',) + self.key(pose, pole)
        world = None if self.guard is None else World.of(self.guard)
        self._aims[key] = aim
        self.worker.ask(Question(key, pose, aim, np.array(start, dtype=np.float64), pole,
                                 self.solver, world, np.array(start, dtype=np.float64),
                                 attempt))

    def take_path_answer(self, key: tuple) -> Optional[Answer]:
        """Return the path answer for the target's ``key`` once (None: none came for it)."""
        answer = self._path_answer
        if answer is None or answer.key[1:] != key:
            return None
        self._path_answer = None
        return answer

    def hold_path_end(self, key: tuple, end: FloatArray, answer: Answer) -> None:
        """Hold ``end`` (n,), a path's last point, as the goal of the pose asked under ``key``."""
        held = self._held
        if held is None or held.key != key:
            self._held = HeldGoal(key, end.copy(), True, answer, revision=1)
        else:
            held.answer = answer
            held.replace(end.copy(), True)

    @property
    def target_answer(self) -> Optional[Answer]:
        """The newest answer to the target's question (None: none yet)."""
        answer = self._target_answer
        return answer if answer is not None and answer.key == self._target_key else None

    def take_answers(self) -> None:
        """Take the worker's newest answer: the target's report, the goal held for its key."""
        answer = self.worker.poll()
        if answer is None:
            return
        self.stats.record(answer.elapsed_s)
        self.stats.last_result = answer.result
        if answer.key[0] == 'path':
            self._path_answer = answer
            return
        self._answer = answer
        seeking = self._seeking
        if seeking is not None and answer.key == seeking[0] and answer.start is not None and \
                np.array_equal(answer.start, seeking[1]):
            answer = self._take_sought(answer, seeking[2])
        if answer.key == self._target_key:
            self.target_result = answer.result
            self._target_answer = answer
        held = self._held
        if held is not None and answer.key == held.key:
            self._adopt(held, answer)

    def _take_sought(self, answer: Answer, earlier: Answer) -> Answer:
        """Return the answer a target in collision keeps, asked again from the arm.

        The new one (nearer the arm), or the earlier one when that is CLOSER_BY
        nearer the pose: then ``kept`` (the stall does not ask it again).
        """
        self._seeking = None
        if answer.result.in_collision and not answer.solves and \
                self.nearer_pose(earlier.goal, answer.goal, answer.key):
            self.kept = earlier
            return earlier
        return answer

    def _adopt(self, held: HeldGoal, answer: Answer) -> None:
        """Head for the answer's goal, unless the local steps already solve the pose as well.

        The local steps' solution is nearest the arm (no swing); it is kept
        (polished to EXACT_TOL) when it solves the aim, no pole was asked for
        (the answer's swivel is the pole's) and (with collision checking) the
        margin is kept there.
        A goal that does not solve the aim is replaced by the answer's when
        that is closer to the pose, or the goal is inside the margin; a target
        reachable only in collision always by the answer's (the closest free
        pose in task space).
        A target reachable only in collision asked again from the arm (its
        closest free pose is a local optimum of where it is sought from) keeps
        the earlier answer when that is CLOSER_BY nearer the pose, else takes
        the new one, nearer the arm.
        """
        earlier = held.fallback
        if not answer.solves and earlier is not None and earlier is not answer:
            if earlier.solves:
                answer = earlier   # asked again from here, the solver missed: the first answer
            elif earlier.result.in_collision and answer.result.in_collision and \
                    self.nearer_pose(earlier.goal, answer.goal, held.key):
                answer = earlier
        held.answer = answer
        if answer.solves:
            if held.solved and held.key[1] is None and self._free(held.q):
                # The local steps' solution: from where the arm is (no swing),
                # made as exact as the solvers' (their tolerance is 1e-6; a
                # task other than the full pose: that tolerance, the steps' own).
                aim = self._aims.get(held.key)
                if aim is not None and self.solver.task.full_pose:
                    q, ok = polish(self.chain, held.q, aim, EXACT_TOL, LOCAL_ITERATIONS)
                    if ok:
                        held.replace(q, True)
                return
            held.replace(answer.goal.copy(), True)
        elif answer.result.in_collision or not held.solved and (
                self._cost(answer.goal, held.key) < self._cost(held.q, held.key)
                or not self._free(held.q)):
            # The closest pose the worker found (with collision checking: the
            # closest free one), unless the local steps got closer, and free.
            held.replace(answer.goal.copy(), False)

    def asked_near(self, answer: Answer, q: FloatArray) -> bool:
        """Return True when ``answer`` was asked from within ASKED_NEAR_RAD of joints q (n,)."""
        return answer.start is not None and self.near(answer.start, q)

    def nearer_pose(self, goal: FloatArray, q: FloatArray, key: tuple) -> bool:
        """Return True when joints ``goal`` put the tip CLOSER_BY nearer key's aim than q (n,)."""
        return math.sqrt(self._cost(goal, key)) < math.sqrt(self._cost(q, key)) - CLOSER_BY

    @staticmethod
    def near(a: FloatArray, b: FloatArray) -> bool:
        """Return True when joints a and b (n,) are within ASKED_NEAR_RAD in every joint."""
        return float(np.max(np.abs(a - b))) <= ASKED_NEAR_RAD

    def ask_again(self, pose: FloatArray, pole: Optional[FloatArray], q: FloatArray) -> None:
        """Ask the question of ``pose`` again from joints q (n,), unless it was asked near q."""
        key = self.key(pose, pole)
        if not self._asked_near(key, q):
            self._ask_again(key, pose, self.solver.aim_within_reach(pose), q, pole)

    def _ask_again(self, key: tuple, pose: FloatArray, aim: FloatArray, q: FloatArray,
                   pole: Optional[FloatArray]) -> None:
        """Ask pose's question again from joints q (n,); the target's: its report too.

        A report of a target reachable only in collision told where the closest
        free pose was from the old joints: until the new answer it is dropped
        (the status says the arm is held, not that it holds that pose).
        """
        if self._target_key is not None and key[0] == self._target_key[0]:
            self._target_key = key
            old = self._target_answer
            if old is not None and not old.solves and old.result.in_collision:
                self.target_result = self._target_answer = None
                self._seeking = (key, np.array(q, dtype=np.float64), old)
        self.ask(pose, aim, q, pole)

    def _asked_near(self, key: tuple, q: FloatArray) -> bool:
        """Return True when the question under ``key`` was asked within ASKED_NEAR_RAD of q."""
        asked = self._asked_from
        return asked is not None and asked[0] == key and \
            float(np.max(np.abs(asked[1] - q))) <= ASKED_NEAR_RAD

    def _cost(self, q: FloatArray, key: tuple) -> float:
        """Return the squared error (Task.cost, m^2) at q (n,) of the aim asked under key."""
        aim = self._aims.get(key)
        if aim is None:
            return math.inf
        task = self.solver.task
        return task.cost(*task.error(aim, self.chain.forward(q)))

    def _free(self, q: FloatArray) -> bool:
        """Return True when no checked pair is inside the margin at q (always, unchecked)."""
        if self.guard is None:
            return True
        from ik_node.core.collision.free import closest_pair
        return closest_pair(self.guard, q) is None

    # -- goals -----------------------------------------------------------------------------

    def final_goal(self, pose: FloatArray, aim: FloatArray, reference: FloatArray,
                   pole: Optional[FloatArray]) -> HeldGoal:
        """Return the goal held for a pose at rest (its joints, whether they solve it).

        ``aim`` is the pose to head for instead when ``pose`` is out of reach
        (the solver's aim_within_reach; ``pose`` itself otherwise),
        ``reference`` the joints to start from. The first call for a pose
        asks its question (unless the target's question asked it) and starts
        the goal from the local steps; later calls continue the local steps
        until the answer comes, then hold its goal (module docstring).
        """
        self.take_answers()
        key = self.key(pose, pole)
        held = self._held
        if held is None or held.key != key:
            # The same pose in a new world (or with another pole) starts from its old goal.
            start = reference if held is None or held.key[0] != key[0] else held.q
            q, _, converged = self._follow(aim, start)
            held = self._held = HeldGoal(key, q, converged)
            answer = self._answer if self._answer is not None and \
                self._answer.key == key else None
            answered = answer is not None
            # An answer that does not solve the pose (the closest free pose, a
            # local optimum from where it was asked) holds only when asked
            # near the arm: from elsewhere it can be whole turns of a joint away.
            if answer is not None and (converged and answer.solves or
                                       self._asked_near(key, reference)):
                self._adopt(held, answer)   # answered before the goal was needed
            elif key != self._target_key or answered:
                # Not asked yet, or asked from where the arm no longer is (the
                # target came when a trajectory began): the solution nearest
                # the arm now, not the one nearest where it was (which stays
                # the fallback if this solve fails).
                held.fallback = answer
                self._ask_again(key, pose, aim, reference, pole)
            self.take_answers()
        elif not held.solved and held.answer is None:
            q, _, converged = self._follow(aim, held.q)
            held.replace(q, converged)
        self.solves_pose = held.solved
        return held

    def moving_goal(self, pose: FloatArray, reference: FloatArray, dt: float,
                    pole: Optional[FloatArray]) -> FloatArray:
        """Joints (n,) toward a moving pose (a trajectory not yet at rest, a twist).

        A moving pose moves a little per command, so the joints should too:
        a few damped least-squares steps from the reference
        (:func:`ik_node.core.ik.local.follow`) give the least joint motion for
        the tip's, and near a singular configuration a bounded one. The
        solver's bounded solve (``solve_quick``: a closed form at the
        reference's swivel, one descent of the Jacobian solver) goes next when
        they do not converge; its answer can be far from them (a spin that a
        fixed swivel angle demands near a shoulder or wrist with aligned
        axes), so it is taken only near the reference (LOCAL_HORIZON_STEPS),
        or, when the local steps are stuck (a local minimum of the error,
        STUCK), wherever it is: the arm must not halt. With a pole the
        bounded solve goes first (the pole sets its swivel angle), the local
        steps only when its answer is far.
        """
        self.take_answers()
        self.solves_pose = True
        if pole is None:
            q, left, _ = self._follow(pose, reference)
            if left == 0.0:
                return q
            res = self._quick(pose, reference, None)
            if res is None or not res.success:
                self.solves_pose = False
                return q
            if left >= STUCK or self._near(res.q, reference, dt):
                return self._closer_this_step(pose, reference, dt, q, res.q)
            self.solves_pose = False
            return q
        res = self._quick(pose, reference, pole)
        if res is not None and res.success and self._near(res.q, reference, dt):
            return res.q
        q, _, self.solves_pose = self._follow(pose, reference)
        return q

    def _quick(self, pose: FloatArray, reference: FloatArray,
               pole: Optional[FloatArray]) -> Optional[IKResult]:
        """Run the solver's bounded solve (timed, kept as the last result); None: it has none."""
        start = _time.perf_counter()
        res = self.solver.solve_quick(pose, reference, pole=pole)
        self.stats.record(_time.perf_counter() - start, more=True)
        if res is not None:
            self.stats.last_result = res
        return res

    def _closer_this_step(self, pose: FloatArray, reference: FloatArray, dt: float,
                          *goals: FloatArray) -> FloatArray:
        """Return the goal (n,) whose first step at full joint speed gets nearest the pose."""
        reach = dt * self.chain.velocity
        task = self.solver.task
        best, best_cost = goals[0], math.inf
        for goal in goals:
            step = reference + np.clip(goal - reference, -reach, reach)
            cost = task.cost(*task.error(pose, self.chain.forward(step)))
            if cost < best_cost:
                best, best_cost = goal, cost
        return best

    def _near(self, q: FloatArray, reference: FloatArray, dt: float) -> bool:
        """Return True when every joint of q is LOCAL_HORIZON_STEPS steps of dt at full speed."""
        reach = LOCAL_HORIZON_STEPS * dt * self.chain.velocity
        return bool(np.all(np.abs(q - reference) <= reach))

    def _follow(self, pose: FloatArray, reference: FloatArray) -> Tuple[FloatArray, float, bool]:
        """Run local.follow (timed); return (q, fraction of the error left, converged)."""
        start = _time.perf_counter()
        out = follow(self.chain, reference, pose, LOCAL_ITERATIONS, self.follow_kernels,
                     self.solver.task)
        self.stats.record(_time.perf_counter() - start)
        self.local_solves += 1
        return out
