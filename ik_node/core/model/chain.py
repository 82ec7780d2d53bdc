# SPDX-License-Identifier: Apache-2.0

"""Serial kinematic chains: forward kinematics and the geometric Jacobian.

A :class:`Chain` is the path of joints from a base link to a tip link, each
joint being a fixed transform (the URDF ``origin``) followed by a motion about
or along its axis. Fixed joints are folded into the transforms; mimic joints
follow a leader and are not free variables.

Frames: ``T_base_tip = chain.forward(q)`` is the pose of the tip link in the
base link frame (4x4, metres). The Jacobian is geometric, expressed in the
base frame, rows ``[linear velocity of the tip origin; angular velocity]``
(seed article on Jacobian IK: column ``a_i x (p - r_i)`` over ``a_i`` for a
revolute joint, ``a_i`` over ``0`` for a prismatic one).
"""

import dataclasses
from dataclasses import dataclass
import importlib
import math
from typing import List, Optional, Sequence, Tuple

from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.kernels import base as kernels
from ik_node.core.poses import pose_matrix
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]


def fields_equal(a, b):
    """Value equality of two records of one dataclass whose fields may be arrays.

    The generated ``==`` of a dataclass holding arrays raises (the truth value
    of an array is ambiguous); this compares arrays with np.array_equal and
    the other fields with ``==``. Records with it are unhashable.
    """
    if type(a) is not type(b):
        return NotImplemented
    for field in dataclasses.fields(a):
        x, y = getattr(a, field.name), getattr(b, field.name)
        if isinstance(x, np.ndarray) or isinstance(y, np.ndarray):
            if not np.array_equal(x, y):
                return False
        elif x != y:
            return False
    return True


MOVABLE_TYPES = ('revolute', 'continuous', 'prismatic')
JOINT_TYPES = MOVABLE_TYPES + ('fixed',)

# An axis shorter than this cannot be normalised meaningfully.
MIN_AXIS_NORM = 1e-9


@dataclass(frozen=True, eq=False)
class Joint:
    """One joint of a chain, as the URDF describes it.

    Attributes:
        name: joint name.
        type: 'revolute', 'continuous', 'prismatic' or 'fixed'.
        origin: (4, 4) transform from the parent link frame to the joint
            frame at zero joint value (URDF ``origin``), metres.
        axis: (3,) axis in the joint frame (normalised by the Chain).
        lower, upper: position limits, radians or metres; -inf / inf where
            unbounded (continuous joints).
        velocity: speed limit, rad/s or m/s; inf if not given.
        mimic: (leader joint name, multiplier, offset) when this joint
            follows another: ``value = multiplier * leader + offset``.

    """

    name: str
    type: str  # noqa: A003 - the URDF attribute's name
    origin: FloatArray
    axis: FloatArray
    lower: float = -math.inf
    upper: float = math.inf
    velocity: float = math.inf
    mimic: Optional[Tuple[str, float, float]] = None

    __eq__ = fields_equal
    __hash__ = None  # type: ignore[assignment]  # equal by value, arrays inside


def _check_joint(joint: Joint) -> Tuple[FloatArray, FloatArray]:
    """Validate one joint; return its origin and unit axis as float arrays."""
    if joint.type not in JOINT_TYPES:
        raise ModelError(f'joint {joint.name!r}: type {joint.type!r} is not supported; '
                         f'expected one of {", ".join(JOINT_TYPES)}')
    origin = np.asarray(joint.origin, dtype=np.float64)
    if origin.shape != (4, 4) or not np.all(np.isfinite(origin)):
        raise ModelError(f'joint {joint.name!r}: origin must be a finite 4x4 transform')
    axis = np.asarray(joint.axis, dtype=np.float64)
    if axis.shape != (3,) or not np.all(np.isfinite(axis)):
        raise ModelError(f'joint {joint.name!r}: axis must be 3 finite numbers, '
                         f'received {joint.axis!r}')
    if joint.type == 'fixed':
        return origin, axis
    norm = float(np.linalg.norm(axis))
    if norm < MIN_AXIS_NORM:
        raise ModelError(f'joint {joint.name!r}: axis {axis.tolist()} has zero length')
    for label, value in (('lower', joint.lower), ('upper', joint.upper),
                         ('velocity', joint.velocity)):
        if math.isnan(value):
            raise ModelError(f'joint {joint.name!r}: {label} limit is NaN')
    if joint.lower > joint.upper:
        raise ModelError(f'joint {joint.name!r}: lower limit {joint.lower} is above upper '
                         f'limit {joint.upper}')
    if not joint.velocity > 0.0:
        raise ModelError(f'joint {joint.name!r}: velocity limit must be positive, '
                         f'received {joint.velocity}')
    return origin, axis / norm


