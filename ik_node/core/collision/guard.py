# SPDX-License-Identifier: Apache-2.0

"""The collision constraint of the one limiting step: keep a margin, never get trapped.

:class:`CollisionGuard` judges a proposed step of the joint command, from
(q, v) to (q1, v1), by its braking path: from q1 to the point where the
joints would come to rest if they braked at their acceleration limits,
``s = q1 + v1 |v1| / (2 a)`` (the limiting step's own braking rule). The
step is admitted when, for every checked pair the path may reach (its
sweep bound: ``CollisionModel.sweep``, then ``path_sweep``, the same bound
with the arms measured where the path starts), the distance at q1, at s,
at points along the path (one per PATH_PIECE of sweep, and per braking step) and the linearised
dip from each are at least the margin, or (for a pair already inside the
margin) not smaller than it is now. So:

* closing speed toward a surface is never more than braking can take back
  before the margin (the stopping point keeps it);
* sliding along a surface and moving away are free;
* an arm started inside the margin, or in contact, may always move to
  increase the distance: it is never trapped.

A step refused is replaced by a step toward the goal *slid* along the
blocking surfaces: the goal's displacement from q projected (least squares,
a few Hildreth sweeps over the near pairs' distance gradients) so that each
pair's linearised distance ends at the margin plus ``SLIDE_CLEARANCE``.
(the caller, motion.limiting.LimitingStep, tries the limiting step toward it, then
the step along the straight line to it). When that is refused too, the step
brakes toward rest at the limits (the caller's braking step, which by the
stopping-point rule keeps the margin). The guard's answer is a verdict:
None (admitted) or a :class:`Refusal` (where, the pairs near there, the
one that ends too close), which the slide starts from and the caller's
report names (:meth:`CollisionGuard.hold`); the guard keeps no state about
steps, only caches of distances.

Cost: what a tick needs and no more. Each pair's last lower bound (its
exact distance, or its bounding spheres' gap) is remembered with the
joints where it held; less the most the pair's distance can have changed
since (``CollisionModel.sweep`` times the joints' travel) it bounds the
pair's distance now. Pairs are posed and computed only when a bound drops
below what the step needs of them, and only those pairs get coal's exact
distance: free space costs one pass of a kernel over the pairs. Along one
braking path, bounds learnt at its points are also kept with the path's own
sweep bound (``bounds.PathBounds``), which loses less between them. The caches
never change a decision: a guard that learnt answers as a fresh one (a test
holds them to that).
"""

from dataclasses import dataclass
import math
from typing import Optional, Tuple

from ik_node.core.collision.bounds import KnownBounds, PathBounds
from ik_node.core.collision.model import CollisionModel, PairDistances
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# A slid goal aims this far outside the margin (m): sliding at exactly the
# margin would lose to the surface's curvature at every step.
SLIDE_CLEARANCE = 5e-4
# Hildreth sweeps for the slid goal (few pairs are near at once).
SLIDE_SWEEPS = 15
# Pairs whose linearised distance at the unslid goal clears the need by this
# much (m) are left out of the slide (they would not bind).
ACTIVE_SLACK = 0.01
# Distances compared with this slack (m): coal's GJK answers to ~1e-9.
DISTANCE_TOL = 1e-8
# The braking path is judged in pieces of at most this much sweep (m: the
# bound on how far a pair's distance can change over the piece), at most
# MAX_PATH_PIECES of them.
PATH_PIECE = 0.05
MAX_PATH_PIECES = 8
# Pairs farther than the margin plus this (m) are judged by their bounding
# spheres (a lower bound of the distance) when a braking path may reach them.
EXACT_REACH = 0.1


def stepped_braking_velocity(v: FloatArray, a_max: FloatArray, step_s: float) -> FloatArray:
    """Return (n,) the velocity whose continuous braking path holds the stepped one's positions.

    Braking in steps of ``step_s`` from v (n,) (kernels.limits.braking_step:
    v_k = v - k a dt, q_k = q_(k-1) + v_k dt, the last step onto the curve's
    end) puts each joint at ``q + (v - a dt / 2) t - a t^2 / 2`` at t = k dt:
    the continuous braking from ``sign(v) max(|v| - a dt / 2, 0)``.
    ``a_max`` (n,) rad/s^2 (inf: the joint stops at once).
    """
    v = np.asarray(v, dtype=np.float64)
    with np.errstate(invalid='ignore'):
        slower = np.maximum(np.abs(v) - 0.5 * np.asarray(a_max) * step_s, 0.0)
    return np.sign(v) * np.where(np.isfinite(slower), slower, 0.0)


