# SPDX-License-Identifier: Apache-2.0
"""When the local step makes no progress: come to rest, ask for a path, follow it.

The tracker's goals come from the local steps and the worker's answers
(:mod:`ik_node.core.motion.goals`); the collision guard slides or brakes
each step. An arm held by a pair, at a joint limit or in a local minimum
would then hum there for ever, the goal tried again at every step.
:class:`Recovery` watches the tip's progress toward the target
(:class:`ik_node.core.motion.arrival.Progress`); on a stall it gives the
tracker a route in place of its goal:

* a straight :class:`PathRoute`: when the target has a free solution (the
  worker's) the arm is not at, first straight to it in joint space (the
  local step toward a moving or a nearer goal may sit in a local minimum
  the straight line in joint space does not have);
* :class:`Rest`: the point where braking at the acceleration limits stops
  the arm: it comes to rest and stays still (no reversals), until the
  target, the world or the goal held changes, or a path comes; with
  collision checking, a joint path is asked of the worker's planner;
* a planned :class:`PathRoute`: followed by pure pursuit (a goal
  LOOKAHEAD_RAD ahead along it); at its end the goal held is the path's
  last point. A route along which the arm stops advancing for STALL_S is
  given up (rest; a plan is asked, MAX_PLANS in all). A plan that runs out
  of time is asked again at once with more (the planner's ``attempt``),
  within the same MAX_PLANS; the verdict says 'no path' only after.

It also makes the :class:`ik_node.core.motion.arrival.Arrival` the status
reports. Joints (n,) in chain order, rad (m); times in seconds.
"""

import math
from typing import Optional, Union

from ik_node.core.collision.planner import NO_PATH_IN_TIME, spaced
from ik_node.core.ik.task import POSE
from ik_node.core.model.chain import Chain
from ik_node.core.motion.arrival import Arrival, arrived, Progress, STALL_S, Verdict, weighted
from ik_node.core.motion.mode import Mode
from ik_node.core.motion.worker import Answer
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Paths asked per target (and world) before the verdict is 'no path'.
MAX_PLANS = 3
# Pure pursuit: the goal is this far ahead along the path (largest joint), rad:
# the chord to it cuts the path's corners by little more than the planner's
# clearance covers, and braking to it from the speed limits stays short.
LOOKAHEAD_RAD = 0.15
# A path point counts as passed when every joint is within this of it, rad.
PASSED_RAD = 0.05
# The arm is at a goal when every joint is within this of it, rad: nothing to plan.
AT_GOAL_RAD = 1e-3


class Rest:
    """Stay at the stopping point (module docstring).

    Args:
        key: the target's question key it serves.
        stop: (n,) where braking from the state at the stall ends.
        revision: the held goal's revision then (a new goal lifts the rest).
        holder: the guard's hold when the arm stalled (a Blocked: pair,
            distance), or None: what the verdict names while it rests.

    """

    kind = 'rest'

    def __init__(self, key: tuple, stop: FloatArray, revision: Optional[int], holder=None):
        """Rest at ``stop``."""
        self.key, self.stop, self.revision, self.holder = key, stop, revision, holder
        self.seeking = False   # waiting for the closest free pose sought again (Recovery.watch)

    def goal(self, q: FloatArray) -> FloatArray:
        """Return the stopping point."""
        return self.stop


class PathRoute:
    """Follow a joint path by pure pursuit (module docstring).

    Args:
        key: the target's question key it serves.
        path: (k, n) joints from about where the arm is to the goal.
        time: when it starts, s.
        planned: a planner's path (else the straight way to the goal).

    """

    kind = 'path'

    def __init__(self, key: tuple, path: FloatArray, time: float, planned: bool = True):
        """Start at the path's first point."""
        self.key, self.path, self.planned = key, path, planned
        self.index = 0
        self.moved_at = time
        self.done = False
        spacing = max(float(np.max(np.abs(np.diff(path, axis=0)))) if len(path) > 1 else 1.0,
                      1e-9)
        self.ahead = max(1, int(math.ceil(LOOKAHEAD_RAD / spacing)))

    def goal(self, q: FloatArray, time: float) -> FloatArray:
        """Return the point LOOKAHEAD_RAD ahead of the arm's place on the path (the end last).

        The arm's place: the point nearest q (largest joint) among the next
        few, or one it is within PASSED_RAD of; it only moves on.
        """
        last = len(self.path) - 1
        before = self.index
        window = self.path[self.index:self.index + 2 * self.ahead + 2]
        nearest = self.index + int(np.argmin(np.max(np.abs(window - q), axis=1)))
        self.index = max(self.index, nearest)
        while self.index < last and np.max(np.abs(q - self.path[self.index])) <= PASSED_RAD:
            self.index += 1
        if self.index > before:
            self.moved_at = time
        end = self.path[last]
        if self.index == last and np.max(np.abs(q - end)) <= AT_GOAL_RAD:
            self.done = True
        return self.path[min(last, self.index + self.ahead)]

    def stuck(self, time: float) -> bool:
        """Return True when no point was passed for STALL_S (and the end is not reached).

        The first time, the pursuit is narrowed to the next point instead (the
        chord to a point farther on cut a corner into what holds the arm: the
        path's own segments keep the planner's clearance) and it goes on.
        """
        if self.done or time - self.moved_at <= STALL_S:
            return False
        if self.ahead > 1:
            self.ahead, self.moved_at = 1, time
            return False
        return True