class Chain:
    """A serial chain from ``base_link`` to ``tip_link`` with n free joints.

    Attributes:
        base_link, tip_link: link names.
        joint_names: list of the n free (movable, non-mimic) joint names, in
            order from base to tip; joint vectors use this order.
        lower, upper: (n,) position limits (radians / metres; +-inf where
            unbounded), intersected with the limits of any mimic follower.
        velocity: (n,) speed limits (rad/s or m/s; inf where not given), each
            at most a mimic follower's limit over its |multiplier|.
        mimics: the chain's mimic joints as (name, leader index, multiplier,
            offset): ``value = multiplier * q[leader index] + offset``.
        continuous: (n,) bool, True for unbounded revolute joints.
        joints: the full list of Joint records (fixed and mimic included).

    """

    def __init__(self, joints: Sequence[Joint], base_link: str, tip_link: str):
        """Build a chain from its joints, ordered from base to tip.

        Raises:
            ModelError: unsupported joint type, non-finite numbers, zero axis,
                inverted limits, a mimic leader that is not a free joint of the
                chain, or no movable joint at all.

        """
        self.base_link = base_link
        self.tip_link = tip_link
        self.joints = list(joints)
        checked = [_check_joint(j) for j in self.joints]
        free = [j for j in self.joints if j.type in MOVABLE_TYPES and j.mimic is None]
        if not free:
            raise ModelError(f'chain {base_link!r} -> {tip_link!r} has no movable joints')
        self.joint_names: List[str] = [j.name for j in free]
        index = {name: k for k, name in enumerate(self.joint_names)}
        self.lower = np.array([j.lower for j in free], dtype=np.float64)
        self.upper = np.array([j.upper for j in free], dtype=np.float64)
        self.velocity = np.array([j.velocity for j in free], dtype=np.float64)
        self.continuous = np.array([j.type == 'continuous' for j in free], dtype=bool)
        self._build_motion_tables(checked, index)
        #: (n,) free joints a whole turn leaves where they were: revolute or continuous,
        #: and no mimic follows them (a follower's multiplier need not be an integer).
        self.turnable = np.array([j.type != 'prismatic' for j in free], dtype=bool)
        self.turnable[[leader for _, leader, _, _ in self.mimics]] = False

    # -- construction ---------------------------------------------------------

    def _build_motion_tables(self, checked, index):
        self.mimics: List[Tuple[str, int, float, float]] = []
        pre: List[FloatArray] = []
        axes, prismatic, driver, mult, offset = [], [], [], [], []
        pending = np.eye(4)
        for joint, (origin, axis) in zip(self.joints, checked):
            pending = pending @ origin
            if joint.type == 'fixed':
                continue
            leader, k, c = joint.name, 1.0, 0.0
            if joint.mimic is not None:
                leader, k, c = joint.mimic
                if leader not in index:
                    raise ModelError(
                        f'joint {joint.name!r} mimics {leader!r}, which is not a free '
                        f'movable joint between {self.base_link!r} and {self.tip_link!r}')
                self._restrict_leader(joint, index[leader], k, c)
                self.mimics.append((joint.name, index[leader], float(k), float(c)))
            pre.append(pending)
            pending = np.eye(4)
            axes.append(axis)
            prismatic.append(joint.type == 'prismatic')
            driver.append(index[leader])
            mult.append(k)
            offset.append(c)
        pre_arr = np.array(pre)
        m = len(pre)
        self._pre_rot = np.ascontiguousarray(pre_arr[:, :3, :3])
        self._pre_trans = np.ascontiguousarray(pre_arr[:, :3, 3])
        self._tip = pending
        self._axis = np.array(axes)
        self._prismatic = np.array(prismatic, dtype=bool)
        self._has_prismatic = bool(self._prismatic.any())
        self._driver = np.array(driver, dtype=np.int64)
        self._mult = np.array(mult)
        self._offset = np.array(offset)
        self._identity_map = bool(np.array_equal(self._driver, np.arange(len(driver)))
                                  and np.all(self._mult == 1.0) and np.all(self._offset == 0.0))
        tip_r = tuple(pending[:3, :3].ravel().tolist())
        tip_p = tuple(pending[:3, 3].tolist())
        skew = np.zeros((m, 3, 3))
        skew[:, 0, 1], skew[:, 0, 2], skew[:, 1, 2] = -self._axis[:, 2], self._axis[:, 1], \
            -self._axis[:, 0]
        skew[:, 1, 0], skew[:, 2, 0], skew[:, 2, 1] = self._axis[:, 2], -self._axis[:, 1], \
            self._axis[:, 0]
        rot1 = np.matmul(self._pre_rot, skew)
        columns = (self._pre_rot.reshape(m, 9), rot1.reshape(m, 9),
                   np.matmul(rot1, skew).reshape(m, 9), self._pre_trans, self._axis)
        #: kernels.ChainTables of this chain as tuples (run by CPython: the
        #: numpy backend) ...
        rows = [tuple(tuple(row) for row in c.tolist()) for c in columns]
        self.fk_tables = kernels.ChainTables(
            rows[0], rows[1], rows[2], rows[3], rows[4], tuple(bool(b) for b in prismatic),
            tuple(int(d) for d in driver), tuple(float(k) for k in mult),
            tuple(float(c) for c in offset), tip_r, tip_p)
        #: ... and as arrays (for the compiled kernels: one unboxing per call).
        arrays = [np.ascontiguousarray(c) for c in columns]
        self.fk_arrays = kernels.ChainTables(
            arrays[0], arrays[1], arrays[2], arrays[3], arrays[4], self._prismatic,
            self._driver, self._mult, self._offset, tip_r, tip_p)
        self.movable = m

    def _restrict_leader(self, joint: Joint, k_index: int, k: float, c: float):
        """Intersect the leader's limits with those implied by a mimic follower.

        Position: the follower's [lower, upper] mapped back through
        ``(value - c) / k``. Speed: the follower moves |k| times as fast as
        its leader, so the leader's speed limit is at most velocity / |k|.
        """
        if k == 0.0:
            return
        self.velocity[k_index] = min(self.velocity[k_index], joint.velocity / abs(k))
        bounds = sorted(((joint.lower - c) / k, (joint.upper - c) / k))
        self.lower[k_index] = max(self.lower[k_index], bounds[0])
        self.upper[k_index] = min(self.upper[k_index], bounds[1])
        if self.lower[k_index] > self.upper[k_index]:
            raise ModelError(f'joint {joint.name!r}: its limits and its mimic relation '
                             f'leave no valid value for {self.joint_names[k_index]!r}')

    # -- queries --------------------------------------------------------------

    @property
    def n(self) -> int:
        """Return the number of free joint variables."""
        return len(self.joint_names)

    def check_q(self, q, name: str = 'q') -> FloatArray:
        """Validate a joint vector: (n,) finite floats in chain order."""
        return checked_joints(q, self.joint_names, name)

    def within_limits(self, q, tol: float = 0.0) -> bool:
        """Return True when every joint of ``q`` is within its limits (+- tol)."""
        return joints_within(q, self.lower, self.upper, tol)

    def reach_bound(self) -> float:
        """Return an upper bound of the tip's distance from the base origin, metres.

        The sum of the link offsets (triangle inequality) plus the largest
        travel of each prismatic joint; inf when a prismatic joint is unbounded.
        """
        return float(np.sum(self.joint_spans())) + float(np.linalg.norm(self._tip[:3, 3]))

    def reach_sphere(self) -> Tuple[FloatArray, float]:
        """Return a ball holding every tip position: (centre (3,), radius m), base frame.

        Built from the tip inward. The tip lies in a ball of radius 0 around
        itself, a point of the last link. Turning joint j carries that ball's
        centre c around joint j's axis: every tip position then lies within
        (radius + the distance of c from the axis) of c's foot on the axis,
        a point of the link before. A prismatic joint moves c along its axis:
        the centre goes to the middle of its travel, the radius grows by half
        of it (inf when unbounded). The joints' axes, not their origins, give
        the distances, so offsets along an axis (a UR's or an iiwa's
        shoulder height) cost nothing. Out of this ball no joint values put
        the tip: the Jacobian solver does not restart for such a target. When
        the ball of :meth:`reach_bound` around the base origin is smaller (a
        humanoid's waist of three joints, offset from each other, loosens the
        inward ball: the G1's by 10 %), that one is returned.
        """
        frames, _, tip = self.frames([0.0] * self.n)
        centre, radius = np.array(tip, dtype=np.float64), 0.0
        for j in range(self.movable - 1, -1, -1):
            origin = np.array(frames[j][9:12], dtype=np.float64)
            axis = np.reshape(frames[j][:9], (3, 3)) @ self._axis[j]
            if self._prismatic[j]:
                lo, hi = self.lower[self._driver[j]], self.upper[self._driver[j]]
                ends = self._mult[j] * np.array([lo, hi]) + self._offset[j]
                if not np.all(np.isfinite(ends)):
                    return centre, math.inf
                now = self._offset[j]   # the joint's value at q = 0
                centre = centre + (0.5 * (ends[0] + ends[1]) - now) * axis
                radius += 0.5 * abs(ends[1] - ends[0])
                continue
            foot = origin + np.dot(centre - origin, axis) * axis
            radius += float(np.linalg.norm(centre - foot))
            centre = foot
        bound = self.reach_bound()
        if bound < radius:
            return np.zeros(3), bound
        return centre, radius

    def joint_spans(self) -> FloatArray:
        """Return (m,) per movable (FK) joint: how far its frame can be from the one before, m.

        The fixed offset before the joint, plus, for a prismatic joint, its
        largest travel (multiplier and offset of a mimic included; inf when
        unbounded). Summed over joints (and the tip's offset), a triangle
        inequality bound of any link origin's distance from another's.
        """
        spans = np.linalg.norm(self._pre_trans, axis=1)
        if self._has_prismatic:
            free = self._driver[self._prismatic]
            spans[self._prismatic] += (
                np.abs(self._mult[self._prismatic])
                * np.maximum(np.abs(self.lower[free]), np.abs(self.upper[free]))
                + np.abs(self._offset[self._prismatic]))
        return spans

    def mimic_values(self, q) -> FloatArray:
        """Return the values (m,) of the chain's mimic joints (``mimics``) at joints q (n,)."""
        arr = np.asarray(q, dtype=np.float64)
        return np.array([k * arr[i] + c for _, i, k, c in self.mimics], dtype=np.float64)

    def mid_limits(self) -> FloatArray:
        """Return the middle of each joint's range (0 for unbounded joints)."""
        bounded = np.isfinite(self.lower) & np.isfinite(self.upper)
        return np.where(bounded, 0.5 * (np.where(bounded, self.lower, 0.0)
                                        + np.where(bounded, self.upper, 0.0)), 0.0)

    # -- kinematics -----------------------------------------------------------

    def frames(self, q) -> Tuple[list, tuple, tuple]:
        """Forward kinematics of every joint (kernels.chain_frames), unchecked.

        Args:
            q: (n,) joint values, a sequence of floats.

        Returns:
            (frames, tip rotation 9-tuple, tip position 3-tuple): ``frames[j]``
            is the 12-tuple (rotation row-major, origin) of movable joint j's
            frame after its motion, base frame.

        """
        frames: list = [None] * self.movable
        tip_r, tip_p = kernels.chain_frames(q, self.fk_tables, frames)
        return frames, tip_r, tip_p

    def forward(self, q) -> FloatArray:
        """Pose of the tip link in the base link frame.

        Args:
            q: (n,) joint values in ``joint_names`` order (radians / metres).

        Returns:
            (4, 4) homogeneous transform ``T_base_tip``.

        """
        _, r, p = self.frames(self.check_q(q).tolist())
        return pose_matrix(r, p)

    def jacobian_of_frames(self, frames, tip_p) -> FloatArray:
        """Return the (6, n) geometric Jacobian from :meth:`frames`' output."""
        columns: list = [None] * self.n
        kernels.chain_jacobian(frames, self.fk_tables, tip_p, self.n, columns)
        return np.ascontiguousarray(np.array(columns).T)

    def jacobian(self, q) -> FloatArray:
        """Geometric Jacobian of the tip, in the base frame.

        Args:
            q: (n,) joint values.

        Returns:
            (6, n) matrix: rows 0-2 the linear velocity of the tip origin (m/s
            per unit joint speed), rows 3-5 the angular velocity (rad/s).

        """
        frames, _, p = self.frames(self.check_q(q).tolist())
        return self.jacobian_of_frames(frames, p)

    def forward_and_jacobian(self, q) -> Tuple[FloatArray, FloatArray]:
        """Return ``(forward(q), jacobian(q))`` sharing one pass over the chain."""
        frames, r, p = self.frames(self.check_q(q).tolist())
        return pose_matrix(r, p), self.jacobian_of_frames(frames, p)

    # -- construction from URDF ----------------------------------------------

    @classmethod
    def from_urdf_string(cls, xml: str, base_link: str, tip_link: str) -> 'Chain':
        """Parse URDF text and build the chain from ``base_link`` to ``tip_link``."""
        return _urdf_reader().from_string(xml, base_link, tip_link)

    @classmethod
    def from_urdf_file(cls, path: str, base_link: str, tip_link: str) -> 'Chain':
        """Read a URDF file and build the chain from ``base_link`` to ``tip_link``."""
        return _urdf_reader().from_file(path, base_link, tip_link)


