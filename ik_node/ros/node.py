# SPDX-License-Identifier: Apache-2.0

"""The ik_node ROS 2 node: target poses in, joint states out.

A thin adapter around :class:`ik_node.core.motion.session.MotionSession`,
the one owner of the motion step (trajectory, IK, feedback, joint speed /
acceleration / position limits, collision): parameters become its
configuration (validated in the on-set callback, applied in the post-set
callback, as ros2/demos does), messages become its inputs, its committed
plan goes out through one encoder per command output
(:mod:`ik_node.ros.outputs`), and ``/diagnostics`` is read from the
tracker's status snapshot (:mod:`ik_node.ros.diagnostics`); the parameters
are one table (:mod:`ik_node.ros.parameters`). ``~/target_pose``
(geometry_msgs/PoseStamped) is validated (finite, quaternion not ~0,
frame_id empty or the base link); ``~/pole_target`` sets the elbow pole;
``~/reset`` (std_srvs/Trigger) heads back to the initial joints;
``~/target_marker`` serves the handles to drag in RViz
(:mod:`ik_node.ros.handles`). A timer at
``publish_rate`` makes the session's tick and publishes its commands, then
checks the newest target's reachability; side outputs (``/diagnostics``, ``~/markers``) go out
from the same tick at their own rates, from one table.
"""

import collections
import difflib
import functools
import gc
import os
import sys
import time
from typing import Dict, Optional

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, PointStamped, PoseStamped, TwistStamped
from ik_node.core.errors import IKError
from ik_node.core.ik.factory import SOLVER_NAMES
from ik_node.core.model.chain import Chain
from ik_node.core.model.frames import LinkFrames
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.jerk import check_jerk_limits
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.stream import CommandStream, controller_lead
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.motion.worker import ThreadWorker
from ik_node.core.supply import SolverSupply
from ik_node.geometry import collision_model, read_obstacles_file, read_srdf_pairs
from ik_node.ros import diagnostics
from ik_node.ros.clock_watch import ClockWatch
from ik_node.ros.collision import coal_available, CollisionSupport
from ik_node.ros.conversions import check_point, check_target, check_twist, frames_at, \
    matrix_to_pose, pose_matrix, RejectedMessage
from ik_node.ros.delivery import SequenceGaps
from ik_node.ros.diagnostics import model_summary
from ik_node.ros.handles import TargetHandles
from ik_node.ros.marker_server import MarkerServer
from ik_node.ros.outputs import ENCODERS, OUTPUTS
from ik_node.ros.parameters import CONFIG_PARAMETERS, declare_parameters, \
    FEEDBACK_PARAMETERS, FIXED_PARAMETERS, initial_positions, JERK_PARAMETERS, joint_order, \
    QOS_CHOICES, StartupError
# StopRequest is also the entry's (ik_node.ros.entry: node.StopRequest).
from ik_node.ros.spin import run, StopRequest
from ik_node.urdf import chain_from_urdf_string, link_frames, read_urdf_file
from rcl_interfaces.msg import SetParametersResult
import rclpy
from rclpy.exceptions import NameValidationException, ParameterException, \
    ParameterUninitializedException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import InteractiveMarkerFeedback, Marker, MarkerArray

# Diagnostics and markers are published at about these rates (Hz), below the
# joint-state rate: they are for people and RViz. They are sent from the
# joint-state tick, right after its joint_states message, so that they never
# delay one (a separate timer firing first would).
# On SIGINT with position_array, the braking tail is played for at most this long (s).
STOP_TAIL_MAX_S = 5.0
# How long start-up waits for the kernels (a warm cache loads in ~0.7 s):
# longer, the node starts on the numpy reference and switches later.
STARTUP_COMPILE_WAIT_S = 5.0
DIAGNOSTICS_HZ = 2.0
MARKERS_HZ = 5.0
# The RViz handles follow the arm at this rate (only moves of 1 mm / 0.01 rad are sent).
HANDLES_HZ = 20.0


def _internal_error(exc: Exception) -> str:
    """Text of an unexpected exception, as the caller is told it."""
    return f'internal error: {type(exc).__name__}: {exc}'


def _failed_trigger(exc: Exception, request, response):
    """Trigger response of a service callback that raised ``exc``."""
    response.success = False
    response.message = _internal_error(exc)
    return response


def _refused_parameters(exc: Exception, params) -> SetParametersResult:
    """Verdict of a parameter callback that raised ``exc``: refused, old values kept."""
    return SetParametersResult(successful=False, reason=_internal_error(exc))


