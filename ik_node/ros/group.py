# SPDX-License-Identifier: Apache-2.0

"""Several end effectors in one node: their parameters, topics, model, outputs and diagnostics.

With ``end_effectors: [left, right]`` the node drives every joint of the
chains ``<name>.base_link`` -> ``<name>.tip_link`` at once
(:class:`ik_node.core.motion.group.GroupTracker`: one stacked solve per
motion step, shared joints such as a torso once, ``joint_weights`` and
``locked_joints`` applied). Per end effector:

* parameters ``<name>.tip_link``, ``<name>.base_link`` (default
  ``base_link``; every chain from the same one), ``<name>.task``,
  ``<name>.tool_axis``, ``<name>.command_topic``;
* topics ``~/<name>/target_pose`` (PoseStamped), ``~/<name>/target_point``
  (PointStamped, for position and look_at), in any link frame the driven
  joints place, ``~/<name>/target_twist`` (TwistStamped: teleoperation
  of that end effector, a body twist in its tip frame) and
  ``~/<name>/pole_target`` (PointStamped: its elbow turns toward the point
  while the hands hold their targets; ``<name>.elbow_joint`` names the
  elbow, by default the fourth joint from the tip);
* with ``command_output: joint_trajectory``, its own JointTrajectory on
  ``<name>.command_topic`` (default ``/<name>_controller/joint_trajectory``)
  with its chain's joints, a joint shared with an earlier end effector left
  to that one's controller; with ``position_array``, its own
  Float64MultiArray of those joints (default ``/<name>_controller/commands``),
  every end effector's from one sample of the plan at the array timer's
  instant; with ``joint_states``, one JointState of every driven joint;
* its verdict in ``/diagnostics`` (one status per end effector).

With ``collision_checking`` the collision model holds every driven link
(both arms, the torso: the arms are kept apart as a chain's links are) and
the obstacles (obstacles_file, ``~/obstacles``), with the SRDF's pairs
disabled. With ``target_marker``, one RViz handle per end effector
(ik_node.ros.group_handles). Not with several end effectors (said at
start-up, or refused with one line): another solver; a second model on the
robot_description topic (the first one builds the node, as the parameters'
would; a later one is refused and logged: restart the node).
"""

import re
import time
from typing import Dict, List, Optional, Sequence, Tuple

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import PointStamped, PoseStamped, TwistStamped
from ik_node.core.errors import IKError
from ik_node.core.ik.stacked import elbow_joint, EndEffector, StackedIK
from ik_node.core.model.frames import UnionFrames
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.group import GroupTracker
from ik_node.core.motion.session import MotionSession
from ik_node.core.warm import ThreadWarmUp
from ik_node.description.urdf import chain_from_urdf_string, link_frames, read_urdf_file
from ik_node.ros.conversions import check_point, check_target, check_twist, frames_at, \
    pose_matrix, RejectedMessage
from ik_node.ros.group_handles import GroupHandles
from ik_node.ros.marker_server import MarkerServer
from ik_node.ros.model_loading import STARTUP_COMPILE_WAIT_S
from ik_node.ros.outputs import JointStatesEncoder, JointTrajectoryEncoder
from ik_node.ros.parameters import initial_positions, StartupError, task_for
from rcl_interfaces.msg import ParameterDescriptor
from rclpy.exceptions import ParameterUninitializedException
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from std_msgs.msg import Float64MultiArray, String
from trajectory_msgs.msg import JointTrajectory

