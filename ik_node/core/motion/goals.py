# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.
"""Goal selection: the joints a pose asks for, from the solver, local steps and fallbacks.

A :class:`GoalSelector` turns a pose (4x4, the chain's base frame) into
joint positions (n,) to head for, warm-started from a reference (the last
command, or the measured joints). A pose at rest (the newest target, an
ended trajectory) is solved; a moving one (a trajectory under way, a twist)
is followed by a few damped least-squares steps, the solver only when they
do not converge. A failed solve gives the best pose known, and settles.
It keeps what the diagnostics report: the solve times, the last result,
the newest target's reachability check.
"""

import collections
from dataclasses import dataclass, field
import math
import time as _time
from typing import Deque, Optional, Tuple, TYPE_CHECKING

from ik_node.core.ik.base import IKResult, IKSolver
from ik_node.core.ik.local import follow
from ik_node.core.model.chain import Chain
from ik_node.core.poses import pose_error
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:   # the collision layer is optional (coal)
    from ik_node.core.collision.free import FreeSolutions

FloatArray = npt.NDArray[np.float64]

# At an unreachable target that no longer moves, a new closest pose replaces
# the chosen one only when its squared residual is this fraction smaller.
FALLBACK_GAIN = 0.01
# A sampled pose this close (m, rad) to the newest target is that target (the
# trajectory's end key goes through a quaternion and back).
ARRIVED_POSE = 1e-9
# Solve times kept for the percentiles of the diagnostics.
SOLVE_TIME_WINDOW = 1000
# A moving goal's solution from the solver is taken only this many commands
# at full joint speed from the reference (GoalSelector.moving_goal).
LOCAL_HORIZON_STEPS = 2.0
# Damped least-squares steps per command toward a moving pose.
LOCAL_ITERATIONS = 3
# The local steps are stuck when they leave at least this fraction of the
# squared error: a solution found by the solver is then followed, even far.
STUCK = 0.99


@dataclass
class SolveStats:
    """What the last solves did, for the diagnostics."""

    last_result: Optional[IKResult] = None
    last_solve_s: float = 0.0
    times: Deque[float] = field(default_factory=lambda: collections.deque(
        maxlen=SOLVE_TIME_WINDOW))

    def timed(self, solve, *args, more: bool = False, **kwargs) -> IKResult:
        """Run ``solve`` and record its wall-clock time (more=True: add it to the last one's)."""
        start = _time.perf_counter()
        res = solve(*args, **kwargs)
        self.record(_time.perf_counter() - start, more)
        return res

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


