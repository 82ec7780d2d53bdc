# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

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

from dataclasses import dataclass
import math
from typing import List, Optional, Sequence, Tuple

from ik_node.core.errors import InvalidInputError, ModelError
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

MOVABLE_TYPES = ('revolute', 'continuous', 'prismatic')
JOINT_TYPES = MOVABLE_TYPES + ('fixed',)

# An axis shorter than this cannot be normalised meaningfully.
MIN_AXIS_NORM = 1e-9


@dataclass(frozen=True)
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


_LEVI_CIVITA = np.zeros((3, 3, 3))
_LEVI_CIVITA[0, 1, 2] = _LEVI_CIVITA[1, 2, 0] = _LEVI_CIVITA[2, 0, 1] = 1.0
_LEVI_CIVITA[0, 2, 1] = _LEVI_CIVITA[2, 1, 0] = _LEVI_CIVITA[1, 0, 2] = -1.0


def _skew(v: FloatArray) -> FloatArray:
    return np.array([[0.0, -v[2], v[1]], [v[2], 0.0, -v[0]], [-v[1], v[0], 0.0]])


class Chain:
    """A serial chain from ``base_link`` to ``tip_link`` with n free joints.

    Attributes:
        base_link, tip_link: link names.
        joint_names: list of the n free (movable, non-mimic) joint names, in
            order from base to tip; joint vectors use this order.
        lower, upper: (n,) position limits (radians / metres; +-inf where
            unbounded), intersected with the limits of any mimic follower.
        velocity: (n,) speed limits (rad/s or m/s; inf where not given).
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
        # Plain-float copies for per-tick code (a numpy call costs ~1 us each).
        self._lower_list = self.lower.tolist()
        self._upper_list = self.upper.tolist()
        self._velocity_list = self.velocity.tolist()

    # -- construction ---------------------------------------------------------

    def _build_motion_tables(self, checked, index):
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
            pre.append(pending)
            pending = np.eye(4)
            axes.append(axis)
            prismatic.append(joint.type == 'prismatic')
            driver.append(index[leader])
            mult.append(k)
            offset.append(c)
        pre_arr = np.array(pre)
        self._pre_rot = np.ascontiguousarray(pre_arr[:, :3, :3])
        self._pre_trans = np.ascontiguousarray(pre_arr[:, :3, 3])
        self._tip = pending
        self._axis = np.array(axes)
        prismatic_arr = np.array(prismatic, dtype=bool)
        self._prismatic = prismatic_arr
        self._has_prismatic = bool(prismatic_arr.any())
        self._rotates = (~prismatic_arr).astype(np.float64)
        self._driver = np.array(driver, dtype=np.intp)
        self._mult = np.array(mult)
        self._offset = np.array(offset)
        self._identity_map = bool(np.array_equal(self._driver, np.arange(len(driver)))
                                  and np.all(self._mult == 1.0) and np.all(self._offset == 0.0))
        # Rodrigues: R(theta) = I + sin(theta) K + (1 - cos(theta)) K^2, with the
        # fixed origin rotation folded in: pre R(theta) = pre + s pre K + c pre K^2.
        # Stored as a basis so that one batched product builds every rotation:
        # [1, s, c] @ [pre; pre K; pre K^2] (each row a flattened 3x3).
        k1 = np.array([_skew(a) for a in self._axis])
        self._rot_basis = np.stack((self._pre_rot.reshape(-1, 9),
                                    np.matmul(self._pre_rot, k1).reshape(-1, 9),
                                    np.matmul(self._pre_rot, k1 @ k1).reshape(-1, 9)), axis=1)
        # Columns of the joint-space Jacobian summed into free variables.
        self._to_free = np.zeros((len(driver), len(self.joint_names)))
        self._to_free[np.arange(len(driver)), self._driver] = self._mult

    def _restrict_leader(self, joint: Joint, k_index: int, k: float, c: float):
        """Intersect the leader's limits with those implied by a mimic follower."""
        if k == 0.0:
            return
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
        arr = np.asarray(q, dtype=np.float64)
        if arr.shape != (self.n,):
            raise InvalidInputError(
                f'{name}: expected shape ({self.n},) for joints {self.joint_names}, '
                f'received shape {arr.shape}')
        if not np.all(np.isfinite(arr)):
            raise InvalidInputError(f'{name}: expected finite joint values, received {arr}')
        return arr

    def within_limits(self, q, tol: float = 0.0) -> bool:
        """Return True when every joint of ``q`` is within its limits (+- tol)."""
        arr = np.asarray(q, dtype=np.float64)
        return bool(np.all(arr >= self.lower - tol) and np.all(arr <= self.upper + tol))

    def speed_limited_step(self, q_from, q_to, dt: float) -> Tuple[FloatArray, FloatArray]:
        """Move from ``q_from`` toward ``q_to`` for ``dt`` seconds, within every limit.

        The whole step is scaled by one factor so that no joint exceeds its
        speed limit (the tip keeps its path direction), then clipped into the
        position limits. A non-finite ``q_to`` holds ``q_from``.

        Args:
            q_from: (n,) current joints, within the limits.
            q_to: (n,) wanted joints.
            dt: time step, seconds (> 0).

        Returns:
            (q_new (n,), velocity (n,) = (q_new - q_from) / dt, rad/s or m/s).

        """
        a, b = q_from.tolist(), q_to.tolist()
        if not all(math.isfinite(v) for v in b):
            return np.array(a), np.zeros(len(a))
        ratio = 1.0
        for x, y, v in zip(a, b, self._velocity_list):
            ratio = max(ratio, abs(y - x) / (v * dt))
        out = [min(max(x + (y - x) / ratio, lo), hi)
               for x, y, lo, hi in zip(a, b, self._lower_list, self._upper_list)]
        return np.array(out), np.array([(y - x) / dt for x, y in zip(a, out)])

    def reach_bound(self) -> float:
        """Return an upper bound of the tip's distance from the base origin, metres.

        The sum of the link offsets (triangle inequality) plus the largest
        travel of each prismatic joint; inf when a prismatic joint is unbounded.
        """
        lengths = float(np.sum(np.linalg.norm(self._pre_trans, axis=1)))
        lengths += float(np.linalg.norm(self._tip[:3, 3]))
        free = self._driver[self._prismatic]
        mult = np.abs(self._mult[self._prismatic])
        offset = np.abs(self._offset[self._prismatic])
        travel = mult * np.maximum(np.abs(self.lower[free]), np.abs(self.upper[free])) + offset
        return lengths + float(np.sum(travel))

    def mid_limits(self) -> FloatArray:
        """Return the middle of each joint's range (0 for unbounded joints)."""
        bounded = np.isfinite(self.lower) & np.isfinite(self.upper)
        return np.where(bounded, 0.5 * (np.where(bounded, self.lower, 0.0)
                                        + np.where(bounded, self.upper, 0.0)), 0.0)

    # -- kinematics -----------------------------------------------------------

    def _joint_values(self, q: FloatArray) -> FloatArray:
        if self._identity_map:
            return q
        return self._mult * q[self._driver] + self._offset

    def _cumulative(self, q: FloatArray) -> FloatArray:
        """Return (m, 4, 4) poses of each movable joint's frame after its motion.

        A revolute motion does not move the joint frame's origin, so each
        local transform is [pre_rot R(theta), pre_trans]; a prismatic one adds
        pre_rot * theta * axis to the translation. The origin of frame j is
        on joint j's axis, and ``cum[j, :3, :3] @ axis_j`` is that axis in the
        base frame (R(theta) leaves its own axis unchanged).
        """
        theta = self._joint_values(q)
        m = theta.shape[0]
        coef = np.empty((m, 1, 3))
        coef[:, 0, 0] = 1.0
        coef[:, 0, 1] = np.sin(theta)
        coef[:, 0, 2] = 1.0 - np.cos(theta)
        if self._has_prismatic:
            coef[:, 0, 1:] *= self._rotates[:, None]
        local = np.empty((m, 4, 4))
        local[:, 3, :] = (0.0, 0.0, 0.0, 1.0)
        local[:, :3, :3] = np.matmul(coef, self._rot_basis).reshape(m, 3, 3)
        local[:, :3, 3] = self._pre_trans
        if self._has_prismatic:
            slide = np.where(self._prismatic, theta, 0.0)[:, None] * self._axis
            local[:, :3, 3] += np.einsum('jab,jb->ja', self._pre_rot, slide)
        cum = np.empty_like(local)
        cum[0] = local[0]
        for j in range(1, m):  # np.dot is the cheapest 4x4 product call
            np.dot(cum[j - 1], local[j], out=cum[j])
        return cum

    def _frames(self, q: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """Return the cumulative joint frames (m, 4, 4) and the tip pose (4, 4)."""
        cum = self._cumulative(q)
        return cum, cum[-1] @ self._tip

    def forward(self, q) -> FloatArray:
        """Pose of the tip link in the base link frame.

        Args:
            q: (n,) joint values in ``joint_names`` order (radians / metres).

        Returns:
            (4, 4) homogeneous transform ``T_base_tip``.

        """
        return self._frames(self.check_q(q))[1]

    def _jacobian_from_frames(self, frames: FloatArray, tip: FloatArray) -> FloatArray:
        z = np.matmul(frames[:, :3, :3], self._axis[:, :, None])[:, :, 0]
        d = tip[:3, 3] - frames[:, :3, 3]
        jac = np.empty((6, z.shape[0]))
        jac[:3] = np.einsum('ijk,aj,ak->ia', _LEVI_CIVITA, z, d)  # z x d, 6x faster
        jac[3:] = z.T                                             # than np.cross here
        if self._has_prismatic:
            jac[:3, self._prismatic] = z[self._prismatic].T
            jac[3:, self._prismatic] = 0.0
        return jac if self._identity_map else jac @ self._to_free

    def jacobian(self, q) -> FloatArray:
        """Geometric Jacobian of the tip, in the base frame.

        Args:
            q: (n,) joint values.

        Returns:
            (6, n) matrix: rows 0-2 the linear velocity of the tip origin (m/s
            per unit joint speed), rows 3-5 the angular velocity (rad/s).

        """
        frames, tip = self._frames(self.check_q(q))
        return self._jacobian_from_frames(frames, tip)

    def forward_and_jacobian(self, q) -> Tuple[FloatArray, FloatArray]:
        """Return ``(forward(q), jacobian(q))`` sharing one pass over the chain."""
        frames, tip = self._frames(self.check_q(q))
        return tip, self._jacobian_from_frames(frames, tip)

    # -- construction from URDF ----------------------------------------------

    @classmethod
    def from_urdf_string(cls, xml: str, base_link: str, tip_link: str) -> 'Chain':
        """Parse URDF text and build the chain from ``base_link`` to ``tip_link``."""
        from ik_node.urdf import chain_from_urdf_string
        return chain_from_urdf_string(xml, base_link, tip_link)

    @classmethod
    def from_urdf_file(cls, path: str, base_link: str, tip_link: str) -> 'Chain':
        """Read a URDF file and build the chain from ``base_link`` to ``tip_link``."""
        from ik_node.urdf import chain_from_urdf_file
        return chain_from_urdf_file(path, base_link, tip_link)