# The URDF reader lives above the core (ik_node/description/urdf.py, the only importer of
# urdf_parser_py) and registers itself here when it is imported. The core
# imports nothing from the layers above it: Chain.from_urdf_* look the reader
# up by its module name when none is registered yet (URDF_READER_MODULE).
URDF_READER_MODULE = 'ik_node.description.urdf'
_URDF_READERS: list = []


def checked_joints(q, names: Sequence[str], name: str = 'q') -> FloatArray:
    """Return ``q`` as (n,) floats for the joints ``names`` (InvalidInputError: not that).

    The shape one value per joint, every value finite; ``name`` names the
    vector in the message.
    """
    arr = np.asarray(q, dtype=np.float64)
    if arr.shape != (len(names),):
        raise InvalidInputError(f'{name}: expected shape ({len(names)},) for joints '
                                f'{list(names)}, received shape {arr.shape}')
    if not np.all(np.isfinite(arr)):
        raise InvalidInputError(f'{name}: expected finite joint values, received {arr}')
    return arr


def joints_within(q, lower: FloatArray, upper: FloatArray, tol: float = 0.0) -> bool:
    """Return True when every value of ``q`` (n,) is within [lower - tol, upper + tol]."""
    arr = np.asarray(q, dtype=np.float64)
    return bool(np.all(arr >= lower - tol) and np.all(arr <= upper + tol))


class _UrdfReader:
    """The two functions of a URDF reader (registered by ik_node.description.urdf)."""

    def __init__(self, from_string, from_file):
        self.from_string, self.from_file = from_string, from_file


def register_urdf_reader(from_string, from_file) -> None:
    """Make ``from_string(xml, base, tip)`` / ``from_file(path, base, tip)`` the URDF reader."""
    _URDF_READERS[:] = [_UrdfReader(from_string, from_file)]


def _urdf_reader() -> _UrdfReader:
    """Return the registered URDF reader, importing URDF_READER_MODULE (which registers) first."""
    if not _URDF_READERS:
        importlib.import_module(URDF_READER_MODULE)
    if not _URDF_READERS:
        raise ModelError(f'no URDF reader is registered: {URDF_READER_MODULE} did not '
                         'register one')
    return _URDF_READERS[0]
