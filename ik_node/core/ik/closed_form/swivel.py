# SPDX-License-Identifier: Apache-2.0

"""The swivel angles at which one branch of an SRS arm's closed form keeps every joint limit.

Each joint angle is a smooth function of the swivel angle psi on a branch
(elbow, shoulder and wrist signs fixed); :class:`SwivelIntervals` brackets
its crossings of the limits on a grid and refines them by bisection.
Angles in radians; poses (4, 4) in the chain's base frame.
"""

import math
from typing import Callable, List, Tuple

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Grid of swivel angles on which joint-limit crossings are bracketed, then
# refined by bisection to BISECTION_STEPS halvings (2 pi / 720 / 2^45 < 1e-15).
SWIVEL_GRID = 720
BISECTION_STEPS = 45
# Near a wrist or shoulder singularity a joint turns by up to pi within a
# fraction of a grid step, and can pass beyond its limit and back between two
# samples (a sweep found q5 crossing +-pi, 0.35 rad outside the iiwa's
# limits, between two samples within them). Cells where a joint moves more
# than this (rad) are split in SWIVEL_SPLIT, up to SWIVEL_SPLIT_LEVELS times
# (down to 2 pi / 720 / 8^8 ~ 5e-10 rad of swivel).
SWIVEL_MAX_STEP = 0.05
SWIVEL_SPLIT = 8
SWIVEL_SPLIT_LEVELS = 8


class SwivelIntervals:
    """Feasible swivel intervals of one arm's closed form (AnalyticSRS.feasible_swivel).

    Args:
        solve_batch: (targets (K, 4, 4), psi (K,), signs (K, 3), q1 fallback
            (K,), q5 fallback (K,)) -> joints (K, 7): the closed form, rad.
        lower, upper: (7,) joint limits, rad.

    """

    def __init__(self, solve_batch: Callable[..., FloatArray], lower: FloatArray,
                 upper: FloatArray):
        """Search with ``solve_batch`` within [lower, upper]."""
        self.solve_batch = solve_batch
        self.lower, self.upper = lower, upper

    def of(self, target: FloatArray, signs: FloatArray) -> List[Tuple[float, float]]:
        """Swivel-angle intervals in which branch ``signs`` stays within every joint limit.

        Each joint angle is a smooth function of psi on a branch; its crossings of
        the limits are bracketed on a grid of SWIVEL_GRID angles, finer where a
        joint turns fast (_swivel_samples), and refined by bisection (Shimizu
        et al. 2008 solve the same crossings in closed form).

        Args:
            target: (4, 4) tip pose in the base frame, within reach (checked).
            signs: (3,) the branch: (elbow, shoulder, wrist), each +1. or -1.

        Returns:
            Sorted, disjoint (start, end) intervals in [-pi, pi], radians; empty
            when no swivel angle is feasible.

        """
        grid, q = self._swivel_samples(target, signs)
        # The repeated inputs are built once; the bisection passes leading
        # slices (still contiguous: no copy per step).
        repeated = (np.repeat(target[None], grid.size, axis=0),
                    np.repeat(signs[None], grid.size, axis=0), np.zeros(grid.size))
        margin = self._limit_margins(q)
        inside = margin >= 0.0
        if inside.all():
            return [(-math.pi, math.pi)]
        edges = np.flatnonzero(inside[:-1] != inside[1:])
        lo, hi = grid[edges].copy(), grid[edges + 1].copy()
        lo_inside = inside[edges]
        for _ in range(BISECTION_STEPS):
            mid = 0.5 * (lo + hi)
            mid_inside = self._margin(mid, *(a[:mid.size] for a in repeated)) >= 0.0
            same = mid_inside == lo_inside
            lo = np.where(same, mid, lo)
            hi = np.where(same, hi, mid)
        # Boundary i: psi where feasibility changes; entering when lo side is out.
        bounds = [(float(lo[i]) if lo_inside[i] else float(hi[i]), bool(not lo_inside[i]))
                  for i in range(len(edges))]
        intervals = []
        start = -math.pi if inside[0] else None
        for value, entering in bounds:
            if entering:
                start = value
            elif start is not None:
                intervals.append((start, value))
                start = None
        if start is not None:
            intervals.append((start, math.pi))
        return intervals

    def _swivel_samples(self, target: FloatArray,
                        signs: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """Swivel angles (K,) in [-pi, pi], rad, sorted, and the branch's joints there (K, 7).

        SWIVEL_GRID even steps; cells where a joint turns by more than
        SWIVEL_MAX_STEP are split (SWIVEL_SPLIT, SWIVEL_SPLIT_LEVELS times at
        most): a limit crossed and crossed back within a cell is then seen at
        a sample.
        """
        grid = np.linspace(-np.pi, np.pi, SWIVEL_GRID + 1)
        for level in range(SWIVEL_SPLIT_LEVELS + 1):
            count = grid.size
            q = self.solve_batch(np.repeat(target[None], count, axis=0), grid,
                                 np.repeat(signs[None], count, axis=0), np.zeros(count),
                                 np.zeros(count))
            turn = np.abs((np.diff(q, axis=0) + np.pi) % (2.0 * np.pi) - np.pi)
            fast = np.flatnonzero(np.max(turn, axis=1) > SWIVEL_MAX_STEP)
            if fast.size == 0 or level == SWIVEL_SPLIT_LEVELS:
                break
            width = grid[fast + 1] - grid[fast]
            inner = np.arange(1, SWIVEL_SPLIT) / SWIVEL_SPLIT
            grid = np.sort(np.concatenate([grid, (grid[fast, None]
                                                  + width[:, None] * inner).ravel()]))
        return grid, q

    def _margin(self, psi: FloatArray, targets: FloatArray, signs: FloatArray,
                zeros: FloatArray) -> FloatArray:
        """Smallest distance to a limit over the joints, (K,), for swivel angles psi (K,).

        ``targets`` (K, 4, 4), ``signs`` (K, 3) and ``zeros`` (K,) repeat one
        pose and one branch.
        """
        return self._limit_margins(self.solve_batch(targets, psi, signs, zeros, zeros))

    def _limit_margins(self, q: FloatArray) -> FloatArray:
        """Smallest distance to a limit over the joints (K,) of joint vectors q (K, 7), rad."""
        return np.min(np.minimum(q - self.lower, self.upper - q), axis=1)