# An end effector's name: a token of a topic name (~/<name>/target_pose) and a parameter prefix.
NAME = re.compile(r'^[A-Za-z][A-Za-z0-9_]*$')
# Per end effector: (key, default, description).
EFFECTOR_PARAMETERS = (
    ('tip_link', '', 'the link whose pose this end effector controls'),
    ('base_link', '', "the chain's first link ('' = base_link; every chain from the same one)"),
    ('task', '', "what of its target counts ('' = pose, or position below 6 joints)"),
    ('tool_axis', Parameter.Type.DOUBLE_ARRAY, 'its tool axis, tip frame (axis, look_at)'),
    ('command_topic', '', "joint_trajectory / position_array: its controller's topic "
     "('' = /<name>_controller/joint_trajectory or /<name>_controller/commands)"),
    ('elbow_joint', '', "the joint whose origin ~/<name>/pole_target turns ('' = the fourth "
     'from the tip)'),
)
DIAGNOSTICS_PERIOD_S = 0.5
HANDLES_PERIOD_S = 0.05
LEVELS = {'arrived': DiagnosticStatus.OK, 'holding': DiagnosticStatus.OK,
          'moving': DiagnosticStatus.OK, 'unreachable': DiagnosticStatus.WARN}


def _array(node, name: str) -> list:
    """Return an array parameter's value ([] when it was not set: an array has no default)."""
    try:
        return list(node.get_parameter(name).value or [])
    except ParameterUninitializedException:
        return []


def declare_effectors(node) -> List[str]:
    """Declare each end effector's parameters; return the names (empty: one end effector).

    Raises:
        StartupError: a name that is not a topic token, or a name twice.

    """
    names = list(_array(node, 'end_effectors'))
    for name in names:
        if not NAME.match(name):
            raise StartupError(f'end_effectors: {name!r} is not a name (a letter, then letters, '
                               'digits or _)')
    if len(set(names)) != len(names):
        raise StartupError(f'end_effectors: a name given twice in {names}')
    for name in names:
        for key, default, text in EFFECTOR_PARAMETERS:
            node.declare_parameter(f'{name}.{key}', default,
                                   ParameterDescriptor(description=text))
    return names


def joint_weights(entries: Sequence[str]) -> Dict[str, float]:
    """Return {joint: weight} of ``'joint:weight'`` entries (StartupError: a bad entry)."""
    out: Dict[str, float] = {}
    for entry in entries or ():
        name, sep, value = str(entry).rpartition(':')
        try:
            weight = float(value)
        except ValueError:
            weight = float('nan')
        if not sep or not name or not (0.0 < weight <= 1.0):
            raise StartupError(f"joint_weights: expected 'joint:weight' with a weight in (0, 1], "
                               f'received {entry!r}')
        out[name] = weight
    return out


def command_groups(effectors: Sequence[EndEffector], union) -> List[List[int]]:
    """Return per end effector the union indices its controller commands.

    Its chain's joints, in chain order, less those of an earlier end
    effector (a shared torso goes to the first controller).
    """
    taken: set = set()
    groups = []
    for cols in union.columns:
        group = [int(c) for c in cols if int(c) not in taken]
        taken.update(group)
        groups.append(group)
    return groups


