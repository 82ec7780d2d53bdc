# SPDX-License-Identifier: Apache-2.0

"""The ik_node ROS 2 node: target poses in, joint states out.

A thin adapter around :class:`ik_node.core.motion.session.MotionSession`,
the one owner of the motion step (trajectory, IK, feedback, joint speed /
acceleration / position limits, collision): messages become its inputs, its
committed plan goes out through one encoder per command output
(:mod:`ik_node.ros.outputs`). The rest is in rooms of its own: the
parameters are one table (:mod:`ik_node.ros.parameters`) routed to the
session's settings (:mod:`ik_node.ros.routing`); the robot model comes from
the parameters or the robot_description topic (:mod:`ik_node.ros.model_loading`);
``/diagnostics``, ``~/markers`` and the RViz handles go out from the tick at
their own rates (:mod:`ik_node.ros.side_outputs`); obstacles come from a file
and ``~/obstacles`` (:mod:`ik_node.ros.collision`). ``~/target_pose``
(geometry_msgs/PoseStamped) is validated (finite, quaternion not ~0,
frame_id empty or a link of the model); ``~/pole_target`` sets the elbow
pole; ``~/reset`` (std_srvs/Trigger) heads back to the initial joints. A
timer at ``publish_rate`` makes the session's tick and publishes its
commands, then the side outputs that are due.
"""

import collections
import functools
import os
import sys
import time
from typing import Optional

from geometry_msgs.msg import PointStamped, PoseStamped, TwistStamped
from ik_node.core.errors import ModelError
from ik_node.core.model.chain import Chain
from ik_node.core.model.frames import LinkFrames
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.stream import CommandStream
from ik_node.core.motion.worker import ThreadWorker
from ik_node.core.supply import SolverSupply
from ik_node.ros.clock_watch import ClockWatch
from ik_node.ros.collision import CollisionSupport
from ik_node.ros.conversions import check_point, check_target, check_twist, frames_at, \
    pose_matrix, RejectedMessage
from ik_node.ros.delivery import SequenceGaps
from ik_node.ros.group import declare_effectors, GroupFront
from ik_node.ros.handles import TargetHandles
from ik_node.ros.marker_server import MarkerServer
from ik_node.ros.model_loading import ModelLoader
from ik_node.ros.outputs import OUTPUTS
from ik_node.ros.parameters import declare_parameters, StartupError
from ik_node.ros.routing import ParameterRouting
from ik_node.ros.side_outputs import SideOutputs
# StopRequest is also the entry's (ik_node.ros.entry: node.StopRequest).
from ik_node.ros.spin import run, StopRequest
from rcl_interfaces.msg import SetParametersResult
import rclpy
from rclpy.exceptions import NameValidationException, ParameterException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import InteractiveMarkerFeedback, MarkerArray

