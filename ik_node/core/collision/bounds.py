# SPDX-License-Identifier: Apache-2.0

"""What the collision guard remembers of pair distances: lower bounds carried by a sweep bound.

A pair's distance bound learnt at joints q0 (m), less ``sweep @ |q - q0|``
(the most the distance can change on the way), still bounds it at q. The
guard (collision.guard) keeps one :class:`KnownBounds` for every way, and
one :class:`PathBounds` per braking path it judges; they only spare it
distance queries, never change a decision (the tests hold a guard that has
learnt to the decisions of a fresh one). Kernels: kernels.proximity
``known_floors`` and ``remember``, on the model's backend.
"""

import math

import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


class KnownBounds:
    """Lower bounds of pair distances learnt at joint configurations, carried by a sweep bound.

    Each pair's last bound (m; -inf: none) and the joints where it held; less
    ``sweep @ |q - there|`` it bounds the pair's distance at q (kernels.proximity
    ``known_floors`` and ``remember``, on the model's backend).

    Args:
        sweep: (P, n) a sweep bound valid on the ways it is used for, m per rad
            (m per m): the model's for any way, a path's between its points.
        pairs: P, the model's checked pairs.
        n: the joints.

    """

    def __init__(self, sweep: FloatArray, pairs: int, n: int):
        """Start with nothing learnt (every bound -inf)."""
        self.sweep = sweep
        self.distance = np.full(pairs, -math.inf)   # (P,) m
        self.at = np.zeros((pairs, n))                # (P, n) where each was learnt

    def floors_at(self, kernels, q: FloatArray, need: FloatArray, out: FloatArray) -> bool:
        """Write what the bounds leave at q into ``out`` (P,), m; return True if all >= need.

        ``kernels``: the model's backend. ``need`` (P,) m.
        """
        return bool(kernels.proximity.known_floors(np.ascontiguousarray(q, dtype=np.float64),
                                                   self.distance, self.at, self.sweep, need, out))

    def keep(self, kernels, q: FloatArray, floors: FloatArray, held: FloatArray) -> None:
        """Keep the bounds ``floors`` (P,) m computed at q where they beat what was held there.

        ``held`` (P,) m: what the kept bounds left at q (``floors_at``).
        """
        kernels.proximity.remember(np.ascontiguousarray(q, dtype=np.float64), floors, held,
                                   self.distance, self.at)


class PathBounds(KnownBounds):
    """Lower bounds of pair distances learnt along one braking path, lost at the path's sweep.

    The guard's memory holds bounds learnt anywhere, so it discounts them by
    the model's static sweep bound (``CollisionModel.sweep``) times the joints'
    travel. Bounds learnt at the points of one braking path and used at its
    other points can be discounted by the path's own bound (``path_sweep``,
    on the xarm7 0.66 as large): the way between two of its points is part
    of the path, and each joint moves one way on it.

    Args:
        sweep: (P, n) the path's sweep bound, m per rad (m per m).
        pairs: P, the model's checked pairs.
        n: the joints.

    """

    def __init__(self, sweep: FloatArray, pairs: int, n: int):
        """Start with nothing learnt (every bound -inf)."""
        super().__init__(sweep, pairs, n)
        self._held = np.full(pairs, -math.inf)   # what they leave at the last q asked
        self._learnt = False

    def tighten(self, kernels, q: FloatArray, need: FloatArray, floors: FloatArray) -> bool:
        """Raise ``floors`` (P,) at q, a point of the path, to what was learnt; True if >= need.

        ``kernels``: the model's backend. ``need`` (P,) m.
        """
        if not self._learnt:   # nothing to add (the path's first point)
            return False
        self.floors_at(kernels, q, need, self._held)
        np.maximum(floors, self._held, out=floors)
        return bool(np.all(floors >= need))

    def learn(self, kernels, q: FloatArray, floors: FloatArray) -> None:
        """Keep bounds ``floors`` (P,) m computed at q where tighter (after ``tighten`` at q)."""
        self._learnt = True
        self.keep(kernels, q, floors, self._held)
