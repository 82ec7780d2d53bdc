# SPDX-License-Identifier: Apache-2.0
"""Joint-space paths around what the collision model keeps apart: RRT-Connect.

When the local step makes no progress toward a free goal (held by a pair,
in a local minimum), the worker (:mod:`ik_node.core.motion.worker`) asks a
:class:`JointPlanner` for a path from the arm's joints to the goal's: a
list of joint vectors, each straight segment between them free at the
planner's resolution, shortened, then spaced PATH_SPACING apart for the
tick to follow. The tick's collision guard still judges every step along
it: the path is a way, the guard is the guarantee.

Two implementations of bidirectional RRT-Connect (Kuffner & LaValle, 2000)
on the same validity test: OMPL's (``pip install ompl``, BSD; its
RRTConnect and its path simplifier), used when it imports, and
:class:`OwnRRTConnect` (numpy, with random shortcutting), used otherwise;
``ik_bench arrival --planner`` compares them. A state is valid when every
checked pair is at least the margin plus CLEARANCE_M apart, or within
NEAR_START_RAD of a start that is not, no closer than the start is; a
segment when its points every RESOLUTION_RAD are. Both stop at
``time_limit_s``, or when the caller's checkpoint raises (a newer question).

A revolute joint that spans more than a turn (a UR arm's) reaches the same
pose at angles a whole turn apart, and the nearest of them may lie in a
pocket the arm cannot get out of (its wrist wound against the forearm):
the trees grow toward every such twin of the goal that keeps the margin
(:func:`turn_variants`, nearest first, at most MAX_GOALS) when the goal
alone is not reached in GOAL_FIRST_SHARE of the time, and the path ends at
whichever they reach.

Joints (n,) in chain order, rad (m); an unbounded joint is searched one
turn either side of where it starts.
"""

import math
import time
from typing import Callable, List, Optional, Tuple

