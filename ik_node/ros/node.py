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

"""The ik_node ROS 2 node: target poses in, smoothed joint states out.

Data flow (see the README): ``~/target_pose`` (geometry_msgs/PoseStamped) is
validated (finite, quaternion not ~0, frame_id empty or the base link) and
becomes a key of a Cartesian trajectory (cubic in exp-map space); a timer at
``publish_rate`` samples it, solves IK warm-started from the last joint
vector (analytic for SRS arms when ``solver`` allows, else Jacobian), limits
joint speeds, and publishes ``joint_states``. Side outputs: ``/diagnostics``,
``~/markers``; ``~/reset`` (std_srvs/Trigger) returns to the initial pose.
"""

import collections
import functools
import gc
import sys
import time
from typing import Optional

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point, PointStamped, PoseStamped
from ik_node.core.backend import compiled_status
from ik_node.core.chain import Chain
from ik_node.core.errors import IKError
from ik_node.core.jacobian_ik import JacobianIK
from ik_node.core.result import pose_error
from ik_node.core.rotations import matrix_to_quaternion, quaternion_to_matrix
from ik_node.core.srs import AnalyticSRS
from ik_node.core.trajectory import CartesianTrajectory
from ik_node.ros.conversions import check_point, check_target, joint_state, matrix_to_pose, \
    RejectedMessage
from ik_node.ros.delivery import SequenceGaps
from ik_node.urdf import chain_from_urdf_file, chain_from_urdf_string
import numpy as np
from rcl_interfaces.msg import FloatingPointRange, IntegerRange, ParameterDescriptor, \
    SetParametersResult
import rclpy
from rclpy.exceptions import ParameterException, ParameterUninitializedException
from rclpy.executors import ExternalShutdownException
from rclpy.node import Node
from rclpy.parameter import Parameter
from rclpy.qos import DurabilityPolicy, HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from std_srvs.srv import Trigger
from visualization_msgs.msg import Marker, MarkerArray

SOLVERS = ('auto', 'analytic', 'jacobian')
QOS_CHOICES = ('reliable', 'best_effort')
# Diagnostics and markers are published at about these rates (Hz), below the
# joint-state rate: they are for people and RViz. They are sent from the
# joint-state tick, right after its joint_states message, so that they never
# delay one (a separate timer firing first would).
DIAGNOSTICS_HZ = 2.0
MARKERS_HZ = 5.0
# Targets farther from the base than this times the chain's reach bound are
# pulled onto that sphere (they are out of reach either way).
WORKSPACE_MARGIN = 1.25
# Solve-time percentiles in the diagnostics are over this many recent solves.
SOLVE_TIME_WINDOW = 1000
# At an unreachable target that no longer moves, a new closest pose replaces
# the chosen one only when its squared residual is this fraction smaller.
FALLBACK_GAIN = 0.01


class StartupError(Exception):
    """A configuration that prevents the node from starting (reported, exit 1)."""


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


def _descriptor(text: str, low: Optional[float] = None,
                high: Optional[float] = None) -> ParameterDescriptor:
    d = ParameterDescriptor(description=text)
    if low is not None:
        d.floating_point_range = [FloatingPointRange(from_value=low, to_value=high, step=0.0)]
    return d


def _int_descriptor(text: str, low: int, high: int) -> ParameterDescriptor:
    d = ParameterDescriptor(description=text)
    d.integer_range = [IntegerRange(from_value=low, to_value=high, step=1)]
    return d


