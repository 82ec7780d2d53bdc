# SPDX-License-Identifier: Apache-2.0

"""The node's encoders and diagnostics as plain Python (no DDS): what each output carries.

The node publishes what these return; test_node and test_real_arm check the
same over DDS. Here each message is checked against the stream it encodes,
with times recomputed from the stamps (nanoseconds), and each diagnostic
value against the snapshot it reads.
"""

from diagnostic_msgs.msg import DiagnosticStatus
from ik_node.core.ik.factory import make_solver
from ik_node.core.motion.stream import CommandStream
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.ros import diagnostics
from ik_node.ros.outputs import ENCODERS, OUTPUTS
import numpy as np
import pytest
from rclpy.clock import ClockType
from rclpy.time import Time
from tracking import CHAINS

EPOCH_NS = 1_700_000_000_123_456_789   # the node's start, ROS time


def moving_stream(name='ur5e'):
    """Return (chain, stream) of a tracker headed for a target 0.1 m away, 0.2 s into it."""
    chain, _, q0 = CHAINS[name]
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), TrackerConfig(), q0, 0.0)
    stream = CommandStream(tracker, 0.01, 0.05, 500.0, budget_s=0.03)
    target = chain.forward(q0)
    target[:3, 3] += [0.1, 0.0, 0.0]
    tracker.add_target(0.05, target)
    for k in range(1, 21):
        stream.advance(0.01 * k, None)
    return chain, stream


def test_every_output_has_an_encoder_of_its_message_type():
    assert set(ENCODERS) == set(OUTPUTS)
    chain, stream = moving_stream()
    order = list(range(chain.n))[::-1]
    stamp = Time(nanoseconds=EPOCH_NS + 200_000_000, clock_type=ClockType.ROS_TIME)
    for name, (kind, _) in OUTPUTS.items():
        encoder = ENCODERS[name](chain.joint_names, order, EPOCH_NS, ClockType.ROS_TIME)
        assert isinstance(encoder.message(stream, stamp, 0.2), kind)


def test_a_trajectory_message_carries_the_horizon_in_command_order_at_its_instants():
    chain, stream = moving_stream()
    order = list(range(chain.n))[::-1]
    encoder = ENCODERS['joint_trajectory'](chain.joint_names, order, EPOCH_NS,
                                           ClockType.ROS_TIME)
    msg = encoder.message(stream, None, 0.2)
    assert msg.joint_names == [chain.joint_names[k] for k in order]
    start_ns = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
    assert start_ns <= EPOCH_NS + 200_000_000      # the first point is at or before now
    assert len(msg.points) >= 2
    for point in msg.points:
        offset = point.time_from_start.sec * 1_000_000_000 + point.time_from_start.nanosec
        t = (start_ns + offset - EPOCH_NS) * 1e-9     # back on the stream's clock
        q, v, a = stream.sample(t)
        np.testing.assert_allclose(point.positions, q[order], atol=1e-9)
        np.testing.assert_allclose(point.velocities, v[order], atol=1e-6)
        np.testing.assert_allclose(point.accelerations, a[order], atol=1e-3)
    moving = np.array(msg.points[-1].positions) - np.array(msg.points[0].positions)
    assert np.any(np.abs(moving) > 0.0)            # the horizon of a moving arm moves


def test_joint_states_and_arrays_carry_the_command_at_their_instant():
    chain, stream = moving_stream()
    order = list(range(chain.n))[::-1]
    stamp = Time(nanoseconds=EPOCH_NS + 150_000_000, clock_type=ClockType.ROS_TIME)
    states = ENCODERS['joint_states'](chain.joint_names, order, EPOCH_NS, ClockType.ROS_TIME)
    msg = states.message(stream, stamp, 0.15)
    q, v, _ = stream.sample(0.15)
    assert msg.name == chain.joint_names               # chain order: a robot's own states
    np.testing.assert_array_equal(msg.position, q)
    np.testing.assert_array_equal(msg.velocity, v)
    assert (msg.header.stamp.sec, msg.header.stamp.nanosec) == (
        (EPOCH_NS + 150_000_000) // 1_000_000_000, (EPOCH_NS + 150_000_000) % 1_000_000_000)
    arrays = ENCODERS['position_array'](chain.joint_names, order, EPOCH_NS, ClockType.ROS_TIME)
    sent = arrays.message(stream, stamp, 0.15).data
    np.testing.assert_allclose(sent, stream.sample(0.15)[0][order], atol=1e-12)


def test_diagnostics_read_the_snapshot():
    chain, _, q0 = CHAINS['iiwa14']
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), TrackerConfig(), q0, 0.0)
    assert diagnostics.level_and_message(None, '') == (DiagnosticStatus.WARN,
                                                       'waiting for the robot model')
    far = np.eye(4)
    far[:3, 3] = [3.0, 0.0, 0.0]                # beyond reach: unreachable
    tracker.add_target(0.0, far)
    tracker.check_reachability()
    status = tracker.status()
    level, message = diagnostics.level_and_message(status, '')
    assert level == DiagnosticStatus.WARN and message.startswith('unreachable: target unreachable')
    assert diagnostics.level_and_message(status, 'stale') == (DiagnosticStatus.WARN, 'stale')
    values = diagnostics.tracker_values(status)
    assert values['target_reachable'] == 'false' and values['mode'] == status.mode
    assert values['solver'] == status.solver and values['backend'] == status.backend
    assert values['ik_timeout_s'] == 'none (closed form)'     # iiwa14: the SRS closed form
    assert values['targets_clamped_to_workspace'] == '1'       # 3 m > 1.25 x its reach
    p50, p99, top = (float(values[f'solve_time_{k}_s']) for k in ('p50', 'p99', 'max'))
    assert 0.0 < p50 <= p99 <= top