class GroupFront:
    """The group mode of an IKNode (module docstring): its topics, session and outputs.

    Args:
        node: the IKNode (parameters, logger, clock, solver supply, worker, counters).
        names: the end effectors' names (declare_effectors).

    Raises:
        StartupError: a configuration the group mode cannot serve (one line).

    """

    def __init__(self, node, names: Sequence[str]):
        """Make the topics; build from the model of the parameters, else wait for the topic."""
        self._node = node
        self.names = list(names)
        self.effectors: List[EndEffector] = []
        self.outputs: List[tuple] = []
        self.arrays: List[Tuple[object, List[int]]] = []   # position_array: (publisher, joints)
        self.received: Dict[str, int] = dict.fromkeys(self.names, 0)
        self._diagnostics_due: Optional[float] = None
        self._handles_due: Optional[float] = None
        self._warming: Optional[ThreadWarmUp] = None   # the numba solver warming up
        self._stays_numpy = False   # its warm-up failed
        self._refuse_unbuilt()
        self._subscribe()
        self._diag_pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)
        text = self._description()
        if text is not None:
            self._build(text)
            return
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE,
                             history=HistoryPolicy.KEEP_LAST)
        node.create_subscription(String, 'robot_description',
                                 node._guarded(self._on_description), latched)
        node.get_logger().info('waiting for the robot model on the robot_description topic')

    def _on_description(self, msg: String) -> None:
        """Build from the first model on the topic; a refused one is logged (and a later one)."""
        node = self._node
        if node.session is not None:
            node.rejected['robot_description'] += 1
            node.get_logger().error('robot_description: a new model is not taken with several '
                                    'end effectors (restart the node); keeping the old one')
            return
        try:
            self._build(msg.data)
        except (IKError, StartupError) as exc:
            node.rejected['robot_description'] += 1
            node.get_logger().error(f'robot_description refused, waiting for another: {exc}')

    def _build(self, text: str) -> None:
        """Build the stacked solver, the session, outputs, collision and handles of URDF text.

        Raises:
            StartupError: the model does not serve the end effectors (nothing is kept).

        """
        node = self._node
        effectors, lines = self._effectors(text)
        self.effectors = effectors
        self.backend = self._backend()
        stacked = self._stacked(self.backend)
        union = stacked.union
        try:
            q0 = initial_positions(union, node.params.value('initial_positions', {}))
        except IKError as exc:
            raise StartupError(str(exc)) from None
        frames = UnionFrames([link_frames(text, e.chain) for e in effectors], union.columns)
        self.outputs = self._outputs(union)
        stacked.warm_up()
        self.stacked = stacked
        tracker = GroupTracker(stacked, node.params.config(), q0, node.now_s(),
                               backend=node.solvers.tracker_backend(), worker=node.worker)
        feedback = None if not node.feedback_topic else FeedbackPolicy(
            union.names, union.lower, union.upper, union.velocity,
            *node.params.feedback_settings())
        node.session = MotionSession(tracker, node.period, node.model.lead(),
                                     node.params.jerk(), budget_s=node.model.budget(),
                                     feedback=feedback, own_robot=node.output == 'joint_states')
        node.chain = union
        self.frames = node.frames = frames
        for line in lines + self._summary(union):
            node.get_logger().info(line)
        node.model.use_collision(text, union, self.frames, q0)
        if not node.collision.checking:
            node.get_logger().warning('several end effectors: collision is not checked (the '
                                      'arms are not kept apart)')
        if node.get_parameter('target_marker').value:
            server = MarkerServer(node, '~/target_marker', node._guarded(node._on_handle))
            node.handles = GroupHandles(server, node, time.monotonic, self.names)
            node.handles.use_model()

    # -- start-up -------------------------------------------------------------------------

    def _refuse_unbuilt(self) -> None:
        """Raise StartupError for a setting the group mode does not serve."""
        node = self._node
        if node.params.value('command_joint_order', {}):
            raise StartupError('command_joint_order: with end_effectors, each controller gets '
                               "its end effector's joints in chain order")

    def _description(self) -> Optional[str]:
        """Return the URDF text of robot_description or urdf_path (None: neither; the topic)."""
        node = self._node
        text = node.get_parameter('robot_description').value
        path = node.get_parameter('urdf_path').value
        if not (text or path):
            return None
        try:
            return text if text else read_urdf_file(
                path, node.params.value('xacro_arguments', {}) or ())
        except IKError as exc:
            raise StartupError(f'robot model: {exc}') from None

    def _effectors(self, text: str) -> Tuple[List[EndEffector], List[str]]:
        """Return the end effectors of the parameters and a start-up line for each task."""
        node = self._node
        base = node.get_parameter('base_link').value
        out, lines = [], []
        for name in self.names:
            tip = node.get_parameter(f'{name}.tip_link').value
            own_base = node.get_parameter(f'{name}.base_link').value or base
            if not tip or not own_base:
                raise StartupError(f'end effector {name}: set {name}.tip_link and base_link (or '
                                   f'{name}.base_link)')
            try:
                chain = chain_from_urdf_string(text, own_base, tip)
            except IKError as exc:
                raise StartupError(f'end effector {name}: {exc}') from None
            task, line = task_for(chain, node.get_parameter(f'{name}.task').value,
                                  node.params.value(f'{name}.tool_axis', {}))
            chosen = node.get_parameter(f'{name}.elbow_joint').value
            try:
                elbow = elbow_joint(chain, chosen)
            except IKError as exc:
                raise StartupError(f'{name}.elbow_joint: {exc}') from None
            out.append(EndEffector(name, chain, task, chosen))
            lines.append(f'{name}: {line}; ' + (
                f'~/{name}/pole_target turns the elbow at {elbow}' if elbow else
                f'no elbow (fewer than 4 joints): ~/{name}/pole_target is not used'))
        return out, lines

    def _backend(self) -> str:
        """Return the stacked solver's backend: numba when its kernels are ready, else numpy."""
        node, first = self._node, self.effectors[0]
        solver = node.solvers.ready(first.chain, 'jacobian', first.chain.mid_limits(),
                                    STARTUP_COMPILE_WAIT_S, first.task)
        return solver.backend

    def _stacked(self, backend: str) -> StackedIK:
        """Return the StackedIK of the end effectors, weights and locks (StartupError)."""
        node = self._node
        try:
            return StackedIK(self.effectors,
                             joint_weights=joint_weights(
                                 node.params.value('joint_weights', {})) or None,
                             locked=list(node.params.value('locked_joints', {}) or ()),
                             backend=backend, timeout_s=node.params.config().ik_timeout)
        except IKError as exc:
            raise StartupError(str(exc)) from None

    def _summary(self, union) -> List[str]:
        """Return the start-up lines of the joints and the outputs."""
        shared = union.shared()
        lines = [f'end effectors: {", ".join(e.name + " (" + e.chain.tip_link + ", " + str(e.chain.n) + " joints)" for e in self.effectors)}; '  # noqa: E501
                 f'{union.n} joints driven, shared: {", ".join(shared) or "none"}; stacked '
                 f'Jacobian on {self.stacked.backend}']
        for topic, encoder, joints in self._described_outputs:
            lines.append(f'commands: {joints} on {topic}')
        return lines

    def _outputs(self, union) -> List[tuple]:
        """Return (publisher, encoder) per output: one JointState, or one per controller."""
        node = self._node
        clock = node.get_clock().clock_type
        self.arrays = []   # anew (a model refused after its outputs were made)
        if node.output == 'joint_states':
            self._described_outputs = [(node.command_topic, None, list(union.names))]
            return [(node.command_pub, JointStatesEncoder(union.names, range(union.n),
                                                          node.epoch_ns, clock))]
        outputs, self._described_outputs = [], []
        arrays = node.output == 'position_array'
        for effector, group in zip(self.effectors, command_groups(self.effectors, union)):
            if not group:
                continue
            name = effector.name
            topic = node.get_parameter(f'{name}.command_topic').value or \
                f'/{name}_controller/{"commands" if arrays else "joint_trajectory"}'
            if arrays and topic.rstrip('/').endswith('/joint_trajectory'):
                raise StartupError(f'{name}.command_topic {topic}: a joint_trajectory_controller'
                                   "'s topic, and command_output is position_array: set it to "
                                   "the forward controller's commands topic")
            pub = node._named_topic(f'{name}.command_topic', node.create_publisher,
                                    Float64MultiArray if arrays else JointTrajectory, topic, 10)
            if arrays:   # sent by the node's array timer (send_arrays)
                self.arrays.append((pub, list(group)))
            else:
                outputs.append((pub, JointTrajectoryEncoder(union.names, group, node.epoch_ns,
                                                            clock)))
            self._described_outputs.append((topic, None, [union.names[k] for k in group]))
        return outputs

    def _subscribe(self) -> None:
        """Make each end effector's target topics."""
        node = self._node
        for name in self.names:
            node._named_topic('end_effectors', node.create_subscription, PoseStamped,
                              f'~/{name}/target_pose',
                              node._guarded(self._pose_callback(name)),
                              node.params.target_qos())
            node._named_topic('end_effectors', node.create_subscription, PointStamped,
                              f'~/{name}/target_point',
                              node._guarded(self._point_callback(name)),
                              node.params.target_qos())
            # Twists: the newest matters (keep-last 1), as the one-arm node's.
            twist_qos = node.params.target_qos()
            twist_qos.depth = 1
            node._named_topic('end_effectors', node.create_subscription, TwistStamped,
                              f'~/{name}/target_twist',
                              node._guarded(self._twist_callback(name)), twist_qos)
            node._named_topic('end_effectors', node.create_subscription, PointStamped,
                              f'~/{name}/pole_target',
                              node._guarded(self._pole_callback(name)),
                              node.params.target_qos())

    # -- inputs ----------------------------------------------------------------------------

    def _pose_callback(self, name: str):
        def on_target_pose(msg: PoseStamped):
            self._take(name, msg, False)
        return on_target_pose

    def _point_callback(self, name: str):
        def on_target_point(msg: PointStamped):
            self._take(name, msg, True)
        return on_target_point

    def _pole_callback(self, name: str):
        def on_pole_target(msg: PointStamped):
            self._take_pole(name, msg)
        return on_pole_target

    def _take_pole(self, name: str, msg: PointStamped) -> None:
        """Validate a pole of end effector ``name`` (any link frame) and hand it on."""
        node = self._node
        if self._no_model():
            return
        try:
            pole = check_point(msg, frames_at(self.frames, node.session.q))
        except RejectedMessage as exc:
            node.rejected[exc.reason] += 1
            node.get_logger().warning(f'{name}: pole rejected: {exc}',
                                      throttle_duration_sec=1.0)
            return
        node.poles_received += 1
        node.session.pole_of(name, pole)

    def _twist_callback(self, name: str):
        def on_target_twist(msg: TwistStamped):
            self._take_twist(name, msg)
        return on_target_twist

    def _take_twist(self, name: str, msg: TwistStamped) -> None:
        """Validate a twist of end effector ``name`` (its tip frame: a body twist); hand it on."""
        node = self._node
        if self._no_model():
            return
        effector = self.effectors[self.names.index(name)]
        try:
            if not effector.task.smooth:
                raise RejectedMessage('twist_for_task', f'~/{name}/target_twist: a twist moves '
                                      'the tip, and the look_at task aims the tool at a point')
            linear, angular, body = check_twist(msg, frames_at(self.frames, node.session.q),
                                                effector.chain.tip_link)
        except RejectedMessage as exc:
            node.rejected[exc.reason] += 1
            node.get_logger().warning(f'{name}: twist rejected: {exc}',
                                      throttle_duration_sec=1.0)
            return
        node.twists_received += 1
        node.session.twist_of(name, node.now_s(), linear, angular, body)

    def _take(self, name: str, msg, point: bool) -> None:
        """Validate a target of end effector ``name`` and hand it to the session."""
        node = self._node
        if self._no_model():
            return
        task = self.effectors[self.names.index(name)].task
        try:
            if point:
                if task.name not in ('position', 'look_at'):
                    raise RejectedMessage('point_for_task', f'~/{name}/target_point: the task '
                                          f'{task.name} needs an orientation; send target_pose')
                position = check_point(msg, frames_at(self.frames, node.session.q))
                pose = pose_matrix(position, (0.0, 0.0, 0.0, 1.0))
            else:
                p, q = check_target(msg, frames_at(self.frames, node.session.q))
                pose = pose_matrix(p, q)
        except RejectedMessage as exc:
            node.rejected[exc.reason] += 1
            node.get_logger().warning(f'{name}: target rejected: {exc}',
                                      throttle_duration_sec=1.0)
            return
        self.received[name] += 1
        node.targets_received += 1
        node.session.target_of(name, node.now_s(), pose)

    def _no_model(self) -> bool:
        """Return True (the message counted as rejected: no_model) before the model is built."""
        node = self._node
        if node.session is not None:
            return False
        node.rejected['no_model'] += 1
        return True

    # -- outputs ----------------------------------------------------------------------------

    def send_arrays(self, now: float, due: float) -> None:
        """position_array: each controller's joints of one sample of the plan (s, s).

        The plan is sampled once, at ``due`` (the array timer's instant,
        CommandStream.send), so every controller gets the same instant.
        """
        q = self._node.session.plan.send(now, due)
        for pub, group in self.arrays:
            pub.publish(Float64MultiArray(data=[float(q[k]) for k in group]))

    def publish(self, stamp, now: float) -> None:
        """Publish the plan on each command output (position_array: none here, send_arrays)."""
        stream = self._node.session.plan
        for pub, encoder in self.outputs:
            pub.publish(encoder.message(stream, stamp, now))

    def switch_when_compiled(self) -> None:
        """With the kernels compiled and the arm at rest, go on with the stacked solve on numba.

        The numba solver warms up in a thread (ThreadWarmUp) from the tick
        the kernels are ready; the tick takes it at rest once it is warm.
        """
        node = self._node
        solvers, session = node.solvers, node.session
        solvers.collect()
        if session is None or not solvers.warm:
            return
        tracker = session.tracker
        on_numpy = tracker.solver.backend == 'numpy' and not self._stays_numpy
        if on_numpy and self._warming is None:
            self._warming = ThreadWarmUp(self._stacked('auto'))
        if not tracker.idle():   # a motion runs on one backend from its start to its end
            return
        if tracker.backend == 'numpy':
            session.use_backend('auto')
        if on_numpy and self._warming.finished():
            self._take_warm_solver(tracker)

    def _take_warm_solver(self, tracker) -> None:
        """Solve on the warmed-up numba solver from now on (numpy on, if its warm-up failed)."""
        warming, self._warming = self._warming, None
        logger = self._node.get_logger()
        if warming.error is not None:
            self._stays_numpy = True
            logger.warning(f'the stacked Jacobian stays on numpy: its numba warm-up failed '
                           f'({warming.error})')
            return
        tracker.solver = self.stacked = warming.solver
        logger.info(f'stacked Jacobian: {warming.solver.backend} from now on')

    def publish_side(self, now: float) -> None:
        """Refresh the handles at HANDLES_PERIOD_S and the diagnostics when due (s)."""
        node = self._node
        due = self._handles_due
        if node.handles is not None and (due is None or now >= due or now < due - 1.0):
            self._handles_due = now + HANDLES_PERIOD_S
            node._guarded(node.handles.refresh)()
        self.publish_diagnostics(now)

    def publish_diagnostics(self, now: float) -> None:
        """Publish one DiagnosticStatus per end effector at DIAGNOSTICS_PERIOD_S (when due)."""
        due = self._diagnostics_due
        if self._node.session is None or (due is not None and now < due and
                                          now > due - 2 * DIAGNOSTICS_PERIOD_S):
            return
        self._diagnostics_due = now + DIAGNOSTICS_PERIOD_S
        node = self._node
        status = node.session.status(now)
        msg = DiagnosticArray()
        msg.header.stamp = node.get_clock().now().to_msg()
        for effector, arrival in zip(self.effectors, status.arrival.effectors):
            values = {'end_effector': effector.name, 'tip_link': effector.chain.tip_link,
                      'task': effector.task.name, 'arrival': arrival.state,
                      'arrival_reason': arrival.reason,
                      'position_error_m': f'{arrival.position_error:.6g}',
                      'orientation_error_rad': f'{arrival.orientation_error:.6g}',
                      'targets_received': str(self.received[effector.name]),
                      'mode': status.mode, 'shared_joints': ', '.join(status.shared),
                      'rejected_messages': str(sum(node.rejected.values())),
                      'callback_errors': str(node.callback_errors)}
            if node.handles is not None:
                values.update(node.handles.values())
            msg.status.append(DiagnosticStatus(
                level=LEVELS.get(arrival.state, DiagnosticStatus.WARN),
                name=f'{node.get_name()}: {effector.name}', hardware_id=effector.chain.tip_link,
                message=f'{effector.name}: {arrival.state}' +
                (f' ({arrival.reason})' if arrival.reason else ''),
                values=[KeyValue(key=k, value=v) for k, v in values.items()]))
        self._diag_pub.publish(msg)
