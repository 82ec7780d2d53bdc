# SPDX-License-Identifier: Apache-2.0
"""The node's parameters, one table: name, default, description, range, when settable.

:data:`PARAMETERS` is what ``ik_node`` declares (in this order) and what the
README's parameter table lists. A default given as a ``Parameter.Type`` is
an array with no default (empty). ``fixed``: only at start-up (it shapes the
interfaces or the model); the others apply at run time.
"""

from dataclasses import dataclass
from typing import List, Optional, Sequence, Tuple

from ik_node.core.errors import IKError
from ik_node.core.ik.task import default_task, Task
from ik_node.core.model.chain import Chain
from ik_node.core.motion.config import ACCELERATION_RANGE, TrackerConfig
from ik_node.core.motion.jerk import JERK_RANGE
import numpy as np
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor
from rclpy.parameter import Parameter

QOS_CHOICES = ('reliable', 'best_effort')


class StartupError(Exception):
    """A configuration that prevents the node from starting (reported, exit 1)."""


STRINGS, DOUBLES = Parameter.Type.STRING_ARRAY, Parameter.Type.DOUBLE_ARRAY


@dataclass(frozen=True)
class Param:
    """One parameter: its name, default (or array type), description, range and group.

    ``group`` routes a change made at run time (ik_node.ros.routing):
    'config' (a field of the tracker's TrackerConfig, of the same name),
    'jerk' (the jerk stage), 'feedback' (the feedback policy, in the order of
    FeedbackPolicy.configure), 'collision' (the margin), 'solver'; '' for
    what the node reads itself (at start-up).
    """

    name: str
    default: object
    text: str
    low: Optional[float] = None
    high: Optional[float] = None
    fixed: bool = False
    group: str = ''

    def descriptor(self) -> ParameterDescriptor:
        """Return the ROS descriptor: the description, and the range of a number."""
        d = ParameterDescriptor(description=self.text)
        if self.low is None:
            return d
        if isinstance(self.default, int) and not isinstance(self.default, bool):
            d.integer_range = [IntegerRange(from_value=int(self.low), to_value=int(self.high),
                                            step=1)]
        else:
            d.floating_point_range = [FloatingPointRange(from_value=self.low,
                                                         to_value=self.high, step=0.0)]
        return d


