# SPDX-License-Identifier: Apache-2.0

"""The robot's and the world's collision geometry, posed at joint values, with distances.

A :class:`CollisionModel` holds the links' shapes (each rigidly attached to one
of the chain's joint frames, or static in the base frame), the obstacles (in
the base frame) and the pairs to check. :meth:`CollisionModel.distances`
answers, for joints q (n,), every checked pair that is closer than a
threshold: signed distance (m; negative in contact), the nearest points and
the normal (base frame); :meth:`CollisionModel.gradients` gives each such
pair's d(distance)/dq (n,).

Cost: one forward kinematics pass, then a bound per pair from bounding
spheres (``kernels.proximity``: compiled where numba is installed, else the
same source run by CPython), and coal's narrow phase only for the
pairs whose bound is below the threshold: far pairs cost nothing but their
bound. This is the broad phase a tick needs (coal's own managers find the
closest pair overall; a tick needs every pair closer than the margin, and
re-posing their trees costs more than the spheres; ``ik_bench collision``
compares the two).

Pairs never checked: two links joined by fixed joints only (one rigid body),
links joined by one movable joint (adjacent), two still shapes (no joint
moves them: a link fixed to the base, a sphere on joint 1's axis,
:func:`ik_node.core.collision.pairs.still_shapes`) and a still shape with
an obstacle, pairs named by the caller (an SRDF's ``<disable_collisions>``),
and pairs in contact in every sampled configuration
(:func:`ik_node.core.collision.pairs.always_in_contact`). Pairs never in
contact over samples are kept: far apart, their bound keeps them out of the
narrow phase at no cost, and a rare contact missed by sampling would be a
collision.
"""

from dataclasses import dataclass
import math
from typing import Dict, Iterable, List, Mapping, Optional, Sequence, Set, Tuple, \
    TYPE_CHECKING

from ik_node.core.collision.pairs import still_shapes
from ik_node.core.collision.shapes import coal_geometry, Shape
from ik_node.core.kernels.backend import resolve as resolve_backend
from ik_node.core.model.chain import Chain
from ik_node.core.model.tree import frame_tree_of
import numpy as np
import numpy.typing as npt

if TYPE_CHECKING:   # it places bodies of this model (no import at run time: a cycle)
    from ik_node.core.collision.undriven import UndrivenLinks

FloatArray = npt.NDArray[np.float64]

NO_POINTS = np.empty((0, 3))   # witnesses of no pair (shared: never written)
NO_POINTS.flags.writeable = False
NO_ROWS = np.empty(0, dtype=bool)   # the exact mask of no pair (shared: never written)
NO_ROWS.flags.writeable = False


@dataclass(frozen=True)
class Body:
    """A link's collision shapes and how the link is attached.

    Attributes:
        link: the link's name.
        frame: index of the chain's movable joint frame it is fixed to, or -1
            when static in the base frame.
        offset: (4, 4) the link's pose in that frame.
        shapes: its shapes, posed in the link's frame.

    """

    link: str
    frame: int
    offset: FloatArray
    shapes: Tuple[Shape, ...]


@dataclass(frozen=True)
class PairDistances:
    """The checked pairs closer than a threshold at one configuration (K of them).

    Attributes:
        pairs: (K,) indices into ``CollisionModel.pairs``.
        distance: (K,) signed distances, m (negative: penetration depth).
        point_a, point_b: (K, 3) nearest points, base frame.
        normal: (K, 3) unit normals from a toward b, base frame.
        exact: (K,) bool, the row is coal's exact distance (else a bound and
            the bounding spheres' witnesses).
        floors: (P,) a lower bound of every checked pair's distance, m:
            the exact distance where a row is exact.

    """

    pairs: npt.NDArray[np.int64]
    distance: FloatArray
    point_a: FloatArray
    point_b: FloatArray
    normal: FloatArray
    exact: npt.NDArray[np.bool_]
    floors: FloatArray

    @property
    def lowest(self) -> float:
        """The smallest distance or bound over every checked pair, m (a bound when none is listed).

        Computed when asked (the guard never asks).
        """
        low = float(self.floors.min()) if len(self.floors) else math.inf
        return min(low, float(self.distance.min())) if len(self.distance) else low