def position_array_warning(rate: float) -> str:
    """Return the start-up warning of command_output position_array (one line)."""
    return (f'position_array: forward_position_controller writes the newest array at each of '
            f'its updates, and the {rate:g} Hz arrays sent here are not in step with them: an '
            'array that arrives after the update it was meant for is written one update late '
            'and the next is skipped, a staircase of 100-840x the acceleration limit at the '
            'hardware (ik_bench controllers); positions stay within the joint limits, speed, '
            'acceleration and jerk limits only while arrays arrive in step. For motion within '
            'every limit at the hardware use command_output: joint_trajectory '
            '(joint_trajectory_controller)')


class IKNode(Node):
    """Inverse kinematics node (see the module docstring)."""

    def __init__(self, **kwargs):
        """Declare parameters, load the robot model, create the ROS interfaces."""
        super().__init__('ik_node', **kwargs)
        # Full solves, free solutions and paths: in a thread beside the ticks.
        self.worker = ThreadWorker()
        try:
            self._start()
        except BaseException:
            self.worker.stop()   # a refused start-up leaves no thread behind
            raise

    def _start(self) -> None:
        """Declare parameters, load the robot model, create the ROS interfaces (__init__)."""
        self._epoch_ns = self.get_clock().now().nanoseconds
        declare_parameters(self)
        self._warn_unknown_parameters()
        self._check_choices()
        # The numba kernels compile in the background (KernelCompile); until
        # the ones a solver needs are done it runs on the numpy reference.
        self.solvers = SolverSupply(self.get_logger(),
                                    lambda: self.get_parameter('solver').value, self._config)
        # publish_rate is fixed at start-up (refused at run time).
        rate = self.get_parameter('publish_rate').value
        self._period = 1.0 / rate
        self.output = self.get_parameter('command_output').value
        self.clock = ClockWatch(self._period, self.get_logger())
        self.rejected = collections.Counter()
        self.callback_errors = 0
        self.chain: Optional[Chain] = None
        # The one owner of the motion step (targets, twists, states, settings in;
        # the committed plan out); None until the robot model is loaded.
        self.session: Optional[MotionSession] = None
        self._stopping = False
        self._pending_solver = None  # built by the on-set callback, used by the post-set one
        self.targets_received = self.poles_received = self.twists_received = 0
        # Targets / poles the keep-last queue dropped (oldest first) or the
        # transport lost before a callback saw them.
        self.target_gaps, self.pole_gaps = SequenceGaps(), SequenceGaps()
        self.twist_gaps = SequenceGaps()
        self.encoder = None   # of the command output, for the model's joints
        self.frames: Optional[LinkFrames] = None
        self._command_order: Optional[list] = None   # chain indices in command order
        self.collision = CollisionSupport(self.get_logger(), self.rejected)
        self._collision_checks = self._collision_wanted()
        self.add_on_set_parameters_callback(
            self._guarded(self._validate_parameters, _refused_parameters))
        self.add_post_set_parameters_callback(self._guarded(self._apply_parameters))
        kind, default_topic = OUTPUTS[self.output]
        self.command_topic = self.get_parameter('command_topic').value or default_topic
        self.command_pub = self._named_topic('command_topic', self.create_publisher, kind,
                                             self.command_topic, 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.marker_pub = self.create_publisher(MarkerArray, '~/markers', 10)
        self.create_subscription(PoseStamped, '~/target_pose', self._guarded(self._on_target),
                                 self._target_qos())
        self.create_subscription(PointStamped, '~/pole_target', self._guarded(self._on_pole),
                                 self.get_parameter('target_queue_depth').value)
        # Twists: only the newest matters (a velocity stream); keep-last 1, so a
        # flood costs one callback per tick, not one per message (the rest are
        # replaced unread and counted: twists_dropped_unread).
        twist_qos = self._target_qos()
        twist_qos.depth = 1
        self.create_subscription(TwistStamped, '~/target_twist', self._guarded(self._on_twist),
                                 twist_qos)
        self.feedback_topic = self.get_parameter('feedback_topic').value
        if self.feedback_topic:
            # Best effort matches a broadcaster of either reliability.
            self._named_topic('feedback_topic', self.create_subscription, JointState,
                              self.feedback_topic, self._guarded(self._on_feedback),
                              QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                                         reliability=ReliabilityPolicy.BEST_EFFORT))
        self.create_service(Trigger, '~/reset', self._guarded(self._on_reset, _failed_trigger))
        self.create_subscription(MarkerArray, '~/obstacles', self._guarded(self._on_obstacles),
                                 QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                                            reliability=ReliabilityPolicy.RELIABLE))
        self.handle_gaps = SequenceGaps()
        self.handles: Optional[TargetHandles] = None
        if self.get_parameter('target_marker').value:
            server = MarkerServer(self, '~/target_marker', self._guarded(self._on_handle))
            self.handles = TargetHandles(server, self, time.monotonic)
        self._load_model_from_parameters()
        if self.chain is None:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE,
                                 history=HistoryPolicy.KEEP_LAST)
            self.create_subscription(String, 'robot_description',
                                     self._guarded(self._on_description), latched)
            self.get_logger().info('waiting for the robot model on the robot_description topic')
        # Side outputs, by the clock (ticks that run late must not starve them):
        # [period s, offset s, next due time (None: from the first tick), publisher].
        self._side_outputs = []
        for k, (hz, publish) in enumerate(((DIAGNOSTICS_HZ, self._publish_diagnostics),
                                           (MARKERS_HZ, self._publish_markers),
                                           (HANDLES_HZ, self._refresh_handles))):
            self._side_outputs.append([1.0 / hz, k * 0.5 / hz, None, self._guarded(publish)])
        self.create_timer(self._period, self._guarded(self._tick))
        if self.output == 'position_array':
            array_rate = self.get_parameter('controller_rate').value or rate
            self._array_timer = self.create_timer(1.0 / array_rate,
                                                  self._guarded(self._send_array))
            self.get_logger().warning(position_array_warning(array_rate))

    def destroy_node(self):
        """Stop the worker thread, then destroy the node."""
        self.worker.stop()
        return super().destroy_node()

    @property
    def stream(self) -> Optional[CommandStream]:
        """The committed plan the outputs sample (None before the model)."""
        return None if self.session is None else self.session.plan

    @property
    def feedback(self) -> Optional[FeedbackPolicy]:
        """The feedback policy (None without feedback_topic or before the model)."""
        return None if self.session is None else self.session.feedback

    @staticmethod
    def _named_topic(parameter: str, create, kind, topic: str, *args):
        """Return ``create(kind, topic, *args)``; an invalid name is a StartupError (one line)."""
        try:
            return create(kind, topic, *args)
        except NameValidationException as exc:
            reason = str(exc).splitlines()[0]
            raise StartupError(f'parameter {parameter}: {topic!r} is not a valid topic name '
                               f'({reason})') from None

    # -- parameters -------------------------------------------------------------------

    def _warn_unknown_parameters(self) -> None:
        """Log each parameter given to the node that it does not have, with the closest name.

        ROS ignores such a parameter silently: a misspelled max_linear_sped
        left the default speed in force.
        """
        given = getattr(self, '_parameter_overrides', {})   # what --ros-args / files set
        known = self.list_parameters([], 0).names
        for name in sorted(n for n in given if not self.has_parameter(n)):
            close = difflib.get_close_matches(name, known, n=1, cutoff=0.6)
            hint = f"; did you mean '{close[0]}'?" if close else ''
            self.get_logger().warning(f"parameter '{name}' is not a parameter of ik_node and is "
                                      f'ignored{hint}')

    def _check_choices(self):
        """Raise StartupError (one line) for a start-up parameter outside its choices."""
        solver = self.get_parameter('solver').value
        if solver not in SOLVER_NAMES:
            raise StartupError(f"parameter solver: '{solver}' is not one of "
                               f"{', '.join(SOLVER_NAMES)}")
        output = self.get_parameter('command_output').value
        if output not in OUTPUTS:
            raise StartupError(f"parameter command_output: '{output}' is not one of "
                               f"{', '.join(OUTPUTS)}")
        if self.get_parameter('feedback_topic').value and output == 'joint_states':
            raise StartupError('parameters: with feedback_topic set, joint_states belongs to the '
                               "robot's broadcaster; set command_output to joint_trajectory or "
                               'position_array')
        qos = self.get_parameter('target_qos').value
        if qos not in QOS_CHOICES:
            raise StartupError(f"parameter target_qos: '{qos}' is not one of "
                               f"{', '.join(QOS_CHOICES)}")
        try:
            self._config().check()
        except IKError as exc:
            raise StartupError(f'parameter {exc}') from None

    def _value(self, name: str, changes: Dict[str, object]):
        """Return a parameter's value, or the value about to be set."""
        if name in changes:
            return changes[name]
        try:
            return self.get_parameter(name).value
        except ParameterUninitializedException:
            return None

    def _config(self, changes: Optional[Dict[str, object]] = None) -> TrackerConfig:
        """Return the tracker configuration of the parameters (with ``changes`` applied)."""
        changes = changes or {}
        values = {name: self._value(name, changes) for name in CONFIG_PARAMETERS}
        values['joint_acceleration_limits'] = tuple(values['joint_acceleration_limits'] or ())
        values['posture'] = tuple(values['posture'] or ())
        return TrackerConfig(**values)

    def _validate_parameters(self, params) -> SetParametersResult:
        """Refuse, with the reason, a change that cannot be applied (old values kept)."""
        changes = {p.name: p.value for p in params}
        for name in changes:
            if name in FIXED_PARAMETERS and self.chain is not None:
                return SetParametersResult(successful=False,
                                           reason=f'{name} can only be set at start-up')
        try:
            self._config(changes).check(None if self.chain is None else self.chain.n)
            self._jerk(changes)
            if 'solver' in changes:
                if changes['solver'] not in SOLVER_NAMES:
                    return SetParametersResult(successful=False, reason=(
                        f"solver must be one of {', '.join(SOLVER_NAMES)}, not "
                        f"'{changes['solver']}'"))
                if self.chain is not None:  # built now: ModelError (not SRS) refuses
                    self._pending_solver = self._solver_for(changes['solver'])
        except IKError as exc:
            return SetParametersResult(successful=False, reason=str(exc))
        return SetParametersResult(successful=True)

    def _apply_parameters(self, params):
        """Hand the accepted changes to the session (after the on-set callback agreed)."""
        if self.session is None:
            return  # read from the parameters when the model arrives
        names = {p.name for p in params}
        if 'solver' in names and self._pending_solver is not None:
            self.session.use_solver(self._pending_solver)
            self._pending_solver = None
        self.session.configure(
            self._instant()[1],
            config=self._config() if names & set(CONFIG_PARAMETERS) else None,
            jerk=self._jerk() if names & set(JERK_PARAMETERS + CONFIG_PARAMETERS) else None,
            feedback=self._feedback_settings() if names & set(FEEDBACK_PARAMETERS) else None)
        if 'collision_margin' in names:
            self.session.set_margin(self.get_parameter('collision_margin').value)

    def _jerk(self, changes: Optional[Dict[str, object]] = None):
        """Return the jerk limits: the per-joint list, else the scalar (IKError if invalid)."""
        changes = changes or {}
        per_joint = self._value('joint_jerk_limits', changes)
        values = list(per_joint) if per_joint else [self._value('max_joint_jerk', changes)]
        # Without a model yet a list is checked for its values; its length with the model.
        n = self.chain.n if per_joint and self.chain is not None else len(values)
        check_jerk_limits(values, n)
        return values

    def _solver_for(self, name: str):
        """Build the solver ``name`` for the loaded chain (ModelError when it cannot be)."""
        return self.solvers.ready(self.chain, name, self.session.q)

    def _target_qos(self) -> QoSProfile:
        reliable = self.get_parameter('target_qos').value == 'reliable'
        return QoSProfile(depth=self.get_parameter('target_queue_depth').value,
                          history=HistoryPolicy.KEEP_LAST,
                          reliability=(ReliabilityPolicy.RELIABLE if reliable
                                       else ReliabilityPolicy.BEST_EFFORT))

    # -- robot model -----------------------------------------------------------------------

    def _load_model_from_parameters(self):
        text = self.get_parameter('robot_description').value
        path = self.get_parameter('urdf_path').value
        base = self.get_parameter('base_link').value
        tip = self.get_parameter('tip_link').value
        if not (text or path):
            return
        if not base or not tip:
            raise StartupError('parameters base_link and tip_link must both be set')
        try:
            self._use_model(text if text else read_urdf_file(
                path, self._value('xacro_arguments', {}) or ()))
        except IKError as exc:
            raise StartupError(f'robot model: {exc}') from None

    def _on_description(self, msg: String):
        try:
            self._use_model(msg.data)
        except (IKError, StartupError) as exc:
            self.rejected['robot_description'] += 1
            self.get_logger().error(f'robot_description refused, keeping the old model: {exc}')

    def _budget(self) -> float:
        """Return the latency budget, s (none for joint_states: no controller reads them)."""
        if self.output == 'joint_states':
            return 0.0
        return self.get_parameter('command_latency_budget').value

    def _lead(self) -> float:
        """Return how far ahead of the clock commands are committed, s.

        What a controller reads: committed the budget and three periods ahead
        (see "What the controller gets"); joint_states (nothing reads them
        later than now): two periods.
        """
        if self.output == 'joint_states':
            return 2.0 * self._period
        return controller_lead(self._period, self._budget())

    def _use_model(self, text: str):
        """Track with the model of URDF ``text`` (IKError, StartupError: refused; old one kept)."""
        chain = chain_from_urdf_string(text, self.get_parameter('base_link').value,
                                       self.get_parameter('tip_link').value)
        frames = link_frames(text, chain)
        order = joint_order(chain, self._value('command_joint_order', {}))
        q0 = initial_positions(chain, self._value('initial_positions', {}))
        # At start-up, wait for a warm cache (the tracker is built on numba).
        solver = self.solvers.ready(chain, self.get_parameter('solver').value, q0,
                                    STARTUP_COMPILE_WAIT_S if self.session is None else 0.0)
        now = self._instant()[1]
        feedback = None if not self.feedback_topic else FeedbackPolicy(
            chain.joint_names, chain.lower, chain.upper, chain.velocity,
            *self._feedback_settings())
        if self.session is None:
            tracker = MotionTracker(chain, solver, self._config(), q0, now,
                                    backend=self.solvers.tracker_backend(), worker=self.worker)
            # Warm up: the first call of each compiled kernel costs ~0.2 s
            # (loading it from the cache); pay that now, not in the first tick.
            solver.warm_up(q0)
            self.session = MotionSession(tracker, self._period, self._lead(), self._jerk(),
                                         budget_s=self._budget(), feedback=feedback,
                                         own_robot=self.output == 'joint_states')
        else:   # the same joints carry on from where they are: no jump, no seam
            self.session.use_chain(chain, solver, q0, now, self._jerk(), feedback)
            solver.warm_up(q0)
        self.chain, self.frames, self._command_order = chain, frames, order
        self.encoder = ENCODERS[self.output](chain.joint_names, order, self._epoch_ns,
                                             self.get_clock().clock_type, chain.mimics)
        for line in model_summary(chain, solver, self.get_parameter('solver').value, frames):
            self.get_logger().info(line)
        self._use_collision(text, chain, frames, q0)
        if self.handles is not None:
            self.handles.use_model()
        # Everything built so far lives as long as the node: keep it out of
        # the garbage collector's full passes (~40 ms each, measured).
        gc.freeze()

    # -- collision ----------------------------------------------------------------------------

    def _collision_wanted(self) -> bool:
        """Return whether collision is checked (StartupError: asked for without coal)."""
        if not self.get_parameter('collision_checking').value:
            return False
        if coal_available():
            return True
        for name in ('obstacles_file', 'srdf_path'):
            if self.get_parameter(name).value:
                raise StartupError(f'{name} is set, but coal is not installed (pip install '
                                   f'coal, or ros-<distro>-coal): collision cannot be checked')
        self.get_logger().warning('coal is not installed: collision is not checked '
                                  '(kinematics and joint limits only)')
        return False

    def _use_collision(self, text: str, chain: Chain, frames: LinkFrames, q0) -> None:
        """Build the collision model of a new robot model and check the session's steps with it.

        At start-up a bad SRDF or obstacles file ends the node (StartupError);
        for a later model, the old world is kept.
        """
        if not self._collision_checks:
            return
        first = not self.collision.checking
        try:
            srdf = self.get_parameter('srdf_path').value
            disabled = read_srdf_pairs(srdf) if srdf else []
            # On numpy until the background compile is done (as the tracker):
            # numba compiles at a kernel's first call, which is in a tick.
            model, notes = collision_model(text, chain, frames, disabled=disabled, home=q0,
                                           backend=self.solvers.tracker_backend())
            if not model.bodies:
                self.get_logger().warning('collision_checking is on, but no link of the chain '
                                          'has <collision> geometry that could be read: '
                                          'nothing is checked')
            path = self.get_parameter('obstacles_file').value
            obstacles = (read_obstacles_file(path, frames, chain) if path and first
                         else None)
        except IKError as exc:
            if first:
                raise StartupError(f'collision: {exc}') from None
            raise
        self.collision.use_model(self.session, model, chain, frames,
                                 self.get_parameter('collision_margin').value)
        if obstacles is not None:
            self.collision.set_file_obstacles(obstacles)
        for line in notes:
            (self.get_logger().warning if line.warn else self.get_logger().info)(line)
        self.get_logger().info(
            f'collision: {len(model.bodies)} links with geometry, {len(model.pairs)} pairs '
            f'checked, {len(model.obstacles)} obstacles, margin '
            f'{self.get_parameter("collision_margin").value:g} m')

    def _on_obstacles(self, msg: MarkerArray):
        self.collision.on_markers(msg, None)

    # -- callbacks ----------------------------------------------------------------------------

    def _guarded(self, fn, answer=None):
        """Wrap a callback: an exception is logged and counted, the node keeps running.

        ``answer(exc, *args)``, when given, makes the reply of a callback that
        must return one (a service response, a parameter verdict). The wrapper
        keeps ``fn``'s signature: rclpy passes the message info to subscription
        callbacks that take two arguments.
        """
        @functools.wraps(fn)
        def wrapper(*args):
            try:
                return fn(*args)
            except Exception as exc:  # noqa: B902 - a callback must never kill the node
                if not self.context.ok():
                    # SIGINT / SIGTERM shut the context down while this callback
                    # ran, so its publish failed ("publisher's context is
                    # invalid"): the requested stop, not an error.
                    return None if answer is None else answer(exc, *args)
                self.callback_errors += 1
                self.get_logger().error(f'{fn.__name__}: {type(exc).__name__}: {exc}')
                return None if answer is None else answer(exc, *args)
        return wrapper

    def now_s(self) -> float:
        """Return the session's clock now, s (the node's time since its start)."""
        return self._instant()[1]

    def _instant(self):
        """Return (ROS time now, the tracker's clock: the same instant in seconds).

        The tracker's time steps are the differences of the very stamps it
        publishes (sim time under use_sim_time), counted from the node's start
        so that float seconds keep nanosecond resolution. A clock that goes
        back makes the tracker hold until it has caught up.
        """
        now = self.get_clock().now()
        return now, (now.nanoseconds - self._epoch_ns) * 1e-9

    def resolver(self):
        """frame_id -> pose of that link in the base frame, at the current command."""
        return frames_at(self.frames, self.session.q)

    def _on_target(self, msg: PoseStamped, info):
        self.target_gaps.note(info)
        if self.session is None:
            self.rejected['no_model'] += 1
            return
        try:
            p, q = check_target(msg, self.resolver())
        except RejectedMessage as exc:
            self.rejected[exc.reason] += 1
            self.get_logger().warning(f'target rejected: {exc}', throttle_duration_sec=1.0)
            return
        self.targets_received += 1
        # Commands go out from the timer only: the stream is planned on its grid.
        self.session.target(self._instant()[1], pose_matrix(p, q))

    def _on_pole(self, msg: PointStamped, info):
        self.pole_gaps.note(info)
        if self.session is None:
            self.rejected['no_model'] += 1
            return
        try:
            pole = check_point(msg, self.resolver())
        except RejectedMessage as exc:
            self.rejected[exc.reason] += 1
            self.get_logger().warning(f'pole rejected: {exc}', throttle_duration_sec=1.0)
            return
        self.session.pole(pole)
        self.poles_received += 1

    def _on_twist(self, msg: TwistStamped, info):
        self.twist_gaps.note(info)
        if self.session is None:
            self.rejected['no_model'] += 1
            return
        try:
            linear, angular, body = check_twist(msg, self.resolver(), self.chain.tip_link)
        except RejectedMessage as exc:
            self.rejected[exc.reason] += 1
            self.get_logger().warning(f'twist rejected: {exc}', throttle_duration_sec=1.0)
            return
        self.twists_received += 1
        self.session.twist(self._instant()[1], linear, angular, body)

    def _on_feedback(self, msg: JointState):
        """Take the robot's joint state unless it is malformed or implausible (counted, logged)."""
        if self.feedback is None:
            return
        stamp_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        stamp = None if stamp_ns == 0 else (stamp_ns - self._epoch_ns) * 1e-9
        reason = self.session.measured(msg.name, msg.position, msg.velocity, stamp,
                                       self._instant()[1])
        if reason:
            self.get_logger().warning(
                f'joint state on {self.feedback_topic} rejected ({reason}): not followed; '
                f'expected every joint of {self.feedback.filter.names}, finite, within the '
                'limits, moved as the arm can, stamped within feedback_timeout',
                throttle_duration_sec=5.0)

    def _on_reset(self, request, response):
        if self.session is None:
            response.success, response.message = False, 'no robot model yet'
            return response
        self.reset_motion()
        response.success = True
        response.message = 'moving back to the initial positions within the joint limits'
        return response

    def reset_motion(self) -> None:
        """Head back to the initial joints within the limits (~/reset, the handles' menu)."""
        self.session.reset(self._instant()[1])

    def _on_handle(self, msg: InteractiveMarkerFeedback, info):
        """Take feedback from an RViz-like client of the handles (refusals counted, logged)."""
        self.handle_gaps.note(info)
        if self.session is None:
            self.rejected['no_model'] += 1
            return
        refused = self.handles.on_feedback(msg)
        if refused is not None:
            self.get_logger().warning(
                f'handle feedback refused ({refused}): marker {msg.marker_name!r}, '
                f'event {msg.event_type}, frame {msg.header.frame_id!r}',
                throttle_duration_sec=1.0)

    def set_from_handle(self, name: str, value) -> Optional[str]:
        """Set parameter ``name`` as the handles' menu asks; return why not, or None."""
        result = self.set_parameters([Parameter(name, value=value)])[0]
        if result.successful:
            return None
        self.get_logger().warning(f'menu: {name} := {value!r} refused: {result.reason}')
        return 'marker_menu_refused'

    def _refresh_handles(self) -> None:
        """Let the RViz handles follow the arm, show reachability and the menu's state."""
        if self.handles is not None:
            self.handles.refresh()

    def begin_stop(self) -> float:
        """Stop planning (a stop was requested); return until when the node must keep sending (s).

        position_array: until the braking tail ends (the array timer samples
        it); every other output: now (the trajectory controller plays the last
        message's tail by itself; joint_states has no controller to stop).
        """
        self._stopping = True
        now = self._instant()[1]
        if self.output != 'position_array' or self.stream is None or not self._arrays_flow():
            return now
        tail = self.stream.tail()
        return min(tail[-1].time, now + STOP_TAIL_MAX_S) if tail else now

    def stop_done(self, deadline: float) -> bool:
        """Return True once the clock is past ``deadline`` (begin_stop's)."""
        return self._instant()[1] > deadline

    def _arrays_flow(self) -> bool:
        """Return True once position arrays may go out (a plan from the measured arm exists)."""
        return self.feedback is None or self.feedback.started

    def _feedback_settings(self, changes: Optional[Dict[str, object]] = None):
        """Return (feedback_timeout, resync_tolerance, servo_lag) of the parameters."""
        changes = changes or {}
        return tuple(float(self._value(name, changes)) for name in FEEDBACK_PARAMETERS)

    def _tick(self):
        """Make the session's motion step, publish its commands, then a side output when due.

        With feedback, the session's FeedbackPolicy may hold the plan (stale
        feedback: nothing published, the controller plays the last message's
        braking tail) or restart it from the measured state (logged here).
        """
        # One instant for the command and the stamp: the state is valid at its
        # stamp, whatever the solve costs afterwards.
        stamp, now = self._instant()
        self.clock.see(now, self.session is not None)
        self.solvers.switch_when_compiled(self.session)
        if self.session is not None and not self._stopping:
            if self.handles is not None:
                self.handles.apply(now)   # the newest dragged target: once per tick
            tick = self.session.tick(now)
            if tick.resynced:
                self.get_logger().warning(
                    'the measured joints left the commands of the last 4 x servo_lag by more '
                    'than resync_tolerance (pushed? controller switched?): continuing from '
                    'where the arm is', throttle_duration_sec=1.0)
            if tick.planned:
                self._publish(stamp, now)
        self._publish_side_outputs(now)

    def _publish_side_outputs(self, now: float) -> None:
        """Publish each side output (diagnostics, markers) that is due at ``now`` (s)."""
        for side in self._side_outputs:
            period, offset, due, publish = side
            if due is None or now < due - period:   # the first tick, or the clock went back
                due = side[2] = now + offset
            if now >= due:
                publish()
                due += period
                side[2] = due if due > now else now + period   # fell behind: no burst

    def _publish(self, stamp, now: float):
        """Publish the plan on the command output at this tick (its encoder's message).

        joint_states: the command at now. joint_trajectory: the stream's
        horizon, stamped with its first point's instant (at or before now).
        position_array: sent by its own timer (_send_array).
        """
        if self.output != 'position_array':
            self.command_pub.publish(self.encoder.message(self.stream, stamp, now))

    def _send_array(self):
        """position_array: the plan's positions at this instant, in command order.

        Also while stale feedback holds the plan: the forward controller would
        hold the last array (a stop as hard as the servo can), so the arrays go
        on along the braking tail to rest, as joint_trajectory_controller plays
        it. Nothing before the first measured state (no plan from the arm yet).
        """
        if self.stream is None or not self._arrays_flow():
            return
        stamp, now = self._instant()
        self.command_pub.publish(self.encoder.message(self.stream, stamp, now,
                                                      self._array_due(now)))

    def _array_due(self, now: float) -> float:
        """Return the instant, s, this array timer callback was scheduled for.

        The plan is sampled there, not at the instant the callback runs: a
        callback the scheduler ran 0.5 ms late sampled 0.5 ms of motion more,
        and at the controller's rate that jitter alone was 130x the
        acceleration limit (ik_bench controllers). rcl has already moved the
        timer to its next due time (periods it missed skipped), so this one
        was due a period before that.
        """
        until_ns = self._array_timer.time_until_next_call()
        if until_ns is None:
            return now
        return now + (until_ns - self._array_timer.timer_period_ns) * 1e-9   # send() clamps

    # -- side outputs --------------------------------------------------------------------------

    def _publish_diagnostics(self):
        """Publish one DiagnosticStatus: reachability, residuals, counts (see .diagnostics)."""
        now = self._instant()[1]
        status = None if self.session is None else self.session.status(now)
        stale = diagnostics.feedback_problem(self.feedback_topic, self.feedback, now)
        level, message = diagnostics.level_and_message(status, stale)
        values = {'rejected_messages': str(sum(self.rejected.values())),
                  'callback_errors': str(self.callback_errors),
                  'worker_errors': str(self.worker.errors)}
        values.update({f'rejected_{k}': str(v) for k, v in sorted(self.rejected.items())})
        values['targets_received'] = str(self.targets_received)
        values['poles_received'] = str(self.poles_received)
        values['twists_received'] = str(self.twists_received)
        values['command_output'] = f'{self.output} on {self.command_topic}'
        values.update(diagnostics.feedback_values(self.feedback_topic, self.feedback, now))
        if self.handles is not None:
            values.update(self.handles.values())
            values['handle_feedback_dropped_unread'] = str(self.handle_gaps.missing)
        values['targets_dropped_unread'] = str(self.target_gaps.missing)
        values['twists_dropped_unread'] = str(self.twist_gaps.missing)
        values['poles_dropped_unread'] = str(self.pole_gaps.missing)
        if status is not None:
            values.update(diagnostics.tracker_values(status))
        if self.session is not None:
            values.update(self.collision.values(self.session.q))

        if self.stream is not None:
            values.update(diagnostics.stream_values(self.stream, self.clock.late_ticks,
                                                    self.clock.jumps_back,
                                                    self.clock.jumps_forward))
        msg = DiagnosticArray(status=[DiagnosticStatus(
            level=level, name='ik_node: inverse kinematics', message=message,
            hardware_id='ik_node', values=[KeyValue(key=k, value=v) for k, v in values.items()])])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)

    def _publish_markers(self):
        """Publish the target arrow and the planned tip path (keys still ahead)."""
        if self.session is None:
            return
        stamp = self.get_clock().now().to_msg()
        target = Marker(type=Marker.ARROW, action=Marker.ADD, id=0, ns='target')
        target.header.frame_id, target.header.stamp = self.chain.base_link, stamp
        target.pose = matrix_to_pose(self.session.target_pose)
        target.scale.x, target.scale.y, target.scale.z = 0.1, 0.015, 0.015
        target.color.r, target.color.g, target.color.a = 1.0, 0.4, 1.0
        path = Marker(type=Marker.LINE_STRIP, action=Marker.ADD, id=1, ns='planned_path')
        path.header.frame_id, path.header.stamp = self.chain.base_link, stamp
        path.scale.x = 0.005
        path.color.b, path.color.g, path.color.a = 1.0, 0.6, 1.0
        path.pose.orientation.w = 1.0
        path.points = [Point(x=x, y=y, z=z)
                       for x, y, z in self.session.planned_tip_path().tolist()]
        if len(path.points) < 2:
            path.action = Marker.DELETE
        obstacles = self.collision.markers(self.chain.base_link, stamp)
        self.marker_pub.publish(MarkerArray(markers=[target, path] + obstacles))