PARAMETERS: Tuple[Param, ...] = (
    Param('robot_description', '', 'URDF text of the robot (else urdf_path, else the '
          'robot_description topic)', fixed=True),
    Param('urdf_path', '', 'path of a URDF file, or of a .xacro file (expanded with '
          'xacro_arguments)', fixed=True),
    Param('xacro_arguments', STRINGS, "arguments of a .xacro urdf_path, each 'name:=value'",
          fixed=True),
    Param('base_link', '', 'first link of the IK chain', fixed=True),
    Param('tip_link', '', 'link whose pose is controlled', fixed=True),
    Param('solver', 'auto', 'auto (analytic for SRS arms, else jacobian), analytic or '
          'jacobian', group='solver'),
    Param('task', '', 'what of a target counts: pose, position, orientation, axis (the '
          "position, then tool_axis along the target's) or look_at (tool_axis at the target's "
          "position); '' = pose, or position for fewer than 6 joints", fixed=True),
    Param('tool_axis', DOUBLES, 'the tool axis in the tip frame, for axis and look_at (empty: '
          'z)', fixed=True),
    Param('end_effectors', STRINGS, 'several end effectors solved together, each with '
          '<name>.tip_link, .base_link, .task, .tool_axis, .command_topic, .elbow_joint and '
          'topics ~/<name>/target_pose, ~/<name>/target_point, ~/<name>/target_twist, '
          '~/<name>/pole_target (empty: one, base_link to tip_link)',
          fixed=True),
    Param('joint_weights', STRINGS, "with end_effectors: 'joint:weight', weight in (0, 1]: a "
          'lighter joint (a torso) moves only where the others need it', fixed=True),
    Param('locked_joints', STRINGS, 'with end_effectors: joints that never move', fixed=True),
    Param('publish_rate', 100.0, 'joint_states rate, Hz', 1.0, 1000.0, fixed=True),
    Param('smoothing', True, 'cubic exp-map trajectory through the targets (false: straight '
          'for each target)', group='config'),
    Param('max_linear_speed', 0.5, 'tip speed limit, m/s', 1e-3, 10.0, group='config'),
    Param('max_angular_speed', 1.0, 'tip rotation speed limit, rad/s', 1e-3, 20.0, group='config'),
    Param('max_joint_acceleration', TrackerConfig.max_joint_acceleration,
          'acceleration limit of every joint, rad/s^2 (m/s^2 for prismatic joints)',
          *ACCELERATION_RANGE, group='config'),
    Param('joint_acceleration_limits', DOUBLES, 'per-joint acceleration limits in chain '
          'order (replace max_joint_acceleration when set)', group='config'),
    Param('max_joint_jerk', 500.0, 'jerk limit of every joint, rad/s^3 (m/s^3 for prismatic '
          'joints)', *JERK_RANGE, group='jerk'),
    Param('joint_jerk_limits', DOUBLES, 'per-joint jerk limits in chain order (replace '
          'max_joint_jerk when set)', group='jerk'),
    Param('command_latency_budget', 0.03, 'joint_trajectory / position_array: the longest '
          'delay from a tick to the controller reading its message (transport, tick lateness, '
          "a controller clock ahead), and the most the controller's clock may be behind, s; "
          'commands are committed this much (plus three periods) ahead, each message starts '
          "this much before the node's now",
          0.0, 1.0, fixed=True),
    Param('controller_rate', 0.0, "position_array: the controller manager's update_rate, Hz; "
          'arrays are sent at this rate, sampled from the plan (0: publish_rate)',
          0.0, 10000.0, fixed=True),
    Param('target_qos', 'reliable', 'reliability of ~/target_pose: reliable or best_effort '
          '(teleop streams)', fixed=True),
    Param('target_queue_depth', 10, 'depth of the ~/target_pose queue (keep last: beyond it '
          'the oldest unread target is dropped)', 1, 10000, fixed=True),
    Param('initial_positions', DOUBLES, 'start joint vector in chain order (default: '
          'mid-limits)', fixed=True),
    Param('ik_timeout', TrackerConfig.ik_timeout, 'Jacobian solver budget per solve, s',
          1e-4, 1.0, group='config'),
    Param('posture', DOUBLES, 'preferred joint vector, chain order: a redundant arm drifts '
          'toward it where the target leaves freedom, keeping the tip (empty: none)',
          group='config'),
    Param('posture_rate', TrackerConfig.posture_rate, 'fastest drift toward posture per '
          'joint, rad/s', 1e-3, 10.0, group='config'),
    Param('twist_timeout', TrackerConfig.twist_timeout, '~/target_twist older than this '
          'stops the arm (dead-man), s', 1e-3, 10.0, group='config'),
    Param('feedback_topic', '', "the robot's joint states (e.g. /joint_states of "
          "joint_state_broadcaster); '' = none: the node is its own robot and publishes "
          'joint_states', fixed=True),
    Param('feedback_timeout', 0.1, 'feedback older than this is stale: the node holds and '
          'commands nothing, s', 1e-3, 10.0, group='feedback'),
    Param('resync_tolerance', 0.1, 'the command restarts from the measured joints when they '
          'leave the range of the commands of the last 4 x servo_lag seconds by more, rad',
          1e-6, 10.0, group='feedback'),
    Param('servo_lag', 0.15, "the slowest time constant of the robot's position servos, s: a "
          'lag this slow never re-syncs', 0.0, 2.0, group='feedback'),
    Param('command_output', 'joint_states', 'joint_states, joint_trajectory '
          '(trajectory_msgs/JointTrajectory for joint_trajectory_controller) or '
          'position_array (std_msgs/Float64MultiArray for forward_position_controller)',
          fixed=True),
    Param('command_topic', '', "topic of the commands ('' = the default of command_output)",
          fixed=True),
    Param('command_joint_order', STRINGS, 'joint names in the order of the commands '
          '(default: the chain order)', fixed=True),
    Param('collision_checking', False, "keep the description's <collision> geometry and the "
          'obstacles apart, and prefer collision-free IK solutions (needs coal; the bundled '
          'configs turn it on)', fixed=True),
    Param('collision_margin', 0.01, 'smallest distance kept between any two checked bodies '
          '(links, obstacles), m; an arm inside it may only move out', 0.0, 0.5,
          group='collision'),
    Param('obstacles_file', '', 'YAML file of obstacles (box, sphere, cylinder, halfspace, '
          "mesh) in frames the arm does not move; '' = none", fixed=True),
    Param('srdf_path', '', 'a MoveIt SRDF: its <disable_collisions> pairs are never checked; '
          "'' = none", fixed=True),
    Param('target_marker', True, 'serve interactive markers on ~/target_marker: handles to '
          'drag in RViz (the target at the tip, the elbow pole) and a menu', fixed=True),
)