class IKNode(Node):
    """Inverse kinematics node (see the module docstring)."""

    def __init__(self, **kwargs):
        """Declare parameters, load the robot model, create the ROS interfaces."""
        super().__init__('ik_node', **kwargs)
        self._declare_parameters()
        self._log_backend()
        # publish_rate is fixed at start-up (refused at run time).
        self._period = 1.0 / self.get_parameter('publish_rate').value
        self.rejected = collections.Counter()
        self.callback_errors = 0
        self.chain: Optional[Chain] = None
        self.last_result = None
        self.target_result = None
        self.last_solve_s = 0.0
        self.solve_times = collections.deque(maxlen=SOLVE_TIME_WINDOW)
        self.targets_received = self.poles_received = self.targets_clamped = 0
        # Targets / poles the keep-last queue dropped (oldest first) or the
        # transport lost before a callback saw them.
        self.target_gaps, self.pole_gaps = SequenceGaps(), SequenceGaps()
        self._target_unchecked = False
        self._fallback = None   # (pose, squared residual, joints) on unreachable targets
        self._joint_msg = JointState()
        self.pole: Optional[np.ndarray] = None
        self.q: Optional[np.ndarray] = None
        self.add_on_set_parameters_callback(
            self._guarded(self._on_set_parameters, _refused_parameters))
        self.joint_pub = self.create_publisher(JointState, 'joint_states', 10)
        self.diag_pub = self.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self.marker_pub = self.create_publisher(MarkerArray, '~/markers', 10)
        self.create_subscription(PoseStamped, '~/target_pose', self._guarded(self._on_target),
                                 self._target_qos())
        self.create_subscription(PointStamped, '~/pole_target', self._guarded(self._on_pole),
                                 self.get_parameter('target_queue_depth').value)
        self.create_service(Trigger, '~/reset', self._guarded(self._on_reset, _failed_trigger))
        self._load_model_from_parameters()
        if self.chain is None:
            latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                                 reliability=ReliabilityPolicy.RELIABLE,
                                 history=HistoryPolicy.KEEP_LAST)
            self.create_subscription(String, 'robot_description',
                                     self._guarded(self._on_description), latched)
            self.get_logger().info('waiting for the robot model on the robot_description topic')
        rate = self.get_parameter('publish_rate').value
        self._ticks = 0
        self._diagnostics_every = max(1, round(rate / DIAGNOSTICS_HZ))
        self._markers_every = max(1, round(rate / MARKERS_HZ))
        self._diagnostics = self._guarded(self._publish_diagnostics)
        self._markers = self._guarded(self._publish_markers)
        self.create_timer(self._period, self._guarded(self._tick))

    # -- parameters -------------------------------------------------------------------

    def _declare_parameters(self):
        self.declare_parameter('robot_description', '', _descriptor(
            'URDF text of the robot (else urdf_path, else the robot_description topic)'))
        self.declare_parameter('urdf_path', '', _descriptor('path of a URDF file'))
        self.declare_parameter('base_link', '', _descriptor('first link of the IK chain'))
        self.declare_parameter('tip_link', '', _descriptor('link whose pose is controlled'))
        self.declare_parameter('solver', 'auto', _descriptor(
            'auto (analytic for SRS arms, else jacobian), analytic or jacobian'))
        self.declare_parameter('publish_rate', 100.0, _descriptor(
            'joint_states rate, Hz', 1.0, 1000.0))
        self.declare_parameter('smoothing', True, _descriptor(
            'cubic exp-map trajectory through the targets (false: jump to each target)'))
        self.declare_parameter('max_linear_speed', 0.5, _descriptor(
            'tip speed limit, m/s', 1e-3, 10.0))
        self.declare_parameter('max_angular_speed', 1.0, _descriptor(
            'tip rotation speed limit, rad/s', 1e-3, 20.0))
        self.declare_parameter('target_qos', 'reliable', _descriptor(
            'reliability of ~/target_pose: reliable or best_effort (teleop streams)'))
        self.declare_parameter('target_queue_depth', 10, _int_descriptor(
            'depth of the ~/target_pose queue (keep last: beyond it the oldest unread '
            'target is dropped)', 1, 10000))
        self.declare_parameter('initial_positions', Parameter.Type.DOUBLE_ARRAY, _descriptor(
            'start joint vector in chain order (default: mid-limits)'))
        self.declare_parameter('ik_timeout', 0.005, _descriptor(
            'Jacobian solver budget per tick, s', 1e-4, 1.0))
        solver = self.get_parameter('solver').value
        if solver not in SOLVERS:
            raise StartupError(f"parameter solver: '{solver}' is not one of {', '.join(SOLVERS)}")
        qos = self.get_parameter('target_qos').value
        if qos not in QOS_CHOICES:
            raise StartupError(f"parameter target_qos: '{qos}' is not one of "
                               f"{', '.join(QOS_CHOICES)}")

    def _log_backend(self):
        """Say once which IK backend runs (numpy is much slower per iteration)."""
        backend, why = compiled_status()
        if backend == 'numba':
            self.get_logger().info('IK backend: numba (compiled kernels)')
            return
        self.get_logger().warning(
            f'IK backend: numpy, the uncompiled reference ({why}); every solve is '
            'correct but 20-150x slower: install numba (python3-numba) for the compiled one')

    def _on_set_parameters(self, params) -> SetParametersResult:
        """Validate run-time changes; the old value is kept when one is refused."""
        fixed = {'robot_description', 'urdf_path', 'base_link', 'tip_link', 'publish_rate',
                 'target_qos', 'target_queue_depth', 'initial_positions'}
        for p in params:
            if p.name in fixed and self.chain is not None:
                return SetParametersResult(successful=False,
                                           reason=f'{p.name} can only be set at start-up')
            if p.name == 'solver' and p.value not in SOLVERS:
                return SetParametersResult(successful=False, reason=(
                    f"solver must be one of {', '.join(SOLVERS)}, not '{p.value}'"))
        for p in params:
            if p.name in ('max_linear_speed', 'max_angular_speed') and self.chain is not None:
                setattr(self.trajectory, p.name, float(p.value))
            if p.name == 'solver' and self.chain is not None:
                self._make_solver(p.value)
        return SetParametersResult(successful=True)

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
            chain = chain_from_urdf_string(text, base, tip) if text else \
                chain_from_urdf_file(path, base, tip)
        except IKError as exc:
            raise StartupError(f'robot model: {exc}') from None
        self._use_model(chain)

    def _on_description(self, msg: String):
        base = self.get_parameter('base_link').value
        tip = self.get_parameter('tip_link').value
        try:
            chain = chain_from_urdf_string(msg.data, base, tip)
        except IKError as exc:
            self.rejected['robot_description'] += 1
            self.get_logger().error(f'robot_description refused, keeping the old model: {exc}')
            return
        self._use_model(chain)

    def _use_model(self, chain: Chain):
        try:
            initial = self.get_parameter('initial_positions').value
        except ParameterUninitializedException:
            initial = None
        if initial is not None and len(initial) > 0:
            q0 = np.asarray(initial, dtype=float)
            if q0.shape != (chain.n,) or not np.all(np.isfinite(q0)) or \
                    not chain.within_limits(q0):
                raise StartupError(f'initial_positions: expected {chain.n} finite values within '
                                   f'the limits of {chain.joint_names}, received {list(initial)}')
        else:
            q0 = chain.mid_limits()
        self.chain = chain
        self.reach = chain.reach_bound()
        self.q0 = q0
        self.q = q0.copy()
        self._make_solver(self.get_parameter('solver').value)
        tip = chain.forward(q0)
        self.trajectory = CartesianTrajectory(
            tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), self._now(),
            max_linear_speed=self.get_parameter('max_linear_speed').value,
            max_angular_speed=self.get_parameter('max_angular_speed').value)
        self.target = tip
        self.target_result, self._target_unchecked = None, False
        self._fallback = None
        # Warm up: the first call of each compiled kernel costs ~0.2 s (loading
        # it from the cache); pay that now, not in the first tick.
        self.last_result = self._solve(tip)
        self.get_logger().info(f'model: {len(chain.joint_names)} joints {chain.base_link} -> '
                               f'{chain.tip_link}, solver {self.solver_name}')
        # Everything built so far lives as long as the node: keep it out of
        # the garbage collector's full passes (~40 ms each, measured).
        gc.freeze()

    def _make_solver(self, name: str):
        self.analytic = None
        if name in ('auto', 'analytic'):
            try:
                self.analytic = AnalyticSRS.from_chain(self.chain)
            except IKError as exc:
                if name == 'analytic':
                    raise StartupError(f'solver analytic: {exc}') from None
        self.jacobian = JacobianIK(self.chain, timeout_s=self.get_parameter('ik_timeout').value)
        self.solver_name = 'analytic' if self.analytic is not None else 'jacobian'

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

    def _now(self) -> float:
        return time.monotonic()

    def _on_target(self, msg: PoseStamped, info):
        self.target_gaps.note(info)
        if self.chain is None:
            self.rejected['no_model'] += 1
            return
        try:
            p, q = check_target(msg, self.chain.base_link)
        except RejectedMessage as exc:
            self.rejected[exc.reason] += 1
            self.get_logger().warning(f'target rejected: {exc}', throttle_duration_sec=1.0)
            return
        self.targets_received += 1
        p = self._within_workspace(p)
        self.target = np.eye(4)
        self.target[:3, :3] = quaternion_to_matrix(q)
        self.target[:3, 3] = p
        if self.get_parameter('smoothing').value:
            self.trajectory.add_key(self._now(), p, q)
            # Its reachability is checked in the next tick, after the joint
            # states: under a flood only the newest target costs a solve.
            self._target_unchecked = True
        else:  # solve and publish now: the lowest latency
            self._check_target_reachability()
            self._solve_and_publish(self.target, self._period, self.get_clock().now(),
                                    solved=self.target_result)

    def _within_workspace(self, p: np.ndarray) -> np.ndarray:
        """Pull a far target onto the workspace sphere (base frame, metres).

        Beyond WORKSPACE_MARGIN x the chain's reach bound a target is out of
        reach anyway (the arm goes to the closest reachable pose); pulling it
        in keeps the Cartesian trajectory from spending hours on the way to a
        point a kilometre off, behind which later targets would wait.
        """
        radius = WORKSPACE_MARGIN * self.reach
        distance = float(np.linalg.norm(p))
        if distance <= radius:
            return p
        self.targets_clamped += 1
        return p * (radius / distance)

    def _check_target_reachability(self):
        """Solve the newest target from the current joints; report when unreachable."""
        self._target_unchecked = False
        self.target_result = self._timed_solve(self.target)
        if not self.target_result.success:
            self.get_logger().warning(f'target unreachable: {self.target_result.reason}',
                                      throttle_duration_sec=1.0)

    def _on_pole(self, msg: PointStamped, info):
        self.pole_gaps.note(info)
        if self.chain is None:
            self.rejected['no_model'] += 1
            return
        try:
            self.pole = check_point(msg, self.chain.base_link)
        except RejectedMessage as exc:
            self.rejected[exc.reason] += 1
            self.get_logger().warning(f'pole rejected: {exc}', throttle_duration_sec=1.0)
            return
        self.poles_received += 1

    def _on_reset(self, request, response):
        if self.chain is None:
            response.success, response.message = False, 'no robot model yet'
            return response
        self.q = self.q0.copy()
        tip = self.chain.forward(self.q0)
        self.trajectory.reset(tip[:3, 3], matrix_to_quaternion(tip[:3, :3]), self._now())
        self.target = tip
        self.target_result, self._target_unchecked = None, False
        self._fallback = None
        self._publish_joints(self.q, np.zeros(self.chain.n), self.get_clock().now())
        response.success, response.message = True, 'back at the initial positions'
        return response

    def _tick(self):
        """Publish the joint state of this instant, then a side output when one is due."""
        # One instant for the sample and the stamp: the state is valid at its
        # stamp, whatever the solve costs afterwards.
        stamp, now = self.get_clock().now(), self._now()
        if self.chain is not None:
            self._advance(now, stamp)
            if self._target_unchecked:
                self._check_target_reachability()
        self._ticks += 1
        if self._ticks % self._diagnostics_every == 0:
            self._diagnostics()
        if (self._ticks + self._markers_every // 2) % self._markers_every == 0:
            self._markers()

    def _advance(self, now: float, stamp):
        if not self.get_parameter('smoothing').value:
            # Keep tracking the last target: a step limited by the joint speeds
            # on arrival is completed over the following ticks.
            self._solve_and_publish(self.target, self._period, stamp)
            return
        s = self.trajectory.sample(now)
        pose = np.eye(4)
        pose[:3, :3] = quaternion_to_matrix(s.quaternion)
        pose[:3, 3] = s.position
        self._solve_and_publish(pose, self._period, stamp)

    def _solve(self, pose: np.ndarray):
        """IK of a pose, warm-started from the current joints (analytic when possible)."""
        if self.analytic is not None:
            if self.pole is not None:
                return self.analytic.solve(pose, pole=self.pole, q_reference=self.q)
            return self.analytic.solve(pose, q_reference=self.q)
        return self.jacobian.solve(pose, self.q)

    def _timed_solve(self, pose: np.ndarray):
        start = time.perf_counter()
        res = self._solve(pose)
        self.last_solve_s = time.perf_counter() - start
        self.solve_times.append(self.last_solve_s)
        return res

    def _solve_and_publish(self, pose: np.ndarray, dt: float, stamp, solved=None):
        """Solve (unless ``solved``), step within the joint limits, publish at ``stamp``."""
        res = solved if solved is not None else self._timed_solve(pose)
        self.last_result = res
        # Joint speed limits scale the whole step (the tip keeps its path);
        # a non-finite solution holds the last state: NaN is never published.
        if not np.all(np.isfinite(res.q)):
            self.rejected['non_finite_solution'] += 1
        self.q, velocity = self.chain.speed_limited_step(self.q, self._goal(pose, res), dt)
        self._publish_joints(self.q, velocity, stamp)

    def _goal(self, pose: np.ndarray, res) -> np.ndarray:
        """Joints (n,) to move toward: the solution, or on failure the best one known.

        A failed solve returns the closest pose its attempt found; the Jacobian
        solver's random restarts find a different one each tick, and chasing
        them made the arm wander for ever at an unreachable target. So a
        failed result is taken only when it is closer to ``pose`` than the
        current joints are, and while ``pose`` stays the same (the arm has
        arrived where the trajectory ends) only when it beats the goal
        already chosen by FALLBACK_GAIN: the arm settles.
        """
        if res.success:
            self._fallback = None
            return res.q
        cost = res.position_error ** 2 + res.orientation_error ** 2
        kept = self._fallback
        if kept is not None and np.array_equal(kept[0], pose):
            if cost < kept[1] * (1.0 - FALLBACK_GAIN):
                self._fallback = (kept[0], cost, res.q)
            return self._fallback[2]
        pos, rot = pose_error(pose, self.chain.forward(self.q))
        held = pos * pos + rot * rot
        goal, best = (res.q, cost) if cost < held else (self.q, held)
        self._fallback = (pose.copy(), best, goal)
        return goal

    def _publish_joints(self, q, velocity, stamp):
        self.joint_pub.publish(joint_state(self.chain.joint_names, q, velocity,
                                           stamp.to_msg(), self._joint_msg))

    # -- side outputs --------------------------------------------------------------------------

    def _publish_diagnostics(self):
        """Publish one DiagnosticStatus: reachability, residuals, counts."""
        status = DiagnosticStatus(name='ik_node: inverse kinematics', hardware_id='ik_node')
        res = self.last_result
        target = self.target_result
        if self.chain is None:
            status.level, status.message = DiagnosticStatus.WARN, 'waiting for the robot model'
        elif target is not None and not target.success:
            status.level = DiagnosticStatus.WARN
            status.message = f'target unreachable: {target.reason}'
        elif res is not None and not res.success:
            status.level, status.message = DiagnosticStatus.WARN, f'unreachable: {res.reason}'
        else:
            status.level, status.message = DiagnosticStatus.OK, 'target reachable'
        values = {'solver': getattr(self, 'solver_name', ''),
                  'rejected_messages': str(sum(self.rejected.values())),
                  'callback_errors': str(self.callback_errors)}
        values.update({f'rejected_{k}': str(v) for k, v in sorted(self.rejected.items())})
        if target is not None:
            values.update({'target_reachable': str(target.success).lower(),
                           'target_reason': target.reason})
        if res is not None:
            values.update({'reachable': str(res.success).lower(),
                           'position_error_m': f'{res.position_error:.3g}',
                           'orientation_error_rad': f'{res.orientation_error:.3g}',
                           'solve_time_s': f'{self.last_solve_s:.3g}'})
        if self.solve_times:
            p50, p99, top = np.percentile(self.solve_times, [50, 99, 100])
            values.update({'solve_time_p50_s': f'{p50:.3g}', 'solve_time_p99_s': f'{p99:.3g}',
                           'solve_time_max_s': f'{top:.3g}'})
        values['targets_received'] = str(self.targets_received)
        values['poles_received'] = str(self.poles_received)
        values['targets_dropped_unread'] = str(self.target_gaps.missing)
        values['poles_dropped_unread'] = str(self.pole_gaps.missing)
        values['targets_clamped_to_workspace'] = str(self.targets_clamped)
        if self.chain is not None:
            values.update({'keys_retimed': str(self.trajectory.retimed),
                           'keys_dropped': str(self.trajectory.dropped),
                           'keys_duplicate': str(self.trajectory.duplicates)})
        status.values = [KeyValue(key=k, value=v) for k, v in values.items()]
        msg = DiagnosticArray(status=[status])
        msg.header.stamp = self.get_clock().now().to_msg()
        self.diag_pub.publish(msg)

    def _publish_markers(self):
        """Publish the target arrow and the planned tip path (keys still ahead)."""
        if self.chain is None:
            return
        stamp = self.get_clock().now().to_msg()
        target = Marker(type=Marker.ARROW, action=Marker.ADD, id=0, ns='target')
        target.header.frame_id, target.header.stamp = self.chain.base_link, stamp
        target.pose = matrix_to_pose(self.target)
        target.scale.x, target.scale.y, target.scale.z = 0.1, 0.015, 0.015
        target.color.r, target.color.g, target.color.a = 1.0, 0.4, 1.0
        path = Marker(type=Marker.LINE_STRIP, action=Marker.ADD, id=1, ns='planned_path')
        path.header.frame_id, path.header.stamp = self.chain.base_link, stamp
        path.scale.x = 0.005
        path.color.b, path.color.g, path.color.a = 1.0, 0.6, 1.0
        path.pose.orientation.w = 1.0
        path.points = [Point(x=x, y=y, z=z)
                       for x, y, z in self.trajectory.planned_positions().tolist()]
        if len(path.points) < 2:
            path.action = Marker.DELETE
        self.marker_pub.publish(MarkerArray(markers=[target, path]))


def main(args=None):
    """Run the node until SIGINT / SIGTERM; exit 1 with a message on a bad configuration."""
    rclpy.init(args=args)
    node = None
    code = 0
    try:
        node = IKNode()
        gc.freeze()
        rclpy.spin(node)
    except (StartupError, ParameterException) as exc:
        print(f'ik_node: cannot start: {exc}', file=sys.stderr)
        code = 1
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    except Exception:  # noqa: B902
        # A signal arriving mid-callback can make the executor raise something
        # other than ExternalShutdownException once the context is shutting
        # down: that is still a requested stop. While running, re-raise.
        if rclpy.ok():
            raise
    finally:
        if node is not None:
            try:
                node.destroy_node()
            except Exception:  # noqa: B902 - already torn down by the shutdown
                pass
        if rclpy.ok():
            rclpy.try_shutdown()
    return code


if __name__ == '__main__':
    sys.exit(main())
