# SPDX-License-Identifier: Apache-2.0

"""What an end effector is asked for: a Task (a full pose, or part of one) and its error.

A target is a pose (4, 4) in the chain's base frame; the task says which of
it counts (issue 52):

- ``pose``: the position and the orientation (6-D);
- ``position``: the position, the orientation free (3-D);
- ``orientation``: the orientation, the position free (3-D);
- ``axis``: the position, and the tool axis (``tool_axis``, unit, in the tip
  frame) along the same axis of the target's frame, the turn about it free
  (5-D: a drill, a suction cup, a symmetric gripper). **The position goes
  first**: where both cannot be met (five joints asked for a tool pointing
  down where the wrist cannot), the position is held and the axis brought as
  near as the arm then gets it: the solver's fallback, the local steps'
  projection (kernels.follow) and the comparisons of answers (:meth:`Task.cost`,
  a radian of the axis weighing AXIS_PRIORITY metres) agree on it;
- ``look_at``: the tool axis pointing at the target's position, where the tip
  is free (2-D: a camera).

The error of a task is the pair (position m, orientation rad): zero where the
task does not count it; an axis' is the angle between the axes. The residual
and its rows are the descent's own (:mod:`ik_node.core.kernels.lm`: the chord
``d - a`` between the axes and its exact derivative), run by CPython here.
"""

from dataclasses import dataclass
import math
from typing import Tuple

from ik_node.core.errors import InvalidInputError
from ik_node.core.kernels import lm
from ik_node.core.kernels.lm_constants import AXIS_PRIORITY, TASK_AXIS, TASK_LOOK_AT, \
    TASK_ORIENTATION, TASK_POSE, TASK_POSITION
from ik_node.core.poses import split_pose
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

#: The tasks, by name, and their codes in the kernels.
TASK_CODES = {'pose': TASK_POSE, 'position': TASK_POSITION, 'orientation': TASK_ORIENTATION,
              'axis': TASK_AXIS, 'look_at': TASK_LOOK_AT}
TASK_NAMES = tuple(TASK_CODES)
_UNIT_WEIGHTS = np.ones(6)


