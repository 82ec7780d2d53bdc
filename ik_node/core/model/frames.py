# SPDX-License-Identifier: Apache-2.0

"""Poses of the robot model's links in the base frame, at the chain's current joints.

Targets, twists and poles may be given in any link of the loaded robot
description. A link is either static in the base frame (only fixed joints
between them: a world or table link above the base, a camera bolted to the
base) or moved by the chain's own joints (a link of the arm, a tool frame);
a link that other joints move (a gripper finger, another arm) has no pose
ik_node can know and is refused with the reason. ``ik_node.description.urdf.link_frames``
builds this from the URDF; nothing here parses anything.
"""

from dataclasses import dataclass
import re
from typing import Dict, List, Optional, Sequence

from ik_node.core.errors import InvalidInputError
from ik_node.core.model.chain import Chain
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# How many valid frame names an error message lists.
SHOWN = 8

# The joint a refusal names first (every reason starts "joint 'name' ...").
_CAUSE = re.compile(r"joint '([^']*)'")


class FrameError(InvalidInputError):
    """A frame that is not a link of the model, or whose pose ik_node cannot know."""


@dataclass(frozen=True, eq=False)
class LinkFrame:
    """How one link's pose in the base frame follows from the chain's joints.

    Attributes:
        link: the link's name.
        offset: (4, 4) pose, in the base frame, of the frame the sub-chain
            starts from (the base itself when the link is below it).
        chain: None for a static link (its pose is ``offset``); else the chain
            from that frame to the link's last moving joint, whose free joints
            are chain joints.
        joints: indices, in the main chain's joint order, of the joints that
            drive ``chain``'s free joints.
        tail: (4, 4) fixed pose of the link in the frame at the end of
            ``chain`` (None: the identity).
        scale, shift: per free joint of ``chain``, its value is
            ``scale * q[joints] + shift`` (1 and 0 for a chain joint; a mimic
            of one: its multiplier and offset).

    """

    link: str
    offset: FloatArray
    chain: Optional[Chain] = None
    joints: Sequence[int] = ()
    tail: Optional[FloatArray] = None
    scale: Sequence[float] = ()
    shift: Sequence[float] = ()

    @property
    def static(self) -> bool:
        """True when no joint moves this link relative to the base."""
        return self.chain is None


class LinkFrames:
    """The links of one robot model, resolvable to poses in the chain's base frame.

    Args:
        base_link: the chain's base link (its own pose is the identity).
        frames: the links that can be resolved, by name.
        refused: the links that cannot, with the reason, by name.

    """

    def __init__(self, base_link: str, frames: Dict[str, LinkFrame], refused: Dict[str, str]):
        """Keep the resolvable links and the reasons for the others."""
        self.base_link = base_link
        self._frames = dict(frames)
        self._refused = dict(refused)

    def names(self) -> List[str]:
        """Return the links whose poses can be resolved, sorted."""
        return sorted(self._frames)

    def refused(self) -> Dict[str, str]:
        """Return the links whose poses cannot be resolved, each with the reason."""
        return dict(self._refused)

    def summary(self) -> str:
        """One line for the start-up log: how many links are target frames, why not the rest.

        The refused links are told by the joints that move them (a gripper's,
        another arm's, a mobile base's), the first few of them named.
        """
        total = len(self._frames) + len(self._refused) + (self.base_link not in self._frames)
        line = f'{total - len(self._refused)} of {total} links usable as target frames'
        if not self._refused:
            return line
        causes: Dict[str, int] = {}
        for reason in self._refused.values():
            match = _CAUSE.search(reason)
            cause = match.group(1) if match else reason
            causes[cause] = causes.get(cause, 0) + 1
        named = ', '.join(sorted(causes)[:SHOWN]) + (', ...' if len(causes) > SHOWN else '')
        return (f'{line}; {len(self._refused)} not, moved by {len(causes)} joint(s) the chain '
                f'does not drive ({named})')

    def pose(self, link: str, q) -> FloatArray:
        """Pose (4, 4) of ``link`` in the base frame at chain joints q (n,).

        Raises:
            FrameError: not a link of the model (a few valid ones listed), or a
                link that joints other than the chain's move (the reason).

        """
        if link == '' or link == self.base_link:
            return np.eye(4)
        frame = self._frames.get(link)
        if frame is None:
            if link in self._refused:
                raise FrameError(f"frame '{link}': {self._refused[link]}")
            shown = ', '.join(self.names()[:SHOWN])
            more = ', ...' if len(self._frames) > SHOWN else ''
            raise FrameError(f"frame '{link}' is not a link of the robot model; valid frames "
                             f'include {shown}{more}')
        if frame.chain is None:
            return frame.offset
        values = np.asarray(q, dtype=np.float64)[list(frame.joints)] * np.asarray(frame.scale) \
            + np.asarray(frame.shift)
        pose = frame.offset @ frame.chain.forward(values)
        return pose if frame.tail is None else pose @ frame.tail


class UnionFrames:
    """The links of several chains from one base, resolvable at the joints of their union.

    A link is resolved by the first chain's LinkFrames that knows it (a link
    on the torso by the first arm's, a link of the right arm by the right
    arm's), at that chain's joints taken from the union's.

    Args:
        frames: each chain's LinkFrames, in the union's chain order.
        columns: per chain, (n_k,) the union index of each of its joints.

    """

    def __init__(self, frames: List[LinkFrames], columns: List[np.ndarray]):
        """Keep each chain's frames and joint columns."""
        self._frames = list(frames)
        self._columns = [np.asarray(c, dtype=np.int64) for c in columns]
        self.base_link = frames[0].base_link

    def names(self) -> List[str]:
        """Return the links whose poses can be resolved, sorted."""
        return sorted({name for f in self._frames for name in f.names()})

    def refused(self) -> Dict[str, str]:
        """Return the links no chain resolves, each with the first chain's reason."""
        known = set(self.names())
        return {link: reason for link, reason in self._frames[0].refused().items()
                if link not in known}

    def summary(self) -> str:
        """One line for the start-up log: how many links are target frames."""
        refused = self.refused()
        return (f'{len(self.names())} links usable as target frames, {len(refused)} not '
                f'(moved by joints no end effector drives)')

    def pose(self, link: str, q) -> FloatArray:
        """Pose (4, 4) of ``link`` in the base frame at union joints q (N,) (FrameError: none)."""
        q = np.asarray(q, dtype=np.float64)
        error = None
        for frames, cols in zip(self._frames, self._columns):
            try:
                return frames.pose(link, q[cols])
            except FrameError as exc:
                error = error or exc
        assert error is not None
        raise error