class Recovery:
    """Progress, rest, paths and the arrival verdict (module docstring).

    Args:
        chain: the arm's chain.

    Attributes:
        task: what of the target counts (ik.task.Task: its error is the tip's;
            the tracker sets its solver's).
        progress: the tip's errors to the target.
        route: the Rest or PathRoute in force, or None.
        plans: paths asked for the current target.
        no_path: why the last plan found none ('' if none failed).
        planning_since: when the path under way was asked, s (None: none).

    """

    def __init__(self, chain: Chain):
        """Nothing watched yet."""
        self.chain = chain
        self.task = POSE
        self.progress = Progress()
        self.route: Optional[Union[Rest, PathRoute]] = None
        self.plans = 0
        self.no_path = ''
        self.planning_since: Optional[float] = None
        self.straight_tried = False
        self._key: Optional[tuple] = None

    def forget(self) -> None:
        """Drop the route and the counts (a new target, a reset, a twist, a re-sync)."""
        self.route = None
        self.plans, self.no_path, self.planning_since = 0, '', None
        self.straight_tried = False
        self._key = None
        self.progress.restart(None, -math.inf)

    # -- in the tick -------------------------------------------------------------------------

    def goal(self, key: tuple, q: FloatArray, time: float, held_revision: Optional[int]
             ) -> Optional[FloatArray]:
        """Return the joints (n,) the route heads for, for the target ``key`` (None: no route)."""
        if key != self._key:
            self.forget()
            self._key = key
            return None
        route = self.route
        if isinstance(route, PathRoute):
            return route.goal(q, time)
        if route is None:
            return None
        if route.revision != held_revision:
            self.route = None      # another goal came: try it
            self.progress.restart(key, time)
            return None
        return route.goal(q)

    def observe(self, key: tuple, time: float, q: FloatArray, v: FloatArray, goal: FloatArray,
                source, target: FloatArray, stop: FloatArray, held_revision: Optional[int],
                holder=None, solution: Optional[FloatArray] = None,
                goal_solves: bool = False) -> str:
        """Sample the progress at the command (q, v) (n,); on a stall choose a route.

        ``goal``: (n,) the joints the step headed for, ``source`` its identity
        (MotionTracker._goal); ``stop``: (n,) where braking from the command's
        state ends; ``target``: (4, 4) the target's pose; ``holder``: the
        guard's newest hold while the steps are held (None: free);
        ``solution``: (n,) the target's free solution (the worker's), or None;
        ``goal_solves``: the goal solves the pose it is for (the arm at such a
        goal does what it is asked: a trajectory not yet under way).

        On a stall: first straight to ``solution`` in joint space (a route of
        two points) when the arm is not at it; when that stalls too, or there
        is none, rest. Returns what the tracker is to do: 'straight' (hold
        the solution as the goal), 'plan' (ask the worker for a path: a rest
        began and plans are left), 'done' (a route reached its end, the goal
        held) or ''.
        """
        route = self.route
        if isinstance(route, PathRoute):
            if route.done:
                self.route = None
                self.progress.restart(key, time)
                return 'done'
            if route.stuck(time):
                self.route = Rest(key, stop, held_revision, holder)
                return 'plan' if self._plans_left() else ''
            return ''
        if self.progress.due(time):
            pos, rot = self.task.error(target, self.chain.forward(q))
            content = goal_solves and float(np.max(np.abs(goal - q))) <= AT_GOAL_RAD
            free = content or (holder is None and bool(np.any(v)))
            self.progress.sample(key, time, pos, rot, q, goal, source, free)
        if route is not None or not self.progress.stalled():
            return ''
        if solution is not None and not self.straight_tried and \
                np.max(np.abs(solution - q)) > AT_GOAL_RAD:
            self.straight_tried = True
            self.route = PathRoute(key, spaced(np.array([q, solution])), time, planned=False)
            return 'straight'
        self.route = Rest(key, stop, held_revision, holder)
        return 'plan' if self._plans_left() else ''

    def _plans_left(self) -> bool:
        """Return True when a path may be asked (none under way, MAX_PLANS not used up)."""
        return self.planning_since is None and self.plans < MAX_PLANS and not self.no_path

    def watch(self, goals, time: float, q: FloatArray, v: FloatArray, goal: FloatArray,
              source, target: FloatArray, pole: Optional[FloatArray], stop_q: FloatArray,
              blocked, planning: bool) -> str:
        """Sample the progress toward ``target`` (4, 4); on a stall take a route; the action.

        ``goals``: the tracker's GoalSelector (its answers, the goal held);
        ``goal`` (n,) the joints this step headed for and ``source`` its
        identity; ``stop_q`` (n,) where braking now ends; ``blocked`` the
        guard's hold (None: free). The straight route and a path go to the
        target's free solution (the worker's answer); a path is asked only
        when ``planning`` (collision checked: without, the straight way in
        joint space is free).
        """
        held = goals.held
        revision = None if held is None else held.revision
        key = goals.key(target, pole)
        answer = goals.target_answer
        # Straight to the worker's goal: a free solution, or the closest free pose of
        # a target in collision; an unreachable target's goal is the one held (the
        # closer of the worker's and the local steps').
        # The closest free pose is a local optimum of where it was asked from: from
        # elsewhere it can be whole turns of a joint away (a swing along the
        # floor). It is asked again from the arm's joints, which rest meanwhile;
        # the answer nearer the pose by CLOSER_BY is kept (GoalSelector.kept).
        far = answer is not None and not answer.solves and answer.result.in_collision and \
            not goals.asked_near(answer, q) and not goals.near(answer.goal, q) and \
            answer is not goals.kept
        if answer is None or far:
            solution = None
        elif answer.solves or answer.result.in_collision:
            solution = answer.goal
        else:
            solution = None if held is None else held.q
        action = self.observe(key, time, q, v, goal, source, target, stop_q, revision,
                              blocked, solution, goals.solves_pose)
        if far and isinstance(self.route, Rest) and action != 'done':
            goals.ask_again(target, pole, q)
            self.route.seeking = goals.seeking   # (not asked again when asked near here)
        if action == 'straight' and answer is not None and answer.solves:
            goals.hold_path_end(key, answer.goal, answer)
        elif action == 'plan' and planning and answer is not None and answer.solves:
            goals.ask_path(target, goals.solver.aim_within_reach(target), q, pole)
            self.asked(time)
        return action

    def route_goal(self, goals, time: float, target: FloatArray, pole: Optional[FloatArray],
                   q: FloatArray) -> Optional[FloatArray]:
        """Return the route's goal (n,) (a rest, a path's point) for ``target``, or None.

        A path answer for the target is taken here: its end becomes the goal held.
        """
        key = goals.key(target, pole)
        route = self.route
        if isinstance(route, Rest) and route.seeking and not goals.seeking:
            self._after_seeking(goals, key, q, time)
        path = goals.take_path_answer(key)
        if path is not None:
            end = self.take_path(path, time)
            if end is not None:
                goals.hold_path_end(key, end, path)
            elif self.retry():   # out of time: again, with more (MAX_PLANS)
                goals.ask_path(target, goals.solver.aim_within_reach(target), q, pole,
                               attempt=self.plans)
                self.asked(time)
        revision = None if goals.held is None else goals.held.revision
        return self.goal(key, q, time, revision)

    def _after_seeking(self, goals, key: tuple, q: FloatArray, time: float) -> None:
        """End a rest that waited for the closest free pose sought again: straight to it."""
        self.route = None
        self.progress.restart(key, time)
        answer = goals.target_answer
        if answer is not None and np.max(np.abs(answer.goal - q)) > AT_GOAL_RAD:
            self.route = PathRoute(key, spaced(np.array([q, answer.goal])), time, planned=False)

    def retry(self) -> bool:
        """Return True when the last plan ran out of time and plans are left (MAX_PLANS)."""
        return self.no_path.startswith(NO_PATH_IN_TIME) and self.planning_since is None and \
            self.plans < MAX_PLANS

    def asked(self, time: float) -> None:
        """Note that a path was asked at ``time`` (s)."""
        self.plans += 1
        self.planning_since = time

    def take_path(self, answer: Answer, time: float) -> Optional[FloatArray]:
        """Take a path answer for the current target; return its goal (n,) when it has a path."""
        self.planning_since = None
        if answer.path is None:
            self.no_path = answer.path_note or 'no path'
            return None
        self.route = PathRoute(answer.key[1:], answer.path, time)
        self.no_path = ''
        return answer.path[-1]

    # -- the verdict -------------------------------------------------------------------------

    def arrival(self, q: FloatArray, v: FloatArray, target: FloatArray, mode: Mode, result,
                blocked, time: float, goal: Optional[FloatArray] = None,
                seeking: bool = False) -> Arrival:
        """Return the arm's Arrival at the command (q, v) (module docstring of arrival).

        ``result``: the target's answer (IKResult) or None; ``blocked``: the
        guard's Blocked (pair, distance) or None; ``goal``: (n,) the joints
        held for the target (None: none yet); ``seeking``: the target's
        closest free pose is sought again from where the arm stopped. A
        target in collision is 'blocked' once the arm holds its closest free
        pose (at the goal, or resting short of it), 'arriving' while it heads
        there or waits for it to be found again.
        """
        pos, rot = self.task.error(target, self.chain.forward(q))
        approach = self.progress.approach()
        error = weighted(pos, rot)
        to_go = error / approach if approach > 0.0 else math.inf
        still = not np.any(v)

        def verdict(kind: Verdict, reason: str) -> Arrival:
            return Arrival(kind, reason, pos, rot, approach, to_go)

        off = f'{1e3 * pos:.1f} mm, {rot:.3f} rad from the target'
        if mode == Mode.TWIST:
            if blocked is not None:
                return verdict(Verdict.HELD, f'held by {blocked.pair[0]} / {blocked.pair[1]} '
                                             f'({1e3 * blocked.distance:.1f} mm apart)')
            return verdict(Verdict.ARRIVING, 'following the twist')
        if mode == Mode.RESET:
            return verdict(Verdict.ARRIVING if np.any(v) else Verdict.ARRIVED,
                           'back to the initial positions')
        at = arrived(pos, rot)
        if result is not None and not result.success and not at:
            return verdict(Verdict.UNREACHABLE, f'target unreachable ({result.reason}): '
                                                f'holding the closest pose, {off}')
        if result is not None and result.in_collision:
            why = f'target in collision ({result.in_collision}): '
            if at:
                return verdict(Verdict.BLOCKED, why + 'the arm is at it, inside the collision '
                                                      'margin')
            if seeking:
                return verdict(Verdict.ARRIVING, why + 'seeking the closest free pose from '
                                                       f'where the arm stopped, {off}')
            if goal is not None:
                at_goal = float(np.max(np.abs(goal - q))) <= AT_GOAL_RAD
                if still and (at_goal or isinstance(self.route, Rest)):
                    return verdict(Verdict.BLOCKED, why + f'holding the closest free pose, {off}')
                if self.route is None:
                    return verdict(Verdict.ARRIVING,
                                   why + f'heading for the closest free pose, {off}')
            # else: a trajectory under way, a route, a rest before the goal is held (below)
        if at:
            return verdict(Verdict.ARRIVED if still else Verdict.ARRIVING,
                           'arrived' if still else 'settling at the target')
        route = self.route
        if isinstance(route, PathRoute):
            how = 'a planned path' if route.planned else 'the straight way in joint space'
            return verdict(Verdict.ARRIVING, f'following {how} to a solution, {off}')
        if route is None:
            return verdict(Verdict.ARRIVING, f'{off}, ' + (
                f'about {to_go:.1f} s to go' if math.isfinite(to_go) else 'starting'))
        if self.no_path and self.planning_since is None:
            return verdict(Verdict.NO_PATH, f'{self.no_path}: held {off}')
        why = self._holder(q, blocked if blocked is not None else route.holder)
        if self.planning_since is not None:
            why += f'; planning a path for {time - self.planning_since:.1f} s'
            if self.plans > 1:
                why += f' (attempt {self.plans} of {MAX_PLANS})'
        return verdict(Verdict.HELD, f'{why}, {off}')

    def _holder(self, q: FloatArray, blocked) -> str:
        """Return what holds the arm: the pair, a joint at its limit, or a local minimum."""
        if blocked is not None:
            return (f'held by {blocked.pair[0]} / {blocked.pair[1]} '
                    f'({1e3 * blocked.distance:.1f} mm apart)')
        at = [name for name, x, lo, hi in zip(self.chain.joint_names, q, self.chain.lower,
                                              self.chain.upper)
              if x <= lo + 1e-6 or x >= hi - 1e-6]
        if at:
            return f'{", ".join(at)} at {"its" if len(at) == 1 else "their"} limit'
        return 'no progress (a local minimum of the error)'