def main(args=None, stop: Optional[StopRequest] = None, own_process: bool = False):
    """Run the node until SIGINT / SIGTERM; exit 1 with a message on a bad configuration.

    The first signal stops the node: with position_array it first plays its
    braking tail to rest on the array timer (the forward controller holds the
    last array: without it the arm would stop as hard as its servo can),
    bounded by STOP_TAIL_MAX_S; a second signal exits at once. Exit code 0.
    ``stop``: a StopRequest already installed (ik_node.ros.entry: signals
    from the first instant); a stop requested before the node exists ends at once.
    ``own_process``: the node is the process (its console script), which then
    ends without finalizing the interpreter when that is unsafe or noisy; in
    a process that goes on (a test), main returns.
    """
    if stop is None:
        stop = StopRequest()
        stop.install()
    if stop.count > 0:
        return 0
    node = None
    code = 0
    with rclpy.init(args=args, signal_handler_options=SignalHandlerOptions.NO):
        try:
            node = IKNode()
            code = run(node, stop)
        except (StartupError, ParameterException) as exc:
            print(f'ik_node: cannot start: {exc}', file=sys.stderr)
            code = 1
        except (KeyboardInterrupt, ExternalShutdownException):
            pass
        finally:
            if node is not None:
                try:
                    node.destroy_node()
                except Exception:  # noqa: B902 - already torn down by a shutdown
                    pass
    compiling = None if node is None else node.solvers.compiling
    if compiling is not None and not compiling.done:
        # The compile thread may be inside LLVM: finalizing the interpreter
        # around it can crash the exit. Everything of ours is shut down.
        compiling.cancel()
    if own_process and ((compiling is not None and not compiling.done) or 'ompl' in sys.modules):
        # OMPL's bindings (nanobind) print a page of 'leaked type/function'
        # lines when the interpreter finalizes after a plan; everything of
        # ours is shut down, so the process ends here instead.
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code)
    return code


if __name__ == '__main__':
    sys.exit(main(own_process=True))