@dataclass(frozen=True)
class Task:
    """What counts of a target pose (module docstring).

    Attributes:
        name: one of TASK_NAMES.
        tool_axis: the tool axis in the tip frame, a unit 3-tuple (axis and
            look_at; given any length, made unit).

    Raises:
        InvalidInputError: an unknown name, or a tool axis that is not three
            finite numbers, not all zero.

    """

    name: str = 'pose'
    tool_axis: Tuple[float, float, float] = (0.0, 0.0, 1.0)

    def __post_init__(self) -> None:
        """Check the name, make the tool axis a unit 3-tuple of floats."""
        if self.name not in TASK_CODES:
            raise InvalidInputError(f'task: expected one of {", ".join(TASK_NAMES)}, '
                                    f'received {self.name!r}')
        try:
            axis = np.asarray(self.tool_axis, dtype=np.float64)
        except (TypeError, ValueError):
            axis = np.zeros(0)
        norm = float(np.linalg.norm(axis)) if axis.shape == (3,) else 0.0
        if not (math.isfinite(norm) and norm > 1e-9):
            raise InvalidInputError(f'tool_axis: expected 3 finite numbers, not all 0, '
                                    f'received {self.tool_axis!r}')
        unit = axis / norm
        object.__setattr__(self, 'tool_axis', (float(unit[0]), float(unit[1]), float(unit[2])))

    @property
    def code(self) -> int:
        """The kernels' code of the task (lm_constants.TASK_*)."""
        return TASK_CODES[self.name]

    @property
    def full_pose(self) -> bool:
        """True for the 6-D pose (what the closed forms solve)."""
        return self.name == 'pose'

    @property
    def uses_position(self) -> bool:
        """True when the tip's position counts."""
        return bool(lm.uses_position(self.code))

    @property
    def uses_orientation(self) -> bool:
        """True when the tip's orientation (or a tool axis) counts."""
        return bool(lm.uses_orientation(self.code))

    @property
    def rows(self) -> int:
        """The task's dimension: the rows of its residual that count (6, 3, 3, 5 or 2)."""
        return {'pose': 6, 'position': 3, 'orientation': 3, 'axis': 5, 'look_at': 2}[self.name]

    def residual(self, target: FloatArray, pose: FloatArray) -> FloatArray:
        """Return the error (6,) of the tip ``pose`` from ``target`` (both 4x4, base frame).

        [position m; rotation vector rad] for pose, position and orientation
        (the rows that do not count included); [p_t - p; chord d - a] for an
        axis, [0; chord] for a look-at (kernels.lm.residual).
        """
        target_r, target_p = split_pose(target)
        tip_r, tip_p = split_pose(pose)
        return lm.residual(self.code, self.tool_axis, target_r, target_p, tip_r, tip_p)

    def counted(self, r: FloatArray) -> FloatArray:
        """Return the entries (k,) of a residual (6,) that the task counts, position first."""
        if self.uses_position and self.uses_orientation:
            return r
        return r[:3] if self.uses_position else r[3:]

    def row_weights(self, rot_weight: float) -> FloatArray:
        """Return (k,) weights of the counted rows: 1 per metre, ``rot_weight`` m per radian.

        An axis' rows weigh AXIS_PRIORITY times more little (position first).
        """
        weight = rot_weight * (AXIS_PRIORITY if self.code == TASK_AXIS else 1.0)
        return np.array(([1.0] * 3 if self.uses_position else []) +
                        ([weight] * 3 if self.uses_orientation else []))

    def errors_of(self, r: FloatArray) -> Tuple[float, float]:
        """Return (position m, orientation rad) of a residual (6,): 0 where not counted.

        An axis' chord c is the angle between the axes, 2 asin(|c| / 2).
        """
        pos = float(np.linalg.norm(r[:3])) if self.uses_position else 0.0
        rot = float(np.linalg.norm(r[3:])) if self.uses_orientation else 0.0
        if self.code in (TASK_AXIS, TASK_LOOK_AT):
            rot = 2.0 * math.asin(min(1.0, 0.5 * rot))
        return pos, rot

    def error(self, target: FloatArray, pose: FloatArray) -> Tuple[float, float]:
        """Return (position m, orientation rad) of the tip ``pose`` from ``target`` (4x4)."""
        return self.errors_of(self.residual(target, pose))

    def cost(self, position: float, orientation: float) -> float:
        """Return the squared error by which two answers compare (m^2).

        ``position**2 + orientation**2`` (a radian weighs a metre); an axis
        puts its position first: a radian of the axis weighs AXIS_PRIORITY m.
        """
        weight = AXIS_PRIORITY if self.code == TASK_AXIS else 1.0
        return position * position + (weight * orientation) ** 2

    def task_rows(self, jacobian: FloatArray, target: FloatArray,
                  pose: FloatArray) -> Tuple[FloatArray, FloatArray]:
        """Return (A (k, n), e (k,)): the rows that count and their error, A dq ~ e to first order.

        ``jacobian``: the tip's geometric Jacobian (6, n) at ``pose`` (4x4).
        The full pose: the Jacobian and the pose residual (the local steps'
        model); other tasks: the descent's rows (kernels.lm.task_rows).
        """
        r = self.residual(target, pose)
        if self.full_pose:
            return jacobian, r
        tip_r, tip_p = split_pose(pose)
        return lm.task_rows(np.ascontiguousarray(jacobian, dtype=np.float64), r, self.code,
                            self.tool_axis, tip_r, tip_p, split_pose(target)[1], _UNIT_WEIGHTS)

    @property
    def smooth(self) -> bool:
        """True when the tip's way to a target is a trajectory of poses (not a look-at).

        A look-at's target is the point looked at, not where the tip goes: the
        tip pose is no start for it. Its joints head for the solution directly.
        """
        return self.name != 'look_at'

    def complete(self, target: FloatArray, tip: FloatArray) -> FloatArray:
        """Return ``target`` (4x4) with what the task leaves free taken from the ``tip`` pose.

        The pose a trajectory from the tip heads for, the same target for the
        task: a position's orientation is the tip's; an orientation's position
        the tip's; an axis' orientation the tip's turned by the least rotation
        that takes the tip's tool axis onto the target's (the turn about the
        axis kept). A full pose and a look-at are returned as they are.
        """
        if self.name in ('pose', 'look_at'):
            return target
        out = np.array(target, dtype=np.float64)
        if self.name == 'position':
            out[:3, :3] = tip[:3, :3]
        elif self.name == 'orientation':
            out[:3, 3] = tip[:3, 3]
        else:
            axis = np.array(self.tool_axis)
            out[:3, :3] = rotation_between(tip[:3, :3] @ axis, target[:3, :3] @ axis) @ \
                tip[:3, :3]
        return out

    def describe(self) -> str:
        """Return one line on the task, for logs."""
        axis = 'xyz'[self.tool_axis.index(1.0)] if 1.0 in self.tool_axis else \
            '({:.3g}, {:.3g}, {:.3g})'.format(*self.tool_axis)
        return {'pose': 'pose (the position and the orientation)',
                'position': 'position (the orientation free)',
                'orientation': 'orientation (the position free)',
                'axis': f"axis (the position, then the tool {axis} axis along the target's; "
                        'the turn about it free)',
                'look_at': f"look_at (the tool {axis} axis pointing at the target's "
                           'position)'}[self.name]


#: The full 6-D pose.
POSE = Task()


def default_task(joints: int) -> Task:
    """Return the task of an arm of ``joints`` joints by default: the pose, or its position.

    Fewer than six joints cannot meet every 6-D pose: asked for one they
    trade the position for an orientation they cannot reach (issue 52).
    """
    return POSE if joints >= 6 else Task('position')


def rotation_between(u: FloatArray, v: FloatArray) -> FloatArray:
    """Return the least rotation (3, 3) that takes the unit vector u (3,) onto the unit v (3,).

    About u x v by the angle between them; opposite vectors: half a turn
    about an axis perpendicular to u.
    """
    u = np.asarray(u, dtype=np.float64) / np.linalg.norm(u)
    v = np.asarray(v, dtype=np.float64) / np.linalg.norm(v)
    axis = np.cross(u, v)
    s, c = float(np.linalg.norm(axis)), float(np.dot(u, v))
    if s < 1e-12:
        if c > 0.0:
            return np.eye(3)
        # Half a turn about any axis perpendicular to u: R = 2 k k^T - I.
        k = np.cross(u, np.eye(3)[int(np.argmin(np.abs(u)))])
        k /= np.linalg.norm(k)
        return 2.0 * np.outer(k, k) - np.eye(3)
    k = axis / s
    kx = np.array([[0.0, -k[2], k[1]], [k[2], 0.0, -k[0]], [-k[1], k[0], 0.0]])
    angle = math.atan2(s, c)
    return np.eye(3) + math.sin(angle) * kx + (1.0 - math.cos(angle)) * (kx @ kx)
