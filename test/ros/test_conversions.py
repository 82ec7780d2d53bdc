# SPDX-License-Identifier: Apache-2.0

"""The node's input checks against an independent classifier, over garbage; lost-message counts."""

import math

from fuzzing import message_batches
from geometry_msgs.msg import PoseStamped, TwistStamped
from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.bench.fuzz import BASE, draw_batch, expected_reason, raw_message, TIP
from ik_node.core import rotations as rot
from ik_node.core.model.chain import Chain
from ik_node.description.urdf import bundled_urdf, link_frames
from ik_node.ros.conversions import base_frame_only, check_point, check_target, check_twist, \
    frames_at, matrix_to_pose, pose_to_matrix, RejectedMessage
from ik_node.ros.delivery import SequenceGaps
from models import reference_forward
import numpy as np
import pytest
from strategies import unit_quaternions
import transforms3d

XML = open(bundled_urdf('iiwa14.urdf'), encoding='utf-8').read()
CHAIN = Chain.from_urdf_string(XML, BASE, TIP)
Q0 = np.array([0.3, 0.5, -0.2, -1.2, 0.4, 0.9, 0.1])
RESOLVE = frames_at(link_frames(XML, CHAIN), Q0)


def frame_pose(frame):
    """Pose (4, 4) of a frame_id in the base frame at Q0, by the tests' own FK of the URDF."""
    if frame in ('', BASE):
        return np.eye(4)
    if frame == 'world':  # the parent of the base link (a fixed joint)
        return np.linalg.inv(reference_forward(XML, 'world', BASE, {}))
    return reference_forward(XML, BASE, frame, dict(zip(CHAIN.joint_names, Q0)))


def check_against_the_spec(kind, frame, values):
    """Check one message as the node does; assert the spec's reason, or its output."""
    msg = raw_message(kind, frame, values)
    want = expected_reason(kind, frame, values)
    try:
        out = check_target(msg, RESOLVE) if kind == 'pose' else check_point(msg, RESOLVE)
    except RejectedMessage as exc:
        assert exc.reason == want, (values, str(exc))
        return
    assert want is None
    frame = frame_pose(frame)
    position = frame[:3, :3] @ np.array(values[:3]) + frame[:3, 3]
    if kind == 'pose':
        p, q = out
        # Unit, finite, and the direction of the input (math.hypot does not overflow),
        # turned into the base frame.
        norm = math.hypot(*values[3:])
        assert abs(float(q @ q) - 1.0) <= 1e-12
        local = transforms3d.quaternions.quat2mat([values[6] / norm] + [
            v / norm for v in values[3:6]])
        np.testing.assert_allclose(rot.quaternion_to_matrix(q), frame[:3, :3] @ local,
                                   atol=1e-12)
        np.testing.assert_allclose(p, position, rtol=1e-12, atol=1e-12)
    else:
        np.testing.assert_allclose(out, position, rtol=1e-12, atol=1e-12)


@settings(max_examples=300)
@given(message_batches(max_batch=4))
def test_checks_reject_exactly_what_the_spec_rejects(batch):
    for kind, frame, values, _, _ in batch:
        check_against_the_spec(kind, frame, values)


def test_ik_bench_fuzz_draws_every_rejection_and_valid_messages_the_spec_agrees_on():
    """`ik_bench fuzz` draws without hypothesis (a run-time dependency no more)."""
    rng = np.random.default_rng(5)
    reasons = set()
    for _ in range(300):
        for kind, frame, values, stamp, repeat in draw_batch(rng):
            reasons.add(expected_reason(kind, frame, values))
            check_against_the_spec(kind, frame, values)
            assert kind in ('pose', 'pole') and repeat in (1, 5)
            assert -2**31 <= stamp[0] < 2**31 and 0 <= stamp[1] < 10**9
    assert reasons == {None, 'not_finite', 'absurd_position', 'zero_quaternion', 'wrong_frame'}


@given(st.sampled_from([1.7e308, 1e300, 1e200, 1e-6]))
def test_huge_quaternions_normalise_without_overflow(scale):
    msg = PoseStamped()
    msg.pose.orientation.x = msg.pose.orientation.w = scale
    _, q = check_target(msg, base_frame_only(BASE))
    np.testing.assert_allclose(q, [math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5)], atol=1e-15)