# Parameters fixed once the model is loaded (they shape the interfaces or the model).
FIXED_PARAMETERS = tuple(p.name for p in PARAMETERS if p.fixed)


def group(name: str) -> Tuple[str, ...]:
    """Return the names of the parameters of group ``name``, in the table's order."""
    return tuple(p.name for p in PARAMETERS if p.group == name)


# Jerk limits: parameter names of the scalar and of the per-joint list.
JERK_PARAMETERS = group('jerk')
# Read by the feedback policy, in FeedbackPolicy.configure's order.
FEEDBACK_PARAMETERS = group('feedback')
# Parameters of the tracker's configuration: each is the TrackerConfig field of its name.
CONFIG_PARAMETERS = group('config')


def declare_parameters(node) -> None:
    """Declare every parameter of :data:`PARAMETERS` on ``node`` (an rclpy Node), in order."""
    for p in PARAMETERS:
        node.declare_parameter(p.name, p.default, p.descriptor())


def joint_order(chain: Chain, names: Optional[Sequence[str]]) -> List[int]:
    """Return the chain indices of the command's joints (command_joint_order, else chain order).

    Raises:
        StartupError: ``names`` are not the chain's joints (in any order).

    """
    names = names or chain.joint_names
    if sorted(names) != sorted(chain.joint_names):
        raise StartupError(f'command_joint_order: expected the joints {chain.joint_names} '
                           f'in any order, received {list(names)}')
    return [chain.joint_names.index(name) for name in names]


def task_for(chain: Chain, name: str, tool_axis: Optional[Sequence[float]]
             ) -> Tuple[Task, str]:
    """Return the task of the ``task`` and ``tool_axis`` parameters for chain, and a log line.

    '' is the full pose, or the position for a chain of fewer than six joints
    (it cannot meet every 6-D pose; the line says so).

    Raises:
        StartupError: a task out of its set, a tool axis that is not three
            finite numbers, not all zero.

    """
    chosen = name or default_task(chain.n).name
    try:
        task = Task(chosen, tuple(tool_axis) if tool_axis else (0.0, 0.0, 1.0))
    except IKError as exc:
        raise StartupError(f'parameter {exc}') from None
    line = f'model: task {task.describe()}'
    if not name and chain.n < 6:
        line += (f'; {chain.n} joints cannot meet every 6-D pose, so the default is position '
                 '(task:=axis for the position and a tool axis, the position first)')
    elif chain.n < task.rows:
        line += f'; {chain.n} joints cannot meet every target of it: most end at the closest pose'
    if tool_axis and task.name not in ('axis', 'look_at'):
        line += (f'; tool_axis is set but not used by the task {task.name} (axis and look_at '
                 'use it)')
    return task, line


def initial_positions(chain: Chain, initial: Optional[Sequence[float]]) -> np.ndarray:
    """Return the start joints (n,), chain order: initial_positions, else mid-limits.

    Raises:
        StartupError: not n finite values within the limits.

    """
    if initial is None or len(initial) == 0:
        return chain.mid_limits()
    q0 = np.asarray(initial, dtype=float)
    if q0.shape != (chain.n,) or not np.all(np.isfinite(q0)) or not chain.within_limits(q0):
        raise StartupError(f'initial_positions: expected {chain.n} finite values within '
                           f'the limits of {chain.joint_names}, received {list(initial)}')
    return q0
