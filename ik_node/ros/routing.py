# SPDX-License-Identifier: Apache-2.0

"""The node's parameters routed to the core: read into its settings, checked, applied.

:class:`ParameterRouting` turns the parameter table (:mod:`ik_node.ros.parameters`)
into the motion session's settings: the tracker configuration, the jerk
limits, the feedback settings, the collision margin and the solver. It
checks a change in the node's on-set callback (refused with the reason, the
old values kept) and hands the accepted one to the session in the post-set
callback, as ros2/demos does; start-up values outside their choices are a
StartupError of one line.
"""

import difflib
from typing import Dict, Optional

from ik_node.core.errors import IKError
from ik_node.core.ik.factory import SOLVER_NAMES
from ik_node.core.motion.jerk import check_jerk_limits
from ik_node.core.motion.tracker import TrackerConfig
from ik_node.ros.outputs import OUTPUTS
from ik_node.ros.parameters import CONFIG_PARAMETERS, FEEDBACK_PARAMETERS, FIXED_PARAMETERS, \
    PARAMETERS, QOS_CHOICES, StartupError
from rcl_interfaces.msg import SetParametersResult
from rclpy.exceptions import ParameterUninitializedException
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy


# Each parameter's group (Param.group): what a change of it reaches.
GROUP_OF = {p.name: p.group for p in PARAMETERS}


class ParameterRouting:
    """The parameters of an IKNode read, checked and applied (module docstring).

    Args:
        node: the IKNode (its parameters, logger, chain, session and
            ``_solver_for``, which builds a solver for the loaded chain).

    """

    def __init__(self, node):
        """Route ``node``'s parameters; no solver change pending."""
        self._node = node
        self._pending_solver = None  # built by the on-set callback, used by the post-set one

    def value(self, name: str, changes: Dict[str, object]):
        """Return a parameter's value, or the value about to be set."""
        if name in changes:
            return changes[name]
        try:
            return self._node.get_parameter(name).value
        except ParameterUninitializedException:
            return None

    def config(self, changes: Optional[Dict[str, object]] = None) -> TrackerConfig:
        """Return the tracker configuration of the parameters (with ``changes`` applied)."""
        changes = changes or {}
        values = {name: self.value(name, changes) for name in CONFIG_PARAMETERS}
        values['joint_acceleration_limits'] = tuple(values['joint_acceleration_limits'] or ())
        values['posture'] = tuple(values['posture'] or ())
        return TrackerConfig(**values)

    def jerk(self, changes: Optional[Dict[str, object]] = None):
        """Return the jerk limits: the per-joint list, else the scalar (IKError if invalid)."""
        changes = changes or {}
        per_joint = self.value('joint_jerk_limits', changes)
        values = list(per_joint) if per_joint else [self.value('max_joint_jerk', changes)]
        # Without a model yet a list is checked for its values; its length with the model.
        n = self._node.chain.n if per_joint and self._node.chain is not None else len(values)
        check_jerk_limits(values, n)
        return values

    def feedback_settings(self, changes: Optional[Dict[str, object]] = None):
        """Return (feedback_timeout, resync_tolerance, servo_lag) of the parameters."""
        changes = changes or {}
        return tuple(float(self.value(name, changes)) for name in FEEDBACK_PARAMETERS)

    def target_qos(self) -> QoSProfile:
        """Return the QoS of ~/target_pose (target_qos, target_queue_depth)."""
        reliable = self._node.get_parameter('target_qos').value == 'reliable'
        return QoSProfile(depth=self._node.get_parameter('target_queue_depth').value,
                          history=HistoryPolicy.KEEP_LAST,
                          reliability=(ReliabilityPolicy.RELIABLE if reliable
                                       else ReliabilityPolicy.BEST_EFFORT))

    def warn_unknown(self) -> None:
        """Log each parameter given to the node that it does not have, with the closest name.

        ROS ignores such a parameter silently: a misspelled max_linear_sped
        left the default speed in force.
        """
        given = getattr(self._node, '_parameter_overrides', {})   # what --ros-args / files set
        known = self._node.list_parameters([], 0).names
        for name in sorted(n for n in given if not self._node.has_parameter(n)):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ''
            self._node.get_logger().warning(
                f"parameter '{name}' is not a parameter of ik_node and is ignored{hint}")

    def check_choices(self):
        """Raise StartupError (one line) for a start-up parameter outside its choices."""
        solver = self._node.get_parameter('solver').value
        if solver not in SOLVER_NAMES:
            raise StartupError(f"parameter solver: '{solver}' is not one of "
                               f"{', '.join(SOLVER_NAMES)}")
        output = self._node.get_parameter('command_output').value
        if output not in OUTPUTS:
            raise StartupError(f"parameter command_output: '{output}' is not one of "
                               f"{', '.join(OUTPUTS)}")
        if self._node.get_parameter('feedback_topic').value and output == 'joint_states':
            raise StartupError('parameters: with feedback_topic set, joint_states belongs to the '
                               "robot's broadcaster; set command_output to joint_trajectory or "
                               'position_array')
        qos = self._node.get_parameter('target_qos').value
        if qos not in QOS_CHOICES:
            raise StartupError(f"parameter target_qos: '{qos}' is not one of "
                               f"{', '.join(QOS_CHOICES)}")
        try:
            self.config().check()
        except IKError as exc:
            raise StartupError(f'parameter {exc}') from None

    def validate(self, params) -> SetParametersResult:
        """Refuse, with the reason, a change that cannot be applied (old values kept)."""
        changes = {p.name: p.value for p in params}
        for name in changes:
            if name in FIXED_PARAMETERS and self._node.chain is not None:
                return SetParametersResult(successful=False,
                                           reason=f'{name} can only be set at start-up')
        try:
            self.config(changes).check(None if self._node.chain is None else self._node.chain.n)
            self.jerk(changes)
            if 'solver' in changes:
                if changes['solver'] not in SOLVER_NAMES:
                    return SetParametersResult(successful=False, reason=(
                        f"solver must be one of {', '.join(SOLVER_NAMES)}, not "
                        f"'{changes['solver']}'"))
                if self._node.chain is not None:  # built now: ModelError (not SRS) refuses
                    self._pending_solver = self._node._solver_for(changes['solver'])
        except IKError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def apply(self, params):
        """Hand the accepted changes to the session (after the on-set callback agreed)."""
        if self._node.session is None:
            return  # read from the parameters when the model arrives
        groups = {GROUP_OF[p.name] for p in params}
        session = self._node.session
        if 'solver' in groups and self._pending_solver is not None:
            session.use_solver(self._pending_solver)
            self._pending_solver = None
        session.configure(
            self._node.now_s(),
            config=self.config() if 'config' in groups else None,
            # The jerk stage caps the accelerations of the configuration.
            jerk=self.jerk() if groups & {'jerk', 'config'} else None,
            feedback=self.feedback_settings() if 'feedback' in groups else None)
        if 'collision' in groups:
            session.set_margin(self._node.get_parameter('collision_margin').value)