from ik_node.core.collision.guard import CollisionGuard
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Seconds a plan may take (wall clock, the worker's).
PLAN_TIME_S = 2.0
# Segments are checked at points this far apart (largest joint), rad.
RESOLUTION_RAD = 0.02
# The tree grows by steps of at most this (Euclidean in joint space), rad.
STEP_RAD = 0.5
# The path handed to the tick: points this far apart (largest joint), rad.
PATH_SPACING = 0.05
# Share of the planning time the shortcutting may use (own planner).
SHORTCUT_SHARE = 0.25
# A state must clear the margin by this much more (m): the tick's step cuts
# corners between the path's points, and its braking path reaches ahead of
# it; a path grazing the margin was slid and held at every step.
CLEARANCE_M = 0.005
# Within this of the start (largest joint), rad, a state need only keep the
# start's own distance when that is below the clearance (Validity.threshold).
NEAR_START_RAD = 0.2
# The start of the note of a plan that ran out of time (another attempt may succeed).
NO_PATH_IN_TIME = 'no path found in'
# The goal's twins a whole turn apart planned toward at once (turn_variants),
# after the goal alone for this share of the time.
MAX_GOALS = 8
GOAL_FIRST_SHARE = 0.3
_OMPL_SEEDED = False   # OMPL's process-wide random numbers seeded (OmplRRTConnect)


def ompl_available() -> bool:
    """Return True when OMPL's Python bindings import."""
    try:
        import ompl.base  # noqa: F401
        import ompl.geometric  # noqa: F401
    except ImportError:
        return False
    return True


class Validity:
    """Which joint vectors and segments a path may use (module docstring).

    Args:
        guard: the collision guard (its model and margin).
        start: (n,) where the path starts (may be inside the margin).
        checkpoint: called before each state is checked (may raise).

    Attributes:
        checks: states checked.

    """

    def __init__(self, guard: CollisionGuard, start: FloatArray,
                 checkpoint: Callable[[], None], goal: Optional[FloatArray] = None):
        """Threshold: the margin plus CLEARANCE_M; near the start (and the goal) their own.

        Near the start: its distance when lower (it may be inside the margin);
        near ``goal`` (n,): its distance when lower, never below the margin.
        """
        self.model = guard.model
        self.checkpoint = checkpoint
        self.checks = 0
        self.start = np.asarray(start, dtype=np.float64)
        self.wanted = guard.margin + CLEARANCE_M
        self.near_start = min(self.wanted, self.lowest(self.start, self.wanted) - 1e-9)
        self.goal: Optional[FloatArray] = None
        self.near_goal = self.wanted
        if goal is not None:
            self.goal = np.asarray(goal, dtype=np.float64)
            self.near_goal = max(guard.margin,
                                 min(self.wanted, self.lowest(self.goal, self.wanted) - 1e-9))

    def lowest(self, q: FloatArray, threshold: float) -> float:
        """Return the lowest distance at q of the pairs closer than ``threshold`` (else it), m."""
        return min(float(self.model.distances(q, threshold).lowest), threshold)

    def threshold(self, q: FloatArray) -> float:
        """Return the distance q (n,) must keep, m: the start's within NEAR_START_RAD of it.

        An arm held near a pair starts below the clearance; farther on, the
        path keeps the whole of it (a path along the pair at the start's
        distance was held at every step). Likewise near a goal that keeps
        the margin but not the clearance (a solution beside an obstacle).
        """
        if float(np.max(np.abs(q - self.start))) <= NEAR_START_RAD:
            return self.near_start
        if self.goal is not None and float(np.max(np.abs(q - self.goal))) <= NEAR_START_RAD:
            return self.near_goal
        return self.wanted

    def state(self, q: FloatArray) -> bool:
        """Return True when q (n,) keeps its threshold."""
        self.checkpoint()
        self.checks += 1
        threshold = self.threshold(q)
        return self.lowest(q, threshold + 1e-9) >= threshold

    def segment(self, a: FloatArray, b: FloatArray) -> bool:
        """Return True when the straight segment a -> b keeps it at every RESOLUTION_RAD."""
        steps = int(math.ceil(float(np.max(np.abs(b - a))) / RESOLUTION_RAD))
        return all(self.state(a + (b - a) * (k / steps)) for k in range(1, steps + 1))


def turn_variants(turnable, goal: FloatArray, lower: FloatArray, upper: FloatArray,
                  start: FloatArray, most: int = MAX_GOALS) -> List[FloatArray]:
    """Return goal (n,) and its twins whole turns apart within [lower, upper], nearest first.

    ``turnable`` (n,) bool: the joints whose angle may move by 2 pi (revolute,
    not a mimic's leader). Nearest to ``start`` (n,) in joint space
    (Euclidean); at most ``most``; the goal itself is among them.
    """
    turn = 2.0 * math.pi
    options = []
    for j, value in enumerate(goal):
        here = [float(value)]
        if turnable[j]:
            for k in (-2, -1, 1, 2):
                shifted = float(value) + k * turn
                if lower[j] <= shifted <= upper[j]:
                    here.append(shifted)
        options.append(here)
    count = 1
    for here in options:
        count *= len(here)
    if count == 1:
        return [np.array(goal, dtype=np.float64)]
    grid = np.array(np.meshgrid(*options, indexing='ij')).reshape(len(goal), -1).T
    order = list(np.argsort(np.sum((grid - start) ** 2, axis=1), kind='stable')[:most])
    if 0 not in order:   # row 0: the goal itself (each joint's first option), always kept
        order[-1] = 0
        order.sort(key=lambda k: float(np.sum((grid[k] - start) ** 2)))
    return [grid[k].copy() for k in order]


def spaced(path: FloatArray, spacing: float = PATH_SPACING) -> FloatArray:
    """Return the polyline path (k, n) with points at most ``spacing`` apart (largest joint)."""
    out = [path[0]]
    for a, b in zip(path[:-1], path[1:]):
        steps = max(1, int(math.ceil(float(np.max(np.abs(b - a))) / spacing)))
        out.extend(a + (b - a) * (k / steps) for k in range(1, steps + 1))
    return np.array(out)


def search_bounds(lower: FloatArray, upper: FloatArray,
                  start: FloatArray) -> Tuple[FloatArray, FloatArray]:
    """Return (lower, upper) (n,) to search: the limits, one turn about the start if unbounded."""
    return (np.where(np.isfinite(lower), lower, start - 2.0 * math.pi),
            np.where(np.isfinite(upper), upper, start + 2.0 * math.pi))


class OwnRRTConnect:
    """RRT-Connect with random shortcutting, numpy only (module docstring).

    Args:
        seed: of the random samples (the same question, the same path).

    """

    name = 'own'

    def __init__(self, seed: int = 0):
        """Nothing planned yet."""
        self.seed = seed

    def solve(self, valid: Validity, start: FloatArray, goals: List[FloatArray],
              lower: FloatArray, upper: FloatArray, deadline: float) -> Optional[FloatArray]:
        """Return a free path (k, n) from start to one of ``goals``, or None at the deadline.

        The goals' tree has one root per goal.
        """
        rng = np.random.default_rng(self.seed)
        for goal in goals:
            if valid.segment(start, goal):
                return np.array([start, goal])
        trees = ([start], [-1]), (list(goals), [-1] * len(goals))   # (nodes, parents)
        grow, other = 0, 1
        while time.perf_counter() < deadline:
            sample = rng.uniform(lower, upper)
            new = self._extend(valid, trees[grow], sample)
            if new is not None and self._connect(valid, trees[other], new, deadline):
                a = self._branch(trees[grow], len(trees[grow][0]) - 1)
                b = self._branch(trees[other], len(trees[other][0]) - 1)
                path = a[::-1] + b if grow == 0 else b[::-1] + a
                return self._shortcut(valid, np.array(path), rng, deadline)
            grow, other = other, grow
        return None

    @staticmethod
    def _nearest(nodes: List[FloatArray], q: FloatArray) -> int:
        return int(np.argmin(np.sum((np.array(nodes) - q) ** 2, axis=1)))

    def _extend(self, valid: Validity, tree, toward: FloatArray) -> Optional[FloatArray]:
        """Grow the tree one step toward a sample; return the new node or None."""
        nodes, parents = tree
        k = self._nearest(nodes, toward)
        gap = toward - nodes[k]
        length = float(np.linalg.norm(gap))
        new = toward if length <= STEP_RAD else nodes[k] + gap * (STEP_RAD / length)
        if not valid.segment(nodes[k], new):
            return None
        nodes.append(new)
        parents.append(k)
        return new

    def _connect(self, valid: Validity, tree, q: FloatArray, deadline: float) -> bool:
        """Grow the tree toward q until it reaches q (True) or is stopped (False)."""
        while time.perf_counter() < deadline:
            new = self._extend(valid, tree, q)
            if new is None:
                return False
            if np.array_equal(new, q):
                return True
        return False

    @staticmethod
    def _branch(tree, k: int) -> List[FloatArray]:
        """Return the nodes from node k back to the tree's root."""
        nodes, parents = tree
        out = []
        while k >= 0:
            out.append(nodes[k])
            k = parents[k]
        return out

    @staticmethod
    def _shortcut(valid: Validity, path: FloatArray, rng: np.random.Generator,
                  deadline: float) -> FloatArray:
        """Join random pairs of the path's points straight where that is free."""
        now = time.perf_counter()
        until = min(deadline, now + SHORTCUT_SHARE * max(0.0, deadline - now))
        points = list(path)
        for _ in range(4 * len(points)):
            if len(points) < 3 or time.perf_counter() > until:
                break
            i, j = sorted(rng.choice(len(points), 2, replace=False))
            if j - i > 1 and valid.segment(points[i], points[j]):
                points = points[:i + 1] + points[j:]
        return np.array(points)


class OmplRRTConnect:
    """OMPL's RRTConnect and path simplifier on the same validity test (module docstring)."""

    name = 'ompl'

    def __init__(self, seed: int = 0):
        """Import OMPL (ImportError when missing); its log quiet but for errors.

        OMPL's random numbers are process-wide and seeded once, before the
        first plan (``seed`` + 1: it must be > 0); later planners share them.
        """
        from ompl import util as ou
        global _OMPL_SEEDED
        ou.setLogLevel(ou.LogLevel.LOG_ERROR)
        if not _OMPL_SEEDED:
            ou.RNG.setSeed(seed + 1)
            _OMPL_SEEDED = True
        self.seed = seed

    def solve(self, valid: Validity, start: FloatArray, goals: List[FloatArray],
              lower: FloatArray, upper: FloatArray, deadline: float) -> Optional[FloatArray]:
        """Return a free path (k, n) from start to one of ``goals``, or None at the deadline.

        The goals are one goal region (OMPL's GoalStates).
        """
        from ompl import base as ob
        from ompl import geometric as og
        for goal in goals:
            if valid.segment(start, goal):
                return np.array([start, goal])
        n = len(start)
        space = ob.RealVectorStateSpace(n)
        bounds = ob.RealVectorBounds(n)
        for i in range(n):
            bounds.setLow(i, float(lower[i]))
            bounds.setHigh(i, float(upper[i]))
        space.setBounds(bounds)
        setup = og.SimpleSetup(space)
        setup.setStateValidityChecker(lambda s: valid.state(np.array(s[0:n])))
        info = setup.getSpaceInformation()
        # OMPL checks a segment every resolution x the space's largest extent (Euclidean).
        info.setStateValidityCheckingResolution(RESOLUTION_RAD / space.getMaximumExtent())
        planner = og.RRTConnect(info)
        planner.setRange(STEP_RAD)
        setup.setPlanner(planner)
        a = space.allocState()
        a[0:n] = [float(v) for v in start]
        ends = []
        for goal in goals:
            ends.append(space.allocState())
            ends[-1][0:n] = [float(v) for v in goal]
        if len(ends) == 1:
            setup.setStartAndGoalStates(a, ends[0])
        else:
            region = ob.GoalStates(info)
            for b in ends:
                region.addState(b)
            setup.setStartState(a)
            setup.setGoal(region)
        left = deadline - time.perf_counter()
        if left <= 0.0 or not setup.solve(left) or not setup.haveExactSolutionPath():
            return None
        setup.simplifySolution(max(0.01, SHORTCUT_SHARE * (deadline - time.perf_counter())))
        path = setup.getSolutionPath()
        return np.array([list(s[0:n]) for s in path.getStates()])


class JointPlanner:
    """Plans joint paths for the worker (module docstring).

    Args:
        library: 'auto' (OMPL when it imports, else the own planner), 'ompl' or 'own'.
        time_limit_s: seconds a plan may take.
        seed: of the random samples.

    Raises:
        ImportError: 'ompl' asked for and not installed.

    """

    def __init__(self, library: str = 'auto', time_limit_s: float = PLAN_TIME_S, seed: int = 0):
        """Choose the implementation."""
        if library not in ('auto', 'ompl', 'own'):
            raise ValueError(f"planner: expected 'auto', 'ompl' or 'own', received {library!r}")
        use_ompl = library == 'ompl' or (library == 'auto' and ompl_available())
        self.impl = OmplRRTConnect(seed) if use_ompl else OwnRRTConnect(seed)
        self.seed = seed
        self.time_limit_s = float(time_limit_s)
        self.last_checks = 0

    @property
    def name(self) -> str:
        """The implementation's name: 'ompl' or 'own'."""
        return self.impl.name

    def plan(self, guard: CollisionGuard, start: FloatArray, goal: FloatArray,
             checkpoint: Callable[[], None], attempt: int = 0
             ) -> Tuple[Optional[FloatArray], str]:
        """Return (path (k, n) from start to goal spaced PATH_SPACING apart, or None; why not).

        The goal itself must keep the margin (plus CLEARANCE_M); the start may
        be inside it (the path then never comes closer than the start is).
        The path may end at a twin of the goal whole turns away (the same
        pose: :func:`turn_variants`); its last point is the one reached.
        ``attempt``: how many plans for the same target failed before this one
        (0 first): it has (1 + attempt) x ``time_limit_s`` and other samples.
        A note that starts with NO_PATH_IN_TIME may succeed when asked again.
        """
        started = time.perf_counter()
        start, goal = np.asarray(start, dtype=np.float64), np.asarray(goal, dtype=np.float64)
        valid = Validity(guard, start, checkpoint, goal)
        chain = guard.model.chain
        lower, upper = search_bounds(chain.lower, chain.upper, start)
        if not valid.state(goal):
            return None, 'the goal is inside the collision margin'
        limit = self.time_limit_s * (1 + attempt)
        self.impl.seed = self.seed + 7919 * attempt
        deadline = started + limit
        goals = [goal] + [g for g in turn_variants(chain.turnable, goal, lower, upper, start)
                          if not np.array_equal(g, goal) and valid.state(g)]
        # The goal alone first (its path is the shorter), then with its twins.
        alone = deadline if len(goals) == 1 else started + GOAL_FIRST_SHARE * limit
        path = self.impl.solve(valid, start, [goal], lower, upper, alone)
        if path is None and len(goals) > 1:
            path = self.impl.solve(valid, start, goals, lower, upper, deadline)
        self.last_checks = valid.checks
        if path is None:
            return None, f'{NO_PATH_IN_TIME} {limit:g} s ({self.name} RRT-Connect)'
        last = path[-1]
        end = min(goals, key=lambda g: float(np.max(np.abs(g - last))))
        path[0], path[-1] = start, end
        out = spaced(path)
        out[-1] = end   # exactly (spacing's a + (b - a) rounds)
        return out, ''