@dataclass(frozen=True)
class Blocked:
    """Why the last step was held: the pair (two names), its distance (m), what was done."""

    pair: Tuple[str, str]
    distance: float
    action: str   # 'slid' or 'braked'


@dataclass(frozen=True, eq=False)
class Refusal:
    """A step the guard refused (its verdict; None admits).

    Attributes:
        config: (n,) the joints on the braking path where a pair ends too close, rad.
        near: the pairs near there and their distances (PairDistances).
        row: the row of ``near`` whose pair ends below what it is allowed.

    """

    config: FloatArray
    near: PairDistances
    row: int


class CollisionGuard:
    """Admits, slides or refuses steps of the joint command against a CollisionModel.

    Args:
        model: the robot's and world's shapes and checked pairs.
        margin: the smallest distance kept between any checked pair, m (>= 0).

    """

    def __init__(self, model: CollisionModel, margin: float):
        """Keep the model and margin; nothing is computed until the first step."""
        self.model = model
        self.margin = float(margin)
        self._generation = 0   # counts changes of the world, margin or pairs
        self.changed()

    def changed(self) -> None:
        """Forget what is known of distances (the world, the margin or the pairs changed).

        Also done at the next step by itself when the model's pairs or world
        changed (``CollisionModel.revision``).
        """
        self._known: dict = {}   # recent configurations (bytes) -> (need, their near pairs)
        self._last_gradients: Optional[Tuple[PairDistances, FloatArray]] = None
        pairs, n = len(self.model.pairs), self.model.chain.n
        # Each pair's last lower bound and where it held, carried by the model's sweep.
        self._memory = KnownBounds(self.model.sweep, pairs, n)
        self._floors = np.empty(pairs)   # scratch: what they leave at a configuration
        self._margin_need = np.full(pairs, self.margin)   # what a configuration at rest needs
        self._exact_need = np.full(pairs, self.margin + EXACT_REACH)   # coal's, not spheres'
        self._allowed: Optional[Tuple[bytes, FloatArray]] = None   # _allowed_at's last
        self._revision = self.model.revision
        self._generation += 1

    @property
    def generation(self) -> int:
        """Count the changes of the world, the margin or the pairs (what searches key on)."""
        self._follow_model()
        return self._generation

    def _follow_model(self) -> None:
        """Forget what is known when the model's pairs or world changed since it was learnt."""
        if self._revision != self.model.revision:
            self.changed()

    def set_margin(self, margin: float) -> None:
        """Use a new margin, m, from the next step on."""
        self.margin = float(margin)
        self.changed()

    # -- distances --------------------------------------------------------------

    def _near(self, q: FloatArray, need: Optional[FloatArray] = None,
              path: Optional[PathBounds] = None) -> Optional[PairDistances]:
        """Return the pairs closer than ``need`` at q (None: no pair is).

        ``need``: (P,) per checked pair (None: the margin), m: the margin plus
        how much the pair's distance may shrink on the way judged from q (a
        pair that near may be reached on it). Pairs whose remembered bound (module doc) keeps them
        that far are left out: which pairs are listed depends on what was
        computed before, never a listed pair's distance nor whether one
        within the margin is listed.
        """
        self._follow_model()
        if need is None:
            need = self._margin_need
        key = q.tobytes()
        cached = self._known.get(key)
        if cached is not None and np.all(cached[0] >= need):
            return cached[1]
        if self._clear(q, need):
            return None
        # _clear left the remembered bounds at q in _floors: the model starts from them.
        if path is not None and path.tighten(self.model.kernels, q, need, self._floors):
            return None
        near = self.model.distances(q, need, self._exact_need, self._floors)
        # Kept where tighter at q than what was remembered.
        self._memory.keep(self.model.kernels, q, near.floors, self._floors)
        if path is not None:
            path.learn(self.model.kernels, q, near.floors)
        if len(self._known) >= 4 and key not in self._known:
            self._known.pop(next(iter(self._known)))
        self._known[key] = (need, near)
        return near

    def _clear(self, q: FloatArray, need: FloatArray) -> bool:
        """Return True when every pair's remembered bound at q is at least ``need`` (P,), m.

        Leaves those bounds in ``self._floors``.
        """
        return self._memory.floors_at(self.model.kernels, q, need, self._floors)

    # -- the step ----------------------------------------------------------------

    def admits(self, q: FloatArray, q1: FloatArray, v1: FloatArray, a_max: FloatArray,
               lower: FloatArray, upper: FloatArray, step_s: float = 0.0) -> bool:
        """Return True when the step from q to (q1, v1) keeps the margin (``judge`` admits it)."""
        return self.judge(q, q1, v1, a_max, lower, upper, step_s) is None

    def judge(self, q: FloatArray, q1: FloatArray, v1: FloatArray, a_max: FloatArray,
              lower: FloatArray, upper: FloatArray, step_s: float = 0.0) -> Optional[Refusal]:
        """Return None when the step from q to (q1, v1) keeps the margin, else the Refusal.

        Args:
            q: (n,) the command now.
            q1: (n,) the proposed command.
            v1: (n,) its velocity, rad/s.
            a_max: (n,) acceleration limits (stopping point), rad/s^2.
            lower: (n,) lower position limits (the stopping point stays within).
            upper: (n,) upper position limits.
            step_s: the period of the braking steps that may follow, s (0:
                braking judged as continuous). The limiting step brakes in
                steps (kernels.limits.braking_step: v -= a dt, then q += v dt)
                whose positions lie on the continuous braking path from
                ``v1`` less ``a step_s / 2`` in each joint's speed
                (:func:`stepped_braking_velocity`), about v dt / 2 short of
                the one from v1 in each joint: with several joints stopping
                at different times that path runs beside the other, and a
                hand sliding along a shelf braked 0.06 mm inside the margin.

        """
        self._follow_model()
        if step_s > 0.0:
            v1 = stepped_braking_velocity(v1, a_max, step_s)
        stop, need = self._stop_and_need(q1, v1, a_max, lower, upper)
        # Every pair the braking path from q1 may reach is judged along it, not
        # only those near q1: a small obstacle between q1 and a free stopping
        # point is on the way (found by a sweep: the panda's wrist braked
        # through one at 2 rad/s). The path is judged in pieces, from a
        # configuration at the start of each, with its own linearised dip to
        # the stop, as many as its sweep needs (the linearisation's error
        # grows with the square of the way it covers: 1.5 mm over 0.15 rad
        # with one). Each start lists only the pairs its own piece may reach;
        # q1 is judged first: most refusals are found there.
        if self._clear(q1, need):   # no pair can come inside the margin on the way
            return None
        # The same bound made tighter for this path: arms measured at q1.
        sweep = self.model.path_sweep(q1, np.abs(stop - q1))
        pieces = self._path_pieces(self._need_between(q1, stop, sweep), v1, a_max, step_s)
        configs, speeds, needs = self._braking_path(q1, v1, a_max, lower, upper, stop, sweep,
                                                    pieces)
        path = PathBounds(sweep, len(self.model.pairs), len(q1))
        for k in range(pieces):
            refusal = self._refusal(configs[k], speeds[k],
                                    self._near(configs[k], needs[k], path), q, a_max)
            if refusal is not None:
                return refusal
        return self._refusal(stop, None, self._near(stop, None, path), q, a_max)

    def _refusal(self, config: FloatArray, v: Optional[FloatArray],
                 near: Optional[PairDistances], q: FloatArray,
                 a_max: FloatArray) -> Optional[Refusal]:
        """Return the Refusal of a near pair at config that, braking from v, ends too close.

        Each pair is judged by its distance at config and its linearised
        dip while the joints brake from v (None or zero: at rest), against
        the margin, or less for a pair already inside it at q, the command
        now (``_allowed_at``, asked only when a pair ends inside the margin).
        None: every pair keeps what it must.
        """
        if near is None:
            return None
        low = near.distance
        if v is not None and np.any(v != 0.0):
            low = np.minimum(low, near.distance + self._braking_dip(config, v, a_max, near))
        # What q allows is at most the margin: rows at or above it keep it.
        inside = np.flatnonzero(low < self.margin - DISTANCE_TOL)
        if not inside.size:
            return None
        allowed = self._allowed_at(q)[near.pairs[inside]]
        short = inside[low[inside] < allowed - DISTANCE_TOL]
        return Refusal(config, near, int(short[0])) if short.size else None

    def _allowed_at(self, q: FloatArray) -> FloatArray:
        """Return (P,) each pair's least allowed distance from q on, m (kept for the last q).

        The margin, or less for a pair already inside it at q: not smaller
        than it is now (never trapped).
        """
        key = q.tobytes()
        if self._allowed is not None and self._allowed[0] == key:
            return self._allowed[1]
        allowed = np.full(len(self.model.pairs), self.margin)
        near = self._near(q)
        if near is not None:
            allowed[near.pairs] = np.minimum(near.distance, self.margin)
        self._allowed = (key, allowed)
        return allowed

    def _stop_and_need(self, q1: FloatArray, v1: FloatArray, a_max: FloatArray,
                       lower: FloatArray, upper: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """Return the stopping point (n,) braking from (q1, v1), and each pair's need to it (P,).

        The stopping point is ``q1 + v1 |v1| / (2 a)`` within the limits; a
        pair's need is the margin plus its sweep bound over the way, m.
        """
        stop, need = np.empty(len(q1)), np.empty(len(self.model.pairs))
        self.model.kernels.proximity.stop_and_need(q1, v1, a_max, lower, upper,
                                                   self.model.sweep, self.margin, stop, need)
        return stop, need

    def _need_between(self, a: FloatArray, b: FloatArray, sweep: FloatArray) -> FloatArray:
        """Return (P,) the margin plus each pair's sweep bound over the way from a to b, m.

        ``sweep``: (P, n) the model's, or a path's (``CollisionModel.path_sweep``)
        when a and b are on that path.
        """
        return self.margin + sweep @ np.abs(b - a)

    def _path_pieces(self, need: FloatArray, v1: FloatArray, a_max: FloatArray,
                     step_s: float) -> int:
        """Return how many pieces the braking path is judged in (at most MAX_PATH_PIECES).

        One per PATH_PIECE of sweep, counted over the pairs whose known bound
        at q1 (``_clear`` left it in ``_floors``) the path's sweep may bring
        inside the margin: ``need`` (P,) m, each pair's margin plus its sweep
        to the stop; and, braked in steps of ``step_s`` (s), at least one per
        step (its velocity ``v1`` (n,) and ``a_max`` (n,) say how many): a
        piece's dip is linearised, and over one piece of a hand's 2 cm
        sliding stop along a plate it missed 5.5 µm of the margin.
        """
        reachable = (need - self.margin)[self._floors < need]
        if not reachable.size:
            return 1
        pieces = math.ceil(float(reachable.max()) / PATH_PIECE)
        if step_s > 0.0:
            pieces = max(pieces, math.ceil(float(np.max(np.abs(v1) / a_max)) / step_s))
        return int(min(MAX_PATH_PIECES, max(1, pieces)))

    def _braking_path(self, q1: FloatArray, v1: FloatArray, a_max: FloatArray,
                      lower: FloatArray, upper: FloatArray, stop: FloatArray, sweep: FloatArray,
                      pieces: int) -> Tuple[FloatArray, FloatArray, FloatArray]:
        """Return the braking path from (q1, v1) in ``pieces`` equal times, and their needs.

        (pieces + 1, n) joints: row k is where they are after k pieces (row 0:
        q1, the last: ``stop``); (pieces, n) their velocities at the pieces'
        starts, rad/s; (pieces, P) each pair's need over each piece (the
        margin plus ``sweep`` (P, n), the path's bound, over the piece's way),
        m. Each joint brakes at its own limit (``a_max`` (n,)) to rest;
        positions are kept within the limits.
        """
        configs, speeds = np.empty((pieces + 1, len(q1))), np.empty((pieces, len(q1)))
        needs = np.empty((pieces, len(sweep)))
        self.model.kernels.proximity.braking_path(q1, v1, a_max, lower, upper, stop, sweep,
                                                  self.margin, configs, speeds, needs)
        return configs, speeds, needs

    def _braking_dip(self, q1: FloatArray, v1: FloatArray, a_max: FloatArray,
                     near: PairDistances) -> FloatArray:
        """Return (K,) each near pair's lowest linearised distance change while braking from v1.

        Each joint brakes at its own limit (the limiting step's braking), so
        they stop at different times and the path bends on the way: a pair
        whose end points both keep the margin can dip inside it in between
        (5 mm, seen in the property tests). The displacement of joint i is
        ``v t - sign(v) a t^2 / 2`` until it stops at ``|v| / a``; along the
        distance gradient g it is piecewise quadratic in t, and its minimum
        is at a stop time or at a vertex between two.
        """
        grads, dip = self.model.gradients_and_dip(q1, near, v1, a_max)
        self._last_gradients = (near, grads)
        return dip

    def _gradients(self, q: FloatArray, near: PairDistances) -> FloatArray:
        """Return (K, n) the pairs' distance gradients at q (the last kept for a slide)."""
        last = self._last_gradients
        if last is None or last[0] is not near:
            last = self._last_gradients = (near, self.model.gradients(q, near))
        return last[1]

    def slid_goal(self, q: FloatArray, goal: FloatArray, refusal: Refusal,
                  metric: Optional[FloatArray] = None) -> Optional[FloatArray]:
        """Return the goal (n,) moved so that the way from q keeps near pairs outside the margin.

        Linearised at the configuration where ``refusal`` (judge's verdict on
        the step toward the goal) was found: q1 or a point of its braking
        path. None when the goal is not finite (a brake).
        ``metric``: (n, n) symmetric positive definite, the displacement is
        moved least in ``x^T metric x`` (the tip's: J^T W J + lambda I, so the
        tip slides along the surface toward its target); None: Euclidean in
        joint space.
        """
        if not np.all(np.isfinite(goal)):
            return None
        config, near = refusal.config, refusal.near
        grads = self._gradients(config, near)
        # d(q + x) ~ d(config) + g (q + x - config) >= margin + clearance
        need = (self.margin + SLIDE_CLEARANCE - near.distance
                - grads @ (q - config))
        x0 = goal - q
        if metric is not None:
            # x = L^-T y with metric = L L^T: |x|_metric = |y|, g x = (L^-1 g) y.
            lower = np.linalg.cholesky(metric)
            x0 = lower.T @ x0
            grads = np.linalg.solve(lower, grads.T).T
        x = slide(self.model.kernels, x0, grads, need)
        if metric is not None:
            x = np.linalg.solve(lower.T, x)
        return q + x

    def hold(self, refusal: Refusal, action: str) -> Blocked:
        """Return what held a step: the refused pair, its distance, ``action`` (slid, braked)."""
        near, row = refusal.near, refusal.row
        return Blocked(self.model.pair_names(int(near.pairs[row])), float(near.distance[row]),
                       action)


def slide(kernels, x0: np.ndarray, grads: np.ndarray, need: np.ndarray) -> FloatArray:
    """Return the x (n,) nearest x0 (n,) with ``grads @ x >= need`` (Hildreth's method).

    ``grads`` (K, n), ``need`` (K,); pairs that clear their need at x0 by
    ACTIVE_SLACK stay out; SLIDE_SWEEPS sweeps at most
    (kernels.proximity.slide_projection on ``kernels``, a Backend).
    """
    x = np.empty(len(x0))
    kernels.proximity.slide_projection(np.ascontiguousarray(x0, dtype=np.float64),
                                       np.ascontiguousarray(grads, dtype=np.float64),
                                       np.ascontiguousarray(need, dtype=np.float64),
                                       ACTIVE_SLACK, SLIDE_SWEEPS, x)
    return x
