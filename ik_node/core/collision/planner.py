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
                 checkpoint: Callable[[], None]):
        """Threshold: the margin plus CLEARANCE_M; near the start, its distance when lower."""
        self.model = guard.model
        self.checkpoint = checkpoint
        self.checks = 0
        self.start = np.asarray(start, dtype=np.float64)
        self.wanted = guard.margin + CLEARANCE_M
        self.near_start = min(self.wanted, self.lowest(self.start, self.wanted) - 1e-9)

    def lowest(self, q: FloatArray, threshold: float) -> float:
        """Return the lowest distance at q of the pairs closer than ``threshold`` (else it), m."""
        return min(float(self.model.distances(q, threshold).lowest), threshold)

    def threshold(self, q: FloatArray) -> float:
        """Return the distance q (n,) must keep, m: the start's within NEAR_START_RAD of it.

        An arm held near a pair starts below the clearance; farther on, the
        path keeps the whole of it (a path along the pair at the start's
        distance was held at every step).
        """
        if float(np.max(np.abs(q - self.start))) <= NEAR_START_RAD:
            return self.near_start
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

    def solve(self, valid: Validity, start: FloatArray, goal: FloatArray, lower: FloatArray,
              upper: FloatArray, deadline: float) -> Optional[FloatArray]:
        """Return a free path (k, n) from start to goal, or None when the deadline passes."""
        rng = np.random.default_rng(self.seed)
        trees = ([start], [-1]), ([goal], [-1])   # (nodes, parents) from each end
        if valid.segment(start, goal):
            return np.array([start, goal])
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

    def solve(self, valid: Validity, start: FloatArray, goal: FloatArray, lower: FloatArray,
              upper: FloatArray, deadline: float) -> Optional[FloatArray]:
        """Return a free path (k, n) from start to goal, or None when the deadline passes."""
        from ompl import base as ob
        from ompl import geometric as og
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
        a, b = space.allocState(), space.allocState()
        a[0:n] = [float(v) for v in start]
        b[0:n] = [float(v) for v in goal]
        setup.setStartAndGoalStates(a, b)
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
        self.time_limit_s = float(time_limit_s)
        self.last_checks = 0

    @property
    def name(self) -> str:
        """The implementation's name: 'ompl' or 'own'."""
        return self.impl.name

    def plan(self, guard: CollisionGuard, start: FloatArray, goal: FloatArray,
             checkpoint: Callable[[], None]) -> Tuple[Optional[FloatArray], str]:
        """Return (path (k, n) from start to goal spaced PATH_SPACING apart, or None; why not).

        The goal itself must keep the margin (plus CLEARANCE_M); the start may
        be inside it (the path then never comes closer than the start is).
        """
        started = time.perf_counter()
        start, goal = np.asarray(start, dtype=np.float64), np.asarray(goal, dtype=np.float64)
        valid = Validity(guard, start, checkpoint)
        chain = guard.model.chain
        lower, upper = search_bounds(chain.lower, chain.upper, start)
        if not valid.state(goal):
            return None, 'the goal is inside the collision margin'
        path = self.impl.solve(valid, start, goal, lower, upper, started + self.time_limit_s)
        self.last_checks = valid.checks
        if path is None:
            return None, f'no path found in {self.time_limit_s:g} s ({self.name} RRT-Connect)'
        path[0], path[-1] = start, goal
        return spaced(path), ''
