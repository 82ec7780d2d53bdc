# SPDX-License-Identifier: Apache-2.0

"""The movable joint frames of one chain, or of several chains from one base, as one tree.

A collision model poses links on joint frames and bounds how far each
joint's motion can move them. On one chain the frames form a path (frame
m moves every frame after it); two arms on a torso form a tree: the torso's
frames move both arms, the left arm's frames never move the right's. A
:class:`FrameTree` holds the frames once each (a shared prefix, such as a
torso's joints, once), each frame's parent, which frames move which
(``ancestor``), and how the frames follow the free joints (``to_free``):
what :class:`ik_node.core.collision.model.CollisionModel` needs to be exact
on a tree as on a chain.

Frames are rows of 12 (rotation row-major, origin), base frame; joints (n,)
in the owner's order (a chain's, or a JointUnion's); metres and radians.
"""

from typing import List, Sequence

from ik_node.core.model.chain import Chain
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Two chains' frames at the same joint values this close (m, and rotation entries) are one frame.
SAME_FRAME = 1e-12
# Configurations at which a shared prefix is confirmed (seeded).
SHARE_SAMPLES = 3


class FrameTree:
    """The joint frames of chains from one base, each frame once (module docstring).

    Args:
        chains: the chains (one, or several from the same base link).
        columns: per chain, (n_k,) the owner's index of each of its joints.
        lower, upper: (n,) the owner's joint limits (for sampling).

    Attributes:
        n: the owner's joint count.
        movable: M, the frames.
        parent: (M,) each frame's parent frame (-1: the base).
        ancestor: (M, M) bool, ``ancestor[m, f]``: frame m's motion moves frame f
            (m is f, or before f on its path from the base).
        axes: (M, 3) each frame's joint axis in its own frame.
        prismatic: (M,) bool.
        to_free: (M, n) each frame's rate per owner's joint (mimic multipliers).
        reach: (M,) a bound of each frame origin's distance from the base, m
            (the joint spans along its path: Chain.joint_spans).
        places: per chain, (m_k,) the tree index of each of its frames.

    """

    def __init__(self, chains: Sequence[Chain], columns: Sequence[np.ndarray], lower, upper):
        """Join the chains' frames: each next chain's shared prefix once."""
        self.chains = list(chains)
        self.columns = [np.asarray(c, dtype=np.int64) for c in columns]
        self.lower = np.asarray(lower, dtype=np.float64)
        self.upper = np.asarray(upper, dtype=np.float64)
        self.n = len(self.lower)
        samples = self._samples()
        parent: List[int] = []
        owner: List[tuple] = []   # (chain, its frame index) of each tree frame
        self.places: List[np.ndarray] = []
        tables = [[c.frames(q[cols].tolist())[0] for q in samples]
                  for c, cols in zip(self.chains, self.columns)]
        for k, chain in enumerate(self.chains):
            place = []
            prev = -1
            sharing = k > 0   # a shared part is a prefix: from the base to where they part
            for j in range(chain.movable):
                shared = self._shared_frame(k, j, prev, parent, owner, tables) if sharing else -1
                sharing = shared >= 0
                if shared < 0:
                    shared = len(parent)
                    parent.append(prev)
                    owner.append((k, j))
                place.append(shared)
                prev = shared
            self.places.append(np.array(place, dtype=np.int64))
        self.movable = len(parent)
        self.parent = np.array(parent, dtype=np.int64)
        self._owner = owner
        self._build_tables()

    @classmethod
    def of_chain(cls, chain: Chain) -> 'FrameTree':
        """Return the tree of one chain: a path, frame m the parent of m + 1."""
        return cls([chain], [np.arange(chain.n)], chain.lower, chain.upper)

    def _samples(self) -> List[FloatArray]:
        rng = np.random.default_rng(7)
        lo = np.where(np.isfinite(self.lower), self.lower, -np.pi)
        hi = np.where(np.isfinite(self.upper), self.upper, np.pi)
        return [rng.uniform(lo, hi) for _ in range(SHARE_SAMPLES)]

    def _shared_frame(self, k: int, j: int, prev: int, parent, owner, tables) -> int:
        """Return the tree frame that chain k's frame j is (same parent, driver, pose), or -1."""
        chain, cols = self.chains[k], self.columns[k]
        fk = chain.fk_tables
        for t, (kk, jj) in enumerate(owner):
            if parent[t] != prev:
                continue
            other, other_cols = self.chains[kk], self.columns[kk]
            ofk = other.fk_tables
            if cols[fk.driver[j]] != other_cols[ofk.driver[jj]] or \
                    fk.prismatic[j] != ofk.prismatic[jj] or fk.mult[j] != ofk.mult[jj] or \
                    fk.offset[j] != ofk.offset[jj]:
                continue
            if all(np.allclose(mine[j], theirs[jj], rtol=0.0, atol=SAME_FRAME)
                   for mine, theirs in zip(tables[k], tables[kk])):
                return t
        return -1

    def _build_tables(self) -> None:
        m = self.movable
        self.axes = np.zeros((m, 3))
        self.prismatic = np.zeros(m, dtype=bool)
        self.to_free = np.zeros((m, self.n))
        self.reach = np.zeros(m)
        spans = [c.joint_spans() for c in self.chains]
        for t, (k, j) in enumerate(self._owner):
            fk = self.chains[k].fk_tables
            self.axes[t] = fk.axis[j]
            self.prismatic[t] = fk.prismatic[j]
            self.to_free[t, self.columns[k][fk.driver[j]]] = fk.mult[j]
            up = self.parent[t]
            self.reach[t] = (self.reach[up] if up >= 0 else 0.0) + spans[k][j]
        self.ancestor = np.zeros((m, m), dtype=bool)
        for f in range(m):
            a = f
            while a >= 0:
                self.ancestor[a, f] = True
                a = self.parent[a]
        # Per chain, its frames the tree holds from it (the others: an earlier chain's).
        self._own = [np.array([j for j in range(c.movable) if self._owner[p[j]] == (k, j)],
                              dtype=np.int64)
                     for k, (c, p) in enumerate(zip(self.chains, self.places))]

    @property
    def single(self) -> bool:
        """True for one chain (the frames are the chain's own, in its order)."""
        return len(self.chains) == 1

    def frames(self, q) -> tuple:
        """Return (frames, None, None): the tree's M frames at joints q (n,) as 12-tuples.

        As Chain.frames (the tip's pose left out: a tree has several).
        """
        q = np.asarray(q, dtype=np.float64)
        out: list = [None] * self.movable
        for chain, cols, place, own in zip(self.chains, self.columns, self.places, self._own):
            table = chain.frames(q[cols].tolist())[0]
            for j in own.tolist():
                out[int(place[j])] = table[j]
        return out, None, None

    def fk(self, kernels) -> list:
        """Return each chain's kinematic tables as ``kernels`` take them."""
        return [kernels.fk(c) for c in self.chains]

    def frame_rows(self, kernels, fks, q) -> FloatArray:
        """Return the M frames (M, 12) at joints q (n,) by ``kernels`` (fks: :meth:`fk`'s)."""
        if self.single:
            rows = kernels.rows(self.movable, 12)
            kernels.base.chain_frames(kernels.arg(q), fks[0], rows)
            return rows if kernels.compiled else np.array(rows, dtype=np.float64).reshape(-1, 12)
        out = np.empty((self.movable, 12))
        for chain, cols, place, own, fk in zip(self.chains, self.columns, self.places,
                                               self._own, fks):
            rows = kernels.rows(chain.movable, 12)
            kernels.base.chain_frames(kernels.arg(np.ascontiguousarray(q[cols])), fk, rows)
            if not kernels.compiled:
                rows = np.array(rows, dtype=np.float64).reshape(-1, 12)
            out[place[own]] = rows[own]
        return out


def frame_tree_of(owner) -> FrameTree:
    """Return the FrameTree of a Chain (one path, built once) or of a JointUnion (its own)."""
    if isinstance(owner, Chain):
        tree = owner.__dict__.get('_frame_tree')
        if tree is None:
            tree = owner.__dict__['_frame_tree'] = FrameTree.of_chain(owner)
        return tree
    return owner.frame_tree
