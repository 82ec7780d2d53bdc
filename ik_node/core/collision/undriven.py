# SPDX-License-Identifier: Apache-2.0

"""Links the node does not drive (another arm, a head, fingers), placed where their joints are.

A link whose path from the base holds joints outside the driven chains
hangs on the frame of its last driven joint (-1: the base), with an offset
that those other joints set. :class:`UndrivenLinks` knows each such link's
path (a Chain from the base: its driven joints, taken from the driven
joints' values, and its undriven ones, taken from ``values``), finds the
frame it hangs on, and gives its offset for the current values: the
collision model places the link there (CollisionModel.move_bodies). Values
start at each joint's zero (clipped into its limits) and follow the robot's
joint states where they are read (:meth:`UndrivenLinks.take`).

Poses (4, 4) in the base frame; joints in the owner's order (a chain's or a
JointUnion's), rad or m.
"""

from typing import Dict, List, Optional, Sequence, Tuple

from ik_node.core.collision.pairs import attachment
from ik_node.core.model.chain import Chain
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# An undriven joint that moved less than this (rad or m) leaves its links where they are.
MOVED = 1e-3


class UndrivenLinks:
    """Links moved by joints the node does not drive (module docstring).

    Args:
        paths: link -> its Chain from the base link.
        driven: the owner's joint names (a chain's, or a union's), its order.

    Attributes:
        joints: the undriven joints' names, sorted.
        values: name -> value (rad or m) they are placed at.
        frames: link -> the tree frame it hangs on (-1: the base), once placed.

    """

    def __init__(self, paths: Dict[str, Chain], driven: Sequence[str]):
        """Sort each path's joints into driven and not; undriven ones at their zero."""
        index = {name: k for k, name in enumerate(driven)}
        self.paths = dict(paths)
        self._columns = {link: np.array([index.get(n, -1) for n in chain.joint_names])
                         for link, chain in self.paths.items()}
        self.values: Dict[str, float] = {}
        for chain in self.paths.values():
            for name, lo, hi in zip(chain.joint_names, chain.lower, chain.upper):
                if name not in index:
                    self.values[name] = float(np.clip(0.0, lo, hi))
        self.joints = sorted(self.values)
        self._limits = {name: (float(lo), float(hi)) for chain in self.paths.values()
                        for name, lo, hi in zip(chain.joint_names, chain.lower, chain.upper)
                        if name in self.values}
        self.frames: Dict[str, int] = {}

    def pose(self, link: str, q) -> FloatArray:
        """Return where the link is, (4, 4) base frame, at owner joints q and the values."""
        chain, cols = self.paths[link], self._columns[link]
        q = np.asarray(q, dtype=np.float64)
        joints = np.array([q[c] if c >= 0 else self.values[n]
                           for c, n in zip(cols, chain.joint_names)])
        return chain.forward(joints)

    def attach(self, tree, link: str) -> Optional[Tuple[int, FloatArray]]:
        """Return (frame, offset) the link hangs on in ``tree`` (FrameTree), or None."""
        found = attachment(tree, self.pose, link)
        if found is not None:
            self.frames[link] = found[0]
        return found

    def offsets(self, tree, q) -> Dict[str, FloatArray]:
        """Return link -> its offset (4, 4) in its frame for the current values, at joints q."""
        rows = np.array(tree.frames(np.asarray(q, dtype=np.float64))[0], dtype=np.float64)
        out: Dict[str, FloatArray] = {}
        for link, frame in self.frames.items():
            pose = self.pose(link, q)
            if frame < 0:
                out[link] = pose
                continue
            f = np.eye(4)
            f[:3, :3] = rows[frame, :9].reshape(3, 3)
            f[:3, 3] = rows[frame, 9:]
            out[link] = np.asarray(np.linalg.solve(f, pose), dtype=np.float64)
        return out

    def take(self, names: Sequence[str], positions: Sequence[float]) -> bool:
        """Take the undriven joints' values from a joint state; True when one moved (MOVED).

        Values not finite are ignored; each is clipped into its joint's limits.
        """
        moved = False
        for name, value in zip(names, positions):
            if name not in self.values or not np.isfinite(value):
                continue
            lo, hi = self._limits[name]
            value = float(np.clip(value, lo, hi))
            if abs(value - self.values[name]) > MOVED:
                self.values[name] = value
                moved = True
        return moved

    def summary(self) -> List[str]:
        """Return the placed links' names, sorted."""
        return sorted(self.frames)