def test_diagnostics_say_reachable_but_in_collision_and_name_the_pair():
    pytest.importorskip('coal', reason='coal is not installed: collision is off without it')
    from ik_node.core.collision.guard import CollisionGuard
    from ik_node.core.collision.shapes import checked_shape
    from ik_node.description.geometry import collision_model
    from models import ARMS
    chain, _, q0 = CHAINS['iiwa14']
    model, _ = collision_model(ARMS['iiwa14'][0].read_text(), chain, home=q0)
    target = chain.forward(q0)
    model.set_obstacles({'ball': (checked_shape('sphere', (0.03,), target, source='ball'),)})
    tracker = MotionTracker(chain, make_solver(chain, 'auto'), TrackerConfig(), q0, 0.0)
    tracker.guard = CollisionGuard(model, 0.01)
    tracker.add_target(0.0, target)          # the tool inside the ball: no free solution
    tracker.check_reachability()
    status = tracker.status()
    level, message = diagnostics.level_and_message(status, '')
    assert level == DiagnosticStatus.WARN, message
    assert message.startswith('blocked: target in collision (') and 'with ball)' in message
    values = diagnostics.tracker_values(status)
    assert values['target_reachable'] == 'true' and values['target_in_collision'].endswith('ball')


@pytest.mark.parametrize('age, expected', [(0.05, 'ok'), (0.5, 'stale')])
def test_feedback_diagnostics_say_stale_past_the_timeout(age, expected):
    from ik_node.core.motion.feedback import FeedbackPolicy
    chain, _, q0 = CHAINS['ur5e']
    policy = FeedbackPolicy(chain.joint_names, chain.lower, chain.upper, chain.velocity,
                            0.1, 0.1, 0.15)
    assert diagnostics.feedback_values('', policy, 0.0) == {
        'feedback': 'off (the node publishes joint_states itself)'}
    assert diagnostics.feedback_problem('/joint_states', policy, 1.0).startswith('waiting')
    assert policy.take(chain.joint_names, q0.tolist(), [], 1.0, 1.0) == ''
    values = diagnostics.feedback_values('/joint_states', policy, 1.0 + age)
    assert values['feedback'] == f'{expected} on /joint_states'
    assert float(values['feedback_age_s']) == pytest.approx(age)


def test_joint_states_report_the_chains_mimic_joints_from_their_leaders():
    """A mimic joint in the chain: ``multiplier * leader + offset``, velocity scaled (MIXED)."""
    from ik_node import Chain
    from models import MIXED_URDF
    chain = Chain.from_urdf_string(MIXED_URDF, 'base', 'tip')
    assert [m[0] for m in chain.mimics] == ['follow']
    q0 = np.array([0.1, 0.2, 0.3, 0.4])
    tracker = MotionTracker(chain, make_solver(chain, 'jacobian'), TrackerConfig(), q0, 0.0)
    stream = CommandStream(tracker, 0.01, 0.05, 500.0, budget_s=0.0)
    target = chain.forward(q0 + np.array([0.05, 0.1, -0.2, 0.1]))
    tracker.add_target(0.0, target)
    for k in range(1, 21):
        stream.advance(0.01 * k, None)
    states = ENCODERS['joint_states'](chain.joint_names, range(chain.n), EPOCH_NS,
                                      ClockType.ROS_TIME, chain.mimics)
    stamp = Time(nanoseconds=EPOCH_NS + 150_000_000, clock_type=ClockType.ROS_TIME)
    msg = states.message(stream, stamp, 0.15)
    q, v, _ = stream.sample(0.15)
    bend = chain.joint_names.index('bend')
    assert msg.name == chain.joint_names + ['follow']
    np.testing.assert_array_equal(msg.position[:chain.n], q)
    assert msg.position[-1] == pytest.approx(-0.5 * q[bend] + 0.1, abs=1e-15)   # the URDF's
    assert msg.velocity[-1] == pytest.approx(-0.5 * v[bend], abs=1e-15)
    assert v[bend] != 0.0