# On SIGINT with position_array, the braking tail is played for at most this long (s).
STOP_TAIL_MAX_S = 5.0


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
        self.epoch_ns = self.get_clock().now().nanoseconds
        declare_parameters(self)
        effectors = declare_effectors(self)   # several end effectors: their parameters
        self.params = ParameterRouting(self)
        self.params.warn_unknown()
        self.params.check_choices()
        # The numba kernels compile in the background (KernelCompile); until
        # the ones a solver needs are done it runs on the numpy backend.
        self.solvers = SolverSupply(self.get_logger(),
                                    lambda: self.get_parameter('solver').value,
                                    self.params.config)
        # publish_rate is fixed at start-up (refused at run time).
        rate = self.get_parameter('publish_rate').value
        self.period = 1.0 / rate
        self.output = self.get_parameter('command_output').value
        self.clock = ClockWatch(self.period, self.get_logger())
        self.rejected = collections.Counter()
        self.callback_errors = 0
        self.chain: Optional[Chain] = None
        # The one owner of the motion step (targets, twists, states, settings in;
        # the committed plan out); None until the robot model is loaded.
        self.session: Optional[MotionSession] = None
        self._stopping = False
        self.targets_received = self.poles_received = self.twists_received = 0
        # Targets / poles the keep-last queue dropped (oldest first) or the
        # transport lost before a callback saw them.
        self.target_gaps, self.pole_gaps = SequenceGaps(), SequenceGaps()
        self.point_gaps = SequenceGaps()
        self.twist_gaps = SequenceGaps()
        self.encoder = None   # of the command output, for the model's joints
        self.frames: Optional[LinkFrames] = None
        self.command_order: Optional[list] = None   # chain indices in command order
        self.collision = CollisionSupport(self.get_logger(), self.rejected)
        self.model = ModelLoader(self)
        self.add_on_set_parameters_callback(
            self._guarded(self.params.validate, _refused_parameters))
        self.add_post_set_parameters_callback(self._guarded(self.params.apply))
        kind, default_topic = OUTPUTS[self.output]
        self.command_topic = self.get_parameter('command_topic').value or default_topic
        # Several end effectors command one controller each (ros/group.py), not this topic.
        self.command_pub = None if effectors and self.output != 'joint_states' else \
            self._named_topic('command_topic', self.create_publisher, kind,
                              self.command_topic, 10)
        self.handles: Optional[TargetHandles] = None
        self.handle_gaps = SequenceGaps()
        self.feedback_topic = self.get_parameter('feedback_topic').value
        # Several end effectors: their own topics, model, session and outputs (ros/group.py).
        self.group = GroupFront(self, effectors) if effectors else None
        if self.group is None:
            self._start_one_arm()
        self.feedback_topic_subscribe()
        self.create_service(Trigger, '~/reset', self._guarded(self._on_reset, _failed_trigger))
        self.create_subscription(MarkerArray, '~/obstacles', self._guarded(self._on_obstacles),
                                 QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                                            reliability=ReliabilityPolicy.RELIABLE))
        if self.group is None:
            self._load_model()
        self.side_outputs = SideOutputs(self, self._guarded) if self.group is None else None
        self.create_timer(self.period, self._guarded(self._tick))
        if self.output == 'position_array':
            array_rate = self.get_parameter('controller_rate').value or rate
            self._array_timer = self.create_timer(1.0 / array_rate,
                                                  self._guarded(self._send_array))
            self.get_logger().warning(position_array_warning(array_rate))

    def _start_one_arm(self) -> None:
        """Make the topics of one end effector (targets, points, poles, twists, handles)."""
        self.create_subscription(PoseStamped, '~/target_pose', self._guarded(self._on_target),
                                 self.params.target_qos())
        # A point target: the position (or the point looked at) of a task that counts no more.
        self.create_subscription(PointStamped, '~/target_point',
                                 self._guarded(self._on_target_point), self.params.target_qos())
        self.create_subscription(PointStamped, '~/pole_target', self._guarded(self._on_pole),
                                 self.get_parameter('target_queue_depth').value)
        # Twists: only the newest matters (a velocity stream); keep-last 1, so a
        # flood costs one callback per tick, not one per message (the rest are
        # replaced unread and counted: twists_dropped_unread).
        twist_qos = self.params.target_qos()
        twist_qos.depth = 1
        self.create_subscription(TwistStamped, '~/target_twist', self._guarded(self._on_twist),
                                 twist_qos)

    def feedback_topic_subscribe(self) -> None:
        """Follow the robot's joint states on feedback_topic, when set."""
        if self.feedback_topic:
            # Best effort matches a broadcaster of either reliability.
            self._named_topic('feedback_topic', self.create_subscription, JointState,
                              self.feedback_topic, self._guarded(self._on_feedback),
                              QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                                         reliability=ReliabilityPolicy.BEST_EFFORT))

    def _load_model(self) -> None:
        """Load the model of the parameters, else wait for it on robot_description; handles."""
        if self.get_parameter('target_marker').value:
            server = MarkerServer(self, '~/target_marker', self._guarded(self._on_handle))
            self.handles = TargetHandles(server, self, time.monotonic)
        self.model.load_from_parameters()
        if self.chain is None:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE,
                                 history=HistoryPolicy.KEEP_LAST)
            self.create_subscription(String, 'robot_description',
                                     self._guarded(self.model.on_description), latched)
            self.get_logger().info('waiting for the robot model on the robot_description topic')

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

    def _solver_for(self, name: str):
        """Build the solver ``name`` for the loaded chain (ModelError when it cannot be)."""
        if self.group is not None:
            raise ModelError('solver: several end effectors are solved by the stacked '
                             'Jacobian only')
        return self.solvers.ready(self.chain, name, self.session.q,
                                  task=self.session.tracker.solver.task)

    # -- robot model -----------------------------------------------------------------------

    # -- collision ----------------------------------------------------------------------------

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
        return now, (now.nanoseconds - self.epoch_ns) * 1e-9

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

    def _on_target_point(self, msg: PointStamped, info):
        """Take a point target: for the position and look_at tasks (a point has no orientation)."""
        self.point_gaps.note(info)
        if self.session is None:
            self.rejected['no_model'] += 1
            return
        task = self.session.tracker.solver.task
        try:
            if task.name not in ('position', 'look_at'):
                raise RejectedMessage('point_for_task', f'a point has no orientation, and the '
                                      f'task {task.name!r} needs one: send ~/target_pose')
            point = check_point(msg, self.resolver())
        except RejectedMessage as exc:
            self.rejected[exc.reason] += 1
            self.get_logger().warning(f'target point rejected: {exc}', throttle_duration_sec=1.0)
            return
        self.targets_received += 1
        self.session.target(self._instant()[1], pose_matrix(point, (0.0, 0.0, 0.0, 1.0)))

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
            if not self.session.tracker.solver.task.smooth:
                raise RejectedMessage('twist_for_task', 'a twist moves the tip, and the look_at '
                                      'task aims the tool at a point: send target points')
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
        stamp = None if stamp_ns == 0 else (stamp_ns - self.epoch_ns) * 1e-9
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
        if self.group is None:
            self.solvers.switch_when_compiled(self.session)
        else:
            self.group.switch_when_compiled()
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
        if self.group is not None:
            self.group.publish_side(now)
        else:
            self.side_outputs.publish_due(now)

    def _publish(self, stamp, now: float):
        """Publish the plan on the command output at this tick (its encoder's message).

        joint_states: the command at now. joint_trajectory: the stream's
        horizon, stamped with its first point's instant (at or before now).
        position_array: sent by its own timer (_send_array).
        """
        if self.group is not None:
            self.group.publish(stamp, now)
        elif self.output != 'position_array':
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
        if self.group is not None:
            self.group.send_arrays(now, self._array_due(now))
            return
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