class CollisionModel:
    """Robot and world shapes of one chain, and the distances between checked pairs.

    Args:
        chain: the chain whose joints move the links.
        bodies: the links with shapes (see :func:`bodies_of`).
        adjacent: pairs of link names never checked (rigid or adjacent links,
            an SRDF's disabled pairs), either order.
        backend: 'auto', 'numpy' or 'numba' (kernels.backend.resolve): the
            kernels compiled, or their one source run by CPython.

    """

    def __init__(self, chain: Chain, bodies: Sequence[Body],
                 adjacent: Iterable[Tuple[str, str]] = (), backend: str = 'auto',
                 movable: Iterable[str] = ()):
        """Index the shapes, build the self pairs; no obstacles yet.

        ``movable``: links placed by joints the node does not drive
        (UndrivenLinks): :meth:`move_bodies` moves them; never taken as still.
        """
        import coal
        self._coal = coal
        self.chain = chain
        self.bodies = [b for b in bodies if b.shapes]
        #: Links joints the node does not drive place (move_bodies), and their placer.
        self.movable = frozenset(movable)
        self.undriven: Optional['UndrivenLinks'] = None
        self.disabled: Set[frozenset] = {frozenset(p) for p in adjacent}
        self._robot: List[Tuple[int, Shape, FloatArray]] = []   # (body, shape, frame pose)
        for k, body in enumerate(self.bodies):
            for shape in body.shapes:
                self._robot.append((k, shape, body.offset @ shape.pose))
        self._geoms = [coal_geometry(s) for _, s, _ in self._robot]
        self._tf = [coal.Transform3s() for _ in self._robot]   # _exact's, set in place
        self._frame = np.array([self.bodies[k].frame for k, _, _ in self._robot], dtype=np.int64)
        self._local = np.array([p for _, _, p in self._robot]).reshape(-1, 4, 4)
        #: (S,) shapes whose place in the base frame no joint changes: on a link
        #: fixed to the base, or turned only about an axis they are symmetric
        #: about (the UR shoulder's sphere and cylinder on joint 1's axis).
        #: The joint frames as a tree (one chain: a path; arms on a torso: branches).
        self.tree = frame_tree_of(chain)
        self.still = still_shapes(self.tree, self._frame, self._local,
                                  [s.kind for _, s, _ in self._robot])
        # A link undriven joints move is still only on the base frame (its offset may
        # change: a sphere off the axis it sat on moves with the joint).
        for i, (k, _, _) in enumerate(self._robot):
            if self.bodies[k].link in self.movable and self._frame[i] >= 0:
                self.still[i] = False
        spheres = [s.bounding_sphere() for _, s, _ in self._robot]
        self._centre = np.array([body.offset[:3, :3] @ c + body.offset[:3, 3]
                                 for (k, _, _), (c, _) in zip(self._robot, spheres)
                                 for body in [self.bodies[k]]]).reshape(-1, 3)
        self._radius = np.array([r for _, r in spheres])
        self._obstacles: Dict[str, Tuple[Shape, ...]] = {}
        self._request = coal.DistanceRequest()
        self._result = coal.DistanceResult()
        tree = self.tree
        self._axes = np.ascontiguousarray(tree.axes)
        self._prismatic = np.ascontiguousarray(tree.prismatic)
        #: (M, n): a joint frame's rate to the free joints' (multiplier of its driver).
        self._to_free = np.ascontiguousarray(tree.to_free)
        self._parent = np.ascontiguousarray(tree.parent)
        self._ancestor = np.ascontiguousarray(tree.ancestor)
        self._arms = self._shape_arms()
        self._self_pairs = self._pairs_of_links()
        #: Counts changes of the pairs or the world (whatever holds distances
        #: of this model compares it: ``pairs`` and their distances changed).
        self.revision = 0
        self._rebuild_world()
        self._frame_cache: dict = {}
        # The kernels of every tick: compiled when numba is there, else their
        # source run by CPython (kernels.backend).
        self.set_backend(backend)

    # -- configuration ----------------------------------------------------------

    def set_backend(self, backend: str) -> None:
        """Run the per-tick kernels on ``backend`` ('auto', 'numpy' or 'numba'): same answers.

        numba compiles a kernel at its first call; a node keeps the model on
        CPython's run until its background compile (ik_node.core.warm) has
        filled the cache, then switches here between two ticks.
        """
        self._kernels = resolve_backend(backend)
        self._fks = self.tree.fk(self._kernels)
        self._frame_cache.clear()

    @property
    def backend(self) -> str:
        """Return the backend the kernels run on: 'numba' or 'numpy'."""
        return self._kernels.name

    @property
    def kernels(self):
        """The kernels.backend.Backend the model runs on (the guard's kernels run there too)."""
        return self._kernels

    def _pairs_of_links(self) -> List[Tuple[int, int]]:
        pairs = []
        for i in range(len(self._robot)):
            for j in range(i + 1, len(self._robot)):
                a, b = self.bodies[self._robot[i][0]], self.bodies[self._robot[j][0]]
                if a is b or (self.still[i] and self.still[j]):
                    continue
                if frozenset((a.link, b.link)) in self.disabled:
                    continue
                pairs.append((i, j))
        return pairs

    def copy(self) -> 'CollisionModel':
        """Return a model of the same shapes, pairs, obstacles and backend, sharing no state.

        For another thread (ik_node.core.motion.worker): distance queries set
        coal transforms and caches in place.
        """
        twin = CollisionModel(self.chain, self.bodies, [tuple(p) for p in self.disabled],
                              self._kernels.name, self.movable)
        twin.set_obstacles(self._obstacles)
        twin.undriven = self.undriven   # where its movable links are (a placer, read only)
        return twin

    def move_bodies(self, offsets: Mapping[str, FloatArray]) -> None:
        """Place links of ``movable`` at new offsets (4, 4) in their frames (link -> offset).

        Links undriven joints move (another arm, a head): their shapes, bounding
        spheres and arms follow; the pairs stay. Whoever holds distances of
        this model sees ``revision`` change (a guard forgets its bounds, as
        for an obstacle added at run time).
        """
        changed = False
        for k, body in enumerate(self.bodies):
            offset = offsets.get(body.link)
            if offset is None or body.link not in self.movable:
                continue
            self.bodies[k] = Body(body.link, body.frame, np.array(offset, dtype=np.float64),
                                  body.shapes)
            changed = True
        if not changed:
            return
        self._robot = [(k, shape, self.bodies[k].offset @ shape.pose)
                       for k, shape, _ in self._robot]
        self._local = np.array([p for _, _, p in self._robot]).reshape(-1, 4, 4)
        spheres = [s.bounding_sphere() for _, s, _ in self._robot]
        self._centre = np.array([self.bodies[k].offset[:3, :3] @ c + self.bodies[k].offset[:3, 3]
                                 for (k, _, _), (c, _) in zip(self._robot, spheres)]
                                ).reshape(-1, 3)
        self._arms = self._shape_arms()
        self.sweep = self._sweep_matrix()
        self.revision += 1

    def disable(self, links: Iterable[Tuple[str, str]]) -> None:
        """Never check these pairs of links (either order) from now on."""
        self.disabled |= {frozenset(p) for p in links}
        self._self_pairs = self._pairs_of_links()
        self._rebuild_world()

    def set_obstacles(self, obstacles: Mapping[str, Sequence[Shape]]) -> None:
        """Replace the world: obstacle name -> shapes posed in the base frame."""
        self._obstacles = {name: tuple(shapes) for name, shapes in obstacles.items()}
        self._rebuild_world()

    @property
    def obstacles(self) -> Dict[str, Tuple[Shape, ...]]:
        """The world: obstacle name -> its shapes, base frame."""
        return dict(self._obstacles)

    def _rebuild_world(self) -> None:
        coal = self._coal
        self._world: List[Tuple[str, Shape]] = [(name, s) for name, shapes in
                                                sorted(self._obstacles.items()) for s in shapes]
        self._world_geoms = [coal_geometry(s) for _, s in self._world]
        self._world_tf = [coal.Transform3s(s.pose[:3, :3].copy(), s.pose[:3, 3].copy())
                          for _, s in self._world]
        moving = [i for i in range(len(self._robot)) if not self.still[i]]
        world_pairs = [(i, len(self._robot) + w) for w in range(len(self._world)) for i in moving]
        self.pairs: List[Tuple[int, int]] = self._self_pairs + world_pairs
        # Per pair: coal's (geometry, transform) of both shapes (a robot shape's
        # transform is set in place by _exact), and the robot shapes to pose.
        sides = [(self._geoms[i], self._tf[i]) for i in range(len(self._robot))]
        sides += list(zip(self._world_geoms, self._world_tf))
        self._coal_pairs = [sides[i] + sides[j] for i, j in self.pairs]
        self._pair_shapes = [(i,) if j >= len(self._robot) else (i, j) for i, j in self.pairs]
        self._pa = np.array([p[0] for p in self.pairs], dtype=np.int64)
        self._pb = np.array([p[1] for p in self.pairs], dtype=np.int64)
        centres, radii, planes = [], [], []
        for _, s in self._world:
            c, r = s.bounding_sphere()
            centres.append(c)
            radii.append(r)
            planes.append(s.kind == 'halfspace')
        self._w_centre = np.array(centres).reshape(-1, 3)
        self._w_radius = np.array(radii)
        self._w_plane = np.array(planes, dtype=bool)
        self._w_normal = np.array([s.pose[:3, 2] for _, s in self._world]).reshape(-1, 3)
        self._w_offset = np.array([float(s.pose[:3, 2] @ s.pose[:3, 3]) for _, s in self._world])
        self._sides = self._sweep_sides()
        self.sweep = self._sweep_matrix()
        # No distance known of any pair (distances' ``known`` when none is given).
        self._unknown = np.full(len(self.pairs), -math.inf)
        self.revision += 1

    def _shape_arms(self) -> FloatArray:
        """Return (S, M): how far FK joint k's turning by 1 rad can move shape s's points, m.

        The joint-to-shape reach (the spans between, ``Chain.joint_spans``,
        then the shape's bounding sphere) for a revolute joint, 1 for a
        prismatic one (m per m), 0 for a joint that does not move the shape's
        frame (after it, or on another branch of a tree).
        """
        reach = np.concatenate([[0.0], self.tree.reach])   # reach[f + 1]: base to frame f
        extent = np.linalg.norm(self._centre, axis=1) + self._radius     # (S,)
        k = np.arange(self.tree.movable)
        arm = (reach[self._frame + 1][:, None] - reach[k + 1][None, :]) + extent[:, None]
        arm[:, self._prismatic] = 1.0
        moves = np.zeros((len(self._frame), len(k)), dtype=bool)
        on = self._frame >= 0
        moves[on] = self.tree.ancestor[:, self._frame[on]].T
        return np.where(moves, arm, 0.0)

    def _sweep_matrix(self) -> FloatArray:
        """Return (P, n): how far pair p's two shapes may move toward each other per joint travel.

        For a joint path whose joint i travels at most ``dq_i`` (rad, or m),
        ``sweep @ dq`` bounds (m) how much each pair's distance can change on it.
        A world pair moves with every joint that moves its robot shape; two
        robot shapes only with the joints that move one and not the other
        (the joints before both move them rigidly together): on one chain the
        later shape's frames after the earlier one's, on a tree (two arms)
        each arm's own, by the shapes' arms (``_shape_arms``). Mimic joints
        count through their multipliers.
        """
        rows = np.zeros((len(self.pairs), self.tree.movable))
        for p, (side, mask) in enumerate(self._side_masks()):
            for s, counted in zip(side, mask):
                rows[p] += np.where(counted, self._arms[s], 0.0)
        return rows @ np.abs(self._to_free)

    def _side_masks(self):
        """Yield per pair (its robot shapes, per shape (M,) the frames whose motion counts)."""
        n_robot, anc = len(self._robot), self.tree.ancestor
        none = np.zeros(self.tree.movable, dtype=bool)
        for i, j in self.pairs:
            fi = self._frame[i]
            if j >= n_robot:
                yield (i,), (anc[:, fi] if fi >= 0 else none,)
                continue
            fj = self._frame[j]
            on_i = anc[:, fi] if fi >= 0 else none
            on_j = anc[:, fj] if fj >= 0 else none
            yield (i, j), (on_i & ~on_j, on_j & ~on_i)

    def _sweep_sides(self) -> Tuple[npt.NDArray[np.int64], ...]:
        """Return (side_a, start_a, side_b, start_b) (P,) each: path_sweep's pair tables.

        Per pair, each robot shape and the frame nearest the base on its path
        whose motion counts (``_side_masks``; M: none); side_b -1 for an obstacle.
        """
        m = self.tree.movable
        count = len(self.pairs)
        side_a, side_b = np.zeros(count, dtype=np.int64), np.full(count, -1, dtype=np.int64)
        start_a, start_b = np.full(count, m, dtype=np.int64), np.full(count, m, dtype=np.int64)
        depth = self.tree.ancestor.sum(axis=0)   # frames on each frame's path
        for p, (side, mask) in enumerate(self._side_masks()):
            for k, (s, counted) in enumerate(zip(side, mask)):
                frames = np.flatnonzero(counted)
                first = int(frames[np.argmin(depth[frames])]) if len(frames) else m
                if k == 0:
                    side_a[p], start_a[p] = s, first
                else:
                    side_b[p], start_b[p] = s, first
        return side_a, start_a, side_b, start_b

    def path_sweep(self, q, travel: FloatArray) -> FloatArray:
        """Return (P, n) a sweep matrix for one joint path from q: ``sweep`` made tighter there.

        On a path from q (n,) on which free joint i travels at most
        ``travel[i]`` (rad, or m; any path), ``path_sweep(q, travel) @ travel``
        bounds each pair's distance change (m), as ``sweep @ travel`` does for
        any path; entry by entry it is at most ``sweep``. Each arm is the
        shape's distance from the joint's axis at q, plus how far the joints
        between may move it on the path (kernels.proximity.path_sweep).
        """
        travel = np.ascontiguousarray(travel, dtype=np.float64)
        out = np.empty((len(self.pairs), self.chain.n))
        side_a, start_a, side_b, start_b = self._sides
        self._kernels.proximity.path_sweep(
            self._frames_of(q), self._axes, self._prismatic, self._frame, self._parent,
            self._centre, self._radius, self._arms, side_a, start_a, side_b, start_b,
            self._to_free, travel, out)
        return out

    def pair_names(self, k: int) -> Tuple[str, str]:
        """Return the two names of checked pair k: link names, or a link and an obstacle."""
        i, j = self.pairs[k]
        return self._name(i), self._name(j)

    def self_pair_names(self) -> List[frozenset]:
        """Return the robot's own checked pairs as frozensets of two link names."""
        return [frozenset((self._name(i), self._name(j))) for i, j in self._self_pairs]

    def pair_shapes(self, k: int) -> Tuple[Tuple[str, int], Tuple[str, int]]:
        """Return checked pair k as ((name, shape index), (name, shape index)).

        The index counts the link's ``<collision>`` elements (or an
        obstacle's shapes) in the order given.
        """
        i, j = self.pairs[k]
        return (self._name(i), self._index(i)), (self._name(j), self._index(j))

    def _index(self, i: int) -> int:
        if i < len(self._robot):
            body = self._robot[i][0]
            return sum(1 for b, _, _ in self._robot[:i] if b == body)
        name = self._world[i - len(self._robot)][0]
        return sum(1 for n, _ in self._world[:i - len(self._robot)] if n == name)

    def _name(self, i: int) -> str:
        if i < len(self._robot):
            return self.bodies[self._robot[i][0]].link
        return self._world[i - len(self._robot)][0]

    # -- kinematics ------------------------------------------------------------

    def _frames_of(self, q):
        """Return the joint frames at q, (M, 12) rows (rotation row-major, origin), cached.

        An array whichever backend ran (the CPython kernel writes 12-tuples);
        the last few q are kept.
        """
        q = np.asarray(q, dtype=np.float64)
        key = q.tobytes()
        frames = self._frame_cache.get(key)
        if frames is None:
            frames = self.tree.frame_rows(self._kernels, self._fks, q)
            if len(self._frame_cache) >= 4:
                self._frame_cache.pop(next(iter(self._frame_cache)))
            self._frame_cache[key] = frames
        return frames

    def shape_poses(self, q) -> Tuple[FloatArray, FloatArray]:
        """Return the robot shapes' rotations (S, 3, 3) and positions (S, 3), base frame, at q."""
        return self._broad_phase(q)[:2]

    def _broad_phase(self, q) -> Tuple[FloatArray, FloatArray, FloatArray,
                                       Tuple[FloatArray, FloatArray]]:
        """Return shape poses, pair bounds and sphere centres at joints q (n,), base frame.

        The shapes' rotations (S, 3, 3) and positions (S, 3), m; every pair's
        distance bound (P,), m; the pairs' sphere centres ((P, 3), (P, 3)).

        One kernel call (kernels.proximity.posed_bounds).
        """
        shapes, count = len(self._robot), len(self.pairs)
        rot, pos = np.empty((shapes, 3, 3)), np.empty((shapes, 3))
        bound, ca, cb = np.empty(count), np.empty((count, 3)), np.empty((count, 3))
        self._kernels.proximity.posed_bounds(
            self._frames_of(q), self._frame, self._local, self._centre, self._radius,
            self._w_centre, self._w_radius, self._w_plane, self._w_normal, self._w_offset,
            self._pa, self._pb, rot, pos, bound, ca, cb)
        return rot, pos, bound, (ca, cb)

    def distances(self, q, threshold, exact=None, floors=None) -> PairDistances:
        """Return checked pairs closer than ``threshold`` (m) at joints q (n,), and witnesses.

        ``threshold`` and ``exact``: scalars or (P,) per checked pair. Pairs
        whose bounding spheres are closer than ``exact`` (default: the
        threshold) get coal's exact distance; the others below the threshold
        get their bounding spheres' distance (a lower bound of the exact one)
        and the spheres' nearest points and normal, for far pairs judged
        coarsely at a twentieth of the cost. ``floors``: None, or (P,) a
        lower bound of each pair's distance at q that the caller holds, m
        (-inf: none; ``known_floors`` of distances computed elsewhere): a
        pair it keeps at least the threshold away is left out. What is
        returned for a pair listed does not depend on ``floors``; the
        ``floors`` of the others (and ``lowest``) may be the tighter for it.
        """
        rot, pos, bound, centres = self._broad_phase(q)
        count = len(bound)
        threshold = _per_pair(threshold, count)
        exact = threshold if exact is None else _per_pair(exact, count)
        known = self._unknown if floors is None else np.ascontiguousarray(floors,
                                                                          dtype=np.float64)
        floors_out = np.empty(count)
        near, fine = np.empty(count, dtype=np.int64), np.empty(count, dtype=bool)
        k = self._kernels.proximity.near_pairs(bound, known, threshold, exact, near, fine,
                                               floors_out)
        near, fine = near[:k], fine[:k]
        if not len(near):   # free: the bounds are the answer (most queries of a tick)
            return PairDistances(near, np.empty(0), NO_POINTS, NO_POINTS, NO_POINTS, NO_ROWS,
                                 floors_out)
        dist, pa, pb, nrm = self._exact(near, fine, rot, pos, centres, bound)
        floors_out[near[fine]] = dist[fine]
        return PairDistances(near, dist, pa, pb, nrm, fine, floors_out)

    def _exact(self, near, fine, rot, pos, centres, bound
               ) -> Tuple[FloatArray, FloatArray, FloatArray, FloatArray]:
        """Return distances (K,) and points a, b and normals (K, 3) of pairs ``near`` (K,).

        Rows where ``fine`` (K,) is set get coal's exact answer, the others
        their bounding spheres' (``bound`` (P,), ``centres``: kernels.proximity.sphere_witnesses).
        ``rot`` (S, 3, 3), ``pos`` (S, 3): the robot shapes' poses, base
        frame. Each shape's transform is set once per call. coal.distance
        starts every query afresh: the same configuration always gets the
        same answer (a reused ComputeDistance warm-starts from its last
        query, and answers differed by 8e-8 m on a hull).
        """
        distance, request, result = self._coal.distance, self._request, self._result
        k = len(near)
        dist = bound[near]
        witnesses = np.empty((k, 9))   # rows: point a, point b, normal
        rows = np.flatnonzero(fine)
        pairs = near[rows].tolist()
        # Each robot shape's transform, set in place once per call.
        posed = set()
        for p in pairs:
            posed.update(self._pair_shapes[p])
        for shape in posed:
            self._tf[shape].setTransform(rot[shape], pos[shape])
        coal_pairs = self._coal_pairs
        point_a, point_b = result.getNearestPoint1, result.getNearestPoint2
        for row, p in zip(rows.tolist(), pairs):
            geom_a, tf_a, geom_b, tf_b = coal_pairs[p]
            result.clear()
            dist[row] = distance(geom_a, tf_a, geom_b, tf_b, request, result)
            witnesses[row, 0:3] = point_a()
            witnesses[row, 3:6] = point_b()
            witnesses[row, 6:9] = result.normal
        if len(rows) < k:
            coarse = ~fine
            spheres = np.empty((k - len(rows), 9))
            self._kernels.proximity.sphere_witnesses(
                near[coarse], centres[0], centres[1], self._radius, self._w_radius,
                self._w_plane, self._w_normal, self._w_offset, self._pa, self._pb, spheres)
            witnesses[coarse] = spheres
        return dist, witnesses[:, 0:3], witnesses[:, 3:6], witnesses[:, 6:9]

    def gradients(self, q, near: PairDistances) -> FloatArray:
        """Return (K, n): each near pair's d(distance)/dq at q (rad^-1 m; m/m for prismatic).

        The nearest points move with their shapes; the distance grows at the
        rate ``normal . (v_b - v_a)`` (normal from a toward b): one kernel call
        (kernels.proximity.distance_gradients), mimic joints through their
        multipliers.
        """
        k = len(near.pairs)
        grads = np.empty((k, self.chain.n))
        if k:
            self._kernels.proximity.distance_gradients(*self._gradient_args(q, near), grads)
        return grads

    def gradients_and_dip(self, q, near: PairDistances, v1: FloatArray, a_max: FloatArray
                          ) -> Tuple[FloatArray, FloatArray]:
        """Return each near pair's gradient (K, n) at q and its braking dip (K,), m.

        :meth:`gradients` and the lowest linearised distance change while
        braking from joint velocities v1 (n,) rad/s at limits a_max (n,)
        rad/s^2, in one kernel call (kernels.proximity.gradients_and_dip).
        """
        k = len(near.pairs)
        grads, dip = np.empty((k, self.chain.n)), np.empty(k)
        if k == 0:
            return grads, dip
        self._kernels.proximity.gradients_and_dip(
            *self._gradient_args(q, near), np.ascontiguousarray(v1, dtype=np.float64),
            np.ascontiguousarray(a_max, dtype=np.float64), grads, dip)
        return grads, dip

    def _gradient_args(self, q, near: PairDistances) -> tuple:
        """Return the gradient kernels' arguments for pairs ``near`` at q.

        The witnesses are passed C-contiguous whatever made them (the exact
        query's are column slices of one array, a merge's are whole arrays):
        numba compiles one machine code per array layout, and a layout the
        warm-up did not pass was loaded from its cache inside a tick (8 ms).
        """
        c = np.ascontiguousarray
        return (self._frames_of(q), self._axes, self._prismatic, self._frame, self._ancestor,
                self._pa, self._pb, near.pairs, c(near.point_a), c(near.point_b), c(near.normal),
                self._to_free)

    def robot_shapes(self, q) -> List[Tuple[str, Shape, FloatArray]]:
        """Return (link, shape, (4, 4) pose in the base frame) of every robot shape at q."""
        rot, pos = self.shape_poses(q)
        out = []
        for s, (k, shape, _) in enumerate(self._robot):
            pose = np.eye(4)
            pose[:3, :3], pose[:3, 3] = rot[s], pos[s]
            out.append((self.bodies[k].link, shape, pose))
        return out


def _per_pair(value, count: int) -> FloatArray:
    """Return a threshold (m) as (count,) contiguous float64: a scalar repeated, an array as is."""
    if isinstance(value, np.ndarray) and value.ndim == 1:
        return np.ascontiguousarray(value, dtype=np.float64)
    return np.full(count, float(value))