class GoalSelector:
    """Joints to head for, per pose (see the module docstring).

    Args:
        chain: the arm's chain.
        solver: its IK solver (budget set by the caller).

    Attributes:
        solver: the solver in use.
        stats: solve times and the last result (SolveStats).
        target_result: the newest target's reachability check (None before one).
        target_unchecked: a new target waits for that check.
        local_solves: how many times the local steps ran.

    """

    def __init__(self, chain: Chain, solver: IKSolver):
        """No target checked yet, no fallback chosen."""
        self.chain = chain
        self.solver = solver
        self.stats = SolveStats()
        self.target_result: Optional[IKResult] = None
        self.target_unchecked = False
        # (pose, squared residual, goal) chosen for an unreachable pose.
        self._fallback: Optional[Tuple[FloatArray, float, FloatArray]] = None
        self.local_solves = 0
        # With collision checking: the free solutions preferred (set by the tracker).
        self.free: Optional['FreeSolutions'] = None
        # (question, start joints, answer) of the last closed-form solve_free.
        self._repeat: Optional[Tuple[tuple, FloatArray, IKResult]] = None

    @property
    def falling_back(self) -> bool:
        """Return True while the goal is an unreachable pose's best known one."""
        return self._fallback is not None

    def forget_fallback(self) -> None:
        """Drop the fallback chosen (the arm moved elsewhere: choose anew)."""
        self._fallback = None

    def new_target(self) -> None:
        """Mark a new target: its reachability is to be checked."""
        self.target_unchecked = True

    def no_target(self) -> None:
        """Drop the target check and the fallback (the goal is a twist or a reset, no pose)."""
        self.target_result, self.target_unchecked = None, False
        self._fallback = None

    def final_goal(self, pose: FloatArray, aim: FloatArray, target: FloatArray, q: FloatArray,
                   reference: FloatArray, pole: Optional[FloatArray],
                   direct: bool) -> Tuple[FloatArray, bool]:
        """Return (joints (n,) for a pose at rest, whether they solve it).

        ``aim`` is the pose to head for instead when ``pose`` is out of reach
        (the solver's aim_within_reach; ``pose`` itself otherwise),
        ``target`` is the newest target (4, 4), ``q`` the last command (n,),
        ``reference`` the joints to start from, ``direct``: the pose is the
        newest target without smoothing (its solve is the reachability check).
        """
        if aim is not pose and not (direct and self.target_unchecked):
            # Out of reach: head for the pose the arm can hold with its elbow
            # bent (its side stays defined); the target's verdict is the check's.
            res = self.solve_free(aim, reference, pole)
            if res.success:
                return self.goal_of(aim, res, q), True
        res = self.solve_free(pose, reference, pole)
        if direct and self.target_unchecked:
            # The newest target solved from the current joints: that is the
            # reachability check, no need to solve it twice.
            self.target_unchecked = False
            self.target_result = res
        elif res.success and not self.target_unchecked and \
                self.target_result is not None and not self.target_result.success:
            # The arm got to the target after all: a reachability check that
            # ran out of budget from farther away is superseded by arrival.
            self.target_result = res
        elif not res.success and self._known_solution_of(pose, target):
            # The solver missed from here (near a singular pose its budget can run
            # out under load), but the target is known reachable: head for the
            # solution the reachability check found. The arm must not settle
            # short of a target it was told it can reach.
            assert self.target_result is not None
            res = self.target_result
        return self.goal_of(pose, res, q), res.success

    def _known_solution_of(self, pose: FloatArray, target: FloatArray) -> bool:
        """Return True when ``pose`` is the newest target and its check found a solution."""
        known = self.target_result
        if known is None or not known.success or self.target_unchecked:
            return False
        pos, rot = pose_error(pose, target)
        return pos <= ARRIVED_POSE and rot <= ARRIVED_POSE

    def _near(self, q: FloatArray, reference: FloatArray, dt: float) -> bool:
        """Return True when every joint of q is LOCAL_HORIZON_STEPS steps of dt at full speed."""
        reach = LOCAL_HORIZON_STEPS * dt * self.chain.velocity
        return bool(np.all(np.abs(q - reference) <= reach))

    def moving_goal(self, pose: FloatArray, reference: FloatArray, dt: float,
                    pole: Optional[FloatArray]) -> FloatArray:
        """Joints (n,) toward a moving pose (a trajectory not yet at rest, a twist).

        A moving pose moves a little per command, so the joints should too:
        a few damped least-squares steps from the reference
        (:func:`ik_node.core.ik.local.follow`) give the least joint motion for
        the tip's, and near a singular configuration a bounded one. The
        solver's own answer can be far from it: another branch (a restart
        found it), or a spin that a fixed swivel angle demands near a shoulder
        or wrist with aligned axes; following it would swing the arm. So the
        local steps go first, the solver only when they do not converge, and
        its answer is taken only near the reference (LOCAL_HORIZON_STEPS);
        otherwise the local result, never farther from the pose than the
        reference: the arm passes at bounded speed and catches up. When the
        local steps are stuck (a local minimum of the error, STUCK) the
        solver's answer is taken wherever it is: the arm must not halt. With a
        pole the solver goes first (the pole sets its swivel angle), the
        local steps only when its answer is far.
        """
        if pole is None:
            q, left = self._follow(pose, reference, more=False)
            if left == 0.0:
                return q
            res = self.solve(pose, reference, pole, more=True)
            if not res.success:
                return q
            if left >= STUCK or self._near(res.q, reference, dt):
                return self._closer_this_step(pose, reference, dt, q, res.q)
            return q
        res = self.solve(pose, reference, pole)
        if res.success and self._near(res.q, reference, dt):
            return res.q
        return self._follow(pose, reference, more=True)[0]

    def _closer_this_step(self, pose: FloatArray, reference: FloatArray, dt: float,
                          *goals: FloatArray) -> FloatArray:
        """Return the goal (n,) whose first step at full joint speed gets nearest the pose."""
        reach = dt * self.chain.velocity
        best, best_cost = goals[0], math.inf
        for goal in goals:
            step = reference + np.clip(goal - reference, -reach, reach)
            pos, rot = pose_error(pose, self.chain.forward(step))
            if pos * pos + rot * rot < best_cost:
                best, best_cost = goal, pos * pos + rot * rot
        return best

    def _follow(self, pose: FloatArray, reference: FloatArray,
                more: bool) -> Tuple[FloatArray, float]:
        """Run local_ik.follow (timed with the solves); return (q, fraction of error left)."""
        start = _time.perf_counter()
        q, left, _ = follow(self.chain, reference, pose, LOCAL_ITERATIONS)
        self.stats.record(_time.perf_counter() - start, more)
        self.local_solves += 1
        return q, left

    def solve(self, pose: FloatArray, start: FloatArray, pole: Optional[FloatArray],
              more: bool = False) -> IKResult:
        """Solve ``pose`` from joints ``start`` (n,), timed and kept as the last result."""
        res = self.stats.timed(self.solver.solve, pose, start, pole=pole, more=more)
        self.stats.last_result = res
        return res

    def solve_free(self, pose: FloatArray, start: FloatArray,
                   pole: Optional[FloatArray]) -> IKResult:
        """Solve ``pose`` (4, 4) from ``start`` (n,); with collision checking, prefer free."""
        key = (pose.tobytes(), None if pole is None else pole.tobytes(), id(self.solver),
               None if self.free is None else self.free.guard.generation)
        repeat = self._repeat
        if repeat is not None and repeat[0] == key and np.array_equal(start, repeat[1]):
            self.stats.last_result = repeat[2]
            return repeat[2]
        res = self.solve(pose, start, pole)
        if self.free is not None:
            res = self.free.prefer_free(self.solver, pose, start, pole, res)
            self.stats.last_result = res
        # A closed form answers the same question the same way: an arm held
        # at rest short of its target asks it at every tick, and near the
        # limits one answer (a search over swivel angles) takes milliseconds.
        # (From other joints, however near, the answer is asked anew: the
        # posture drift follows the solution nearest the joints exactly.)
        self._repeat = (key, start.copy(), res) if self.solver.budget_s is None else None
        return res

    def check(self, target: FloatArray, q: FloatArray,
              pole: Optional[FloatArray]) -> Optional[IKResult]:
        """Solve the newest target from joints q once; None if already checked."""
        if not self.target_unchecked:
            return None
        self.target_unchecked = False
        self.target_result = self.solve_free(target, q, pole)
        return self.target_result

    def goal_of(self, pose: FloatArray, res: IKResult, q: FloatArray) -> FloatArray:
        """Joints (n,) to move toward from the last command q: the solution, or the best known.

        A failed solve returns the closest pose its attempt found; the Jacobian
        solver's random restarts find a different one each time, and chasing
        them made the arm wander for ever at an unreachable target. So a
        failed result is taken only when it is closer to ``pose`` than the
        current joints are, and while ``pose`` stays the same (the arm has
        arrived where the trajectory ends) only when it beats the goal
        already chosen by FALLBACK_GAIN: the arm settles.
        """
        if res.success:
            self._fallback = None
            return res.q
        cost = res.position_error ** 2 + res.orientation_error ** 2
        kept = self._fallback
        if kept is not None and np.array_equal(kept[0], pose):
            if cost < kept[1] * (1.0 - FALLBACK_GAIN):
                kept = self._fallback = (kept[0], cost, res.q)
            return kept[2]
        pos, rot = pose_error(pose, self.chain.forward(q))
        held = pos * pos + rot * rot
        goal, best = (res.q, cost) if cost < held else (q.copy(), held)
        self._fallback = (pose.copy(), best, goal)
        return goal