@given(st.sampled_from([5e-324, 3e-160, 1e-7]))
def test_tiny_quaternions_are_zero(scale):
    msg = PoseStamped()
    msg.pose.orientation.x = msg.pose.orientation.w = scale
    try:
        check_target(msg, base_frame_only(BASE))
    except RejectedMessage as exc:
        assert exc.reason == 'zero_quaternion'
    else:
        raise AssertionError('accepted a quaternion of norm ~0')


@settings(max_examples=100)
@given(unit_quaternions(), st.tuples(*[st.floats(-3.0, 3.0)] * 3))
def test_matrix_to_pose_inverts_pose_to_matrix(q, p):
    t = np.eye(4)
    t[:3, :3] = rot.quaternion_to_matrix(q)
    t[:3, 3] = p
    np.testing.assert_allclose(pose_to_matrix(matrix_to_pose(t)), t, atol=1e-14)


@settings(max_examples=200)
@given(st.lists(st.tuples(st.integers(0, 3), st.booleans()), max_size=200))
def test_sequence_gaps_count_the_messages_that_never_arrived(sends):
    # Four publishers numbering their messages from 1; some messages are lost.
    # Lost ones before a publisher's first delivered one are not owed.
    gaps = SequenceGaps()
    seq = [0] * 4
    seen = [False] * 4
    lost_after_first = [0] * 4
    pending_loss = [0] * 4
    for publisher, delivered in sends:
        seq[publisher] += 1
        if not delivered:
            pending_loss[publisher] += 1
            continue
        if seen[publisher]:
            lost_after_first[publisher] += pending_loss[publisher]
        seen[publisher] = True
        pending_loss[publisher] = 0
        gaps.note({'publication_sequence_number': seq[publisher],
                   'publisher_gid': {'data': bytes([publisher]) * 16}})
    assert gaps.missing == sum(lost_after_first)


def test_sequence_gaps_forget_old_publishers_and_ignore_missing_info():
    gaps = SequenceGaps(max_publishers=2)
    for gid in (b'a', b'b', b'c'):      # 'a' is forgotten when 'c' arrives
        gaps.note({'publication_sequence_number': 1, 'publisher_gid': {'data': gid}})
    assert gaps.note({'publication_sequence_number': 5, 'publisher_gid': {'data': b'a'}}) == 0
    assert gaps.note({'publication_sequence_number': 5, 'publisher_gid': {'data': b'c'}}) == 3
    assert gaps.note({'publication_sequence_number': None, 'publisher_gid': None}) == 0
    assert gaps.note({'publication_sequence_number': 4, 'publisher_gid': {'data': b'c'}}) == 0
    assert gaps.missing == 3


def test_a_frame_that_is_not_a_link_is_refused_with_valid_ones_listed():
    msg = PoseStamped()
    msg.pose.orientation.w = 1.0
    msg.header.frame_id = 'map'
    with pytest.raises(RejectedMessage, match="frame 'map' is not a link.*iiwa_link_0") as info:
        check_target(msg, RESOLVE)
    assert info.value.reason == 'wrong_frame'


@settings(max_examples=100)
@given(st.sampled_from(['', BASE, 'world', 'iiwa_link_3', TIP]),
       st.tuples(*[st.floats(-2.0, 2.0)] * 6))
def test_twists_in_any_link_turn_into_the_base_frame_except_in_the_tip_frame(frame, values):
    msg = TwistStamped()
    msg.header.frame_id = frame
    (msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z,
     msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z) = values
    linear, angular, body = check_twist(msg, RESOLVE, TIP)
    if frame == TIP:
        assert body
        np.testing.assert_array_equal(np.concatenate((linear, angular)), values)
    else:
        rotation = frame_pose(frame)[:3, :3]
        assert not body
        np.testing.assert_allclose(linear, rotation @ values[:3], atol=1e-12)
        np.testing.assert_allclose(angular, rotation @ values[3:], atol=1e-12)


@pytest.mark.parametrize('values, reason', [((math.nan, 0, 0, 0, 0, 0), 'not_finite'),
                                            ((0, 0, 0, 0, 1e3, 0), 'absurd_twist')])
def test_bad_twists_are_refused_with_the_reason(values, reason):
    msg = TwistStamped()
    (msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z,
     msg.twist.angular.x, msg.twist.angular.y, msg.twist.angular.z) = values
    with pytest.raises(RejectedMessage) as info:
        check_twist(msg, RESOLVE, TIP)
    assert info.value.reason == reason
