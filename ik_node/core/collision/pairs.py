# SPDX-License-Identifier: Apache-2.0

"""Which pairs of shapes a collision model checks: the rules, and how links hang on the chain.

Never checked: links that are one rigid body or adjacent through one
movable joint (:func:`never_checked`), shapes no joint moves
(:func:`still_shapes`), pairs an SRDF disables (:func:`check_disabled`) and
pairs in contact in every sampled configuration (:func:`always_in_contact`).
:func:`attachment` finds the joint frame a link is fixed to. Frames and
poses are in the chain's base frame, metres and radians.
"""

import math
from typing import Dict, Iterable, List, Optional, Sequence, Tuple, Union

from ik_node.core.collision.shapes import CollisionError
from ik_node.core.model.chain import Chain
from ik_node.core.model.tree import FrameTree
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Link poses relative to a joint frame equal to this (m, rad) count as rigid.
RIGID_TOL = 1e-6
# Configurations sampled for the always-in-contact pairs (seeded, at start-up).
CONTACT_SAMPLES = 300
# Configurations compared to find the shapes no joint moves (still_shapes).
STILL_SAMPLES = 6


def still_shapes(chain: Union[Chain, FrameTree], frame: npt.NDArray[np.int64], local: FloatArray,
                 kinds: Sequence[str], samples: int = STILL_SAMPLES) -> npt.NDArray[np.bool_]:
    """Return (S,) True for each shape whose place in the base frame no joint motion changes.

    Such a shape's distance to an obstacle (or to another such shape) is the
    same in every configuration: the arm can neither open nor close it, so
    the pair is never checked (a base sphere 75 mm inside the floor would
    hold every configuration "in collision"). A shape is still when, at
    seeded configurations within the limits, its pose (a sphere: its centre;
    a cylinder: its centre and its axis, either way) stays within RIGID_TOL.

    Args:
        chain: the chain, or the FrameTree of several (frames(q) of its joints).
        frame: (S,) each shape's joint frame index (-1: the base frame).
        local: (S, 4, 4) each shape's pose in that frame.
        kinds: (S,) each shape's kind (shapes.KINDS).
        samples: configurations compared.

    """
    rng = np.random.default_rng(2)
    lower = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    upper = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    still = frame < 0
    if np.all(still):
        return still
    poses = []
    for _ in range(samples):
        table = np.array(chain.frames(rng.uniform(lower, upper).tolist())[0]).reshape(-1, 12)
        f = np.tile(np.eye(4), (len(table) + 1, 1, 1))
        f[1:, :3, :3] = table[:, :9].reshape(-1, 3, 3)
        f[1:, :3, 3] = table[:, 9:]
        poses.append(f[frame + 1] @ local)
    first = poses[0]
    for s, kind in enumerate(kinds):
        if still[s]:
            continue
        same = True
        for pose in poses[1:]:
            same = same and bool(np.allclose(pose[s, :3, 3], first[s, :3, 3], atol=RIGID_TOL))
            if kind == 'cylinder':
                same = same and abs(float(pose[s, :3, 2] @ first[s, :3, 2])) >= 1.0 - RIGID_TOL
            elif kind != 'sphere':
                same = same and bool(np.allclose(pose[s, :3, :3], first[s, :3, :3],
                                                 atol=RIGID_TOL))
        still[s] = same
    return still


def always_in_contact(model, samples: int = CONTACT_SAMPLES,
                      seed: int = 0) -> List[Tuple[str, str]]:
    """Return the self pairs of links of ``model`` (a CollisionModel) in contact when sampled.

    Configurations are uniform within the joint limits (continuous joints
    over one turn), seeded: the same model gives the same answer.
    """
    chain = model.chain
    lower = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    upper = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    rng = np.random.default_rng(seed)
    candidates = set(model.self_pair_names())
    for _ in range(samples):
        if not candidates:
            break
        near = model.distances(rng.uniform(lower, upper), 0.0)
        touching = {frozenset(model.pair_names(p)) for p, d in zip(near.pairs, near.distance)
                    if d <= 0.0}
        candidates &= touching
    return sorted(tuple(sorted(p)) for p in candidates)


def attachment(chain: Union[Chain, FrameTree], pose_of, link: str,
               rng=None) -> Optional[Tuple[int, FloatArray]]:
    """Return (joint frame index or -1, (4, 4) offset) fixing ``link`` to the chain.

    Args:
        chain: the chain, or the FrameTree of several (frames(q) of its joints).
        pose_of: function (link, q) -> (4, 4) pose of the link in the base frame.
        link: the link.
        rng: numpy Generator of the three test configurations (default seeded).

    Returns None when no joint frame holds the link rigidly (the link moves
    with joints the chain does not drive).
    """
    rng = rng or np.random.default_rng(1)
    lower = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    upper = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    qs = [rng.uniform(lower, upper) for _ in range(3)]
    poses = [pose_of(link, q) for q in qs]
    frames = []
    for q in qs:
        table, _, _ = chain.frames(q.tolist())
        frames.append(table)
    for m in range(-1, chain.movable):
        offsets = []
        for table, pose in zip(frames, poses):
            f = np.eye(4)
            if m >= 0:
                f[:3, :3] = np.array(table[m][:9]).reshape(3, 3)
                f[:3, 3] = table[m][9:]
            offsets.append(np.linalg.solve(f, pose))
        if all(np.allclose(o, offsets[0], atol=RIGID_TOL) for o in offsets[1:]):
            return m, offsets[0]
    return None


def rigid_groups(parents: Dict[str, Tuple[str, str]]) -> Dict[str, str]:
    """Map each link to a representative of the links joined to it by fixed joints only.

    Args:
        parents: child link -> (parent link, joint type).

    """
    def root(link: str) -> str:
        while link in parents and parents[link][1] == 'fixed':
            link = parents[link][0]
        return link
    links = set(parents) | {p for p, _ in parents.values()}
    return {link: root(link) for link in links}


def never_checked(parents: Dict[str, Tuple[str, str]]) -> List[Tuple[str, str]]:
    """Return link pairs that are one rigid body or adjacent through one movable joint."""
    group = rigid_groups(parents)
    members: Dict[str, List[str]] = {}
    for link, g in group.items():
        members.setdefault(g, []).append(link)
    pairs = []
    for g, links in members.items():
        pairs += [(a, b) for a in links for b in links if a < b]
        up = parents.get(g)
        if up is not None:   # g's group hangs from up's group by one movable joint
            pairs += [(a, b) for a in links for b in members[group[up[0]]]]
    return pairs


def check_disabled(model_links: Iterable[str], pairs: Iterable[Tuple[str, str]],
                   source: str) -> List[Tuple[str, str]]:
    """Return the pairs after checking both links exist; CollisionError names an unknown one."""
    known = set(model_links)
    out = []
    for a, b in pairs:
        for name in (a, b):
            if name not in known:
                raise CollisionError(f'{source}: link {name!r} in <disable_collisions> is not a '
                                     f'link of the robot description')
        out.append((a, b))
    return out
