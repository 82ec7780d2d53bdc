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

"""The node's input checks against an independent classifier, over garbage; lost-message counts."""

import math

from geometry_msgs.msg import PoseStamped
from hypothesis import given, settings
from hypothesis import strategies as st
from ik_node.bench.fuzz import BASE, expected_reason, message_batches, raw_message
from ik_node.core import rotations as rot
from ik_node.ros.conversions import check_point, check_target, matrix_to_pose, \
    pose_to_matrix, RejectedMessage
from ik_node.ros.delivery import SequenceGaps
import numpy as np
from strategies import unit_quaternions


@settings(max_examples=300)
@given(message_batches(max_batch=4))
def test_checks_reject_exactly_what_the_spec_rejects(batch):
    for kind, frame, values, _, _ in batch:
        msg = raw_message(kind, frame, values)
        want = expected_reason(kind, frame, values)
        try:
            out = check_target(msg, BASE) if kind == 'pose' else check_point(msg, BASE)
        except RejectedMessage as exc:
            assert exc.reason == want, (values, str(exc))
            continue
        assert want is None
        if kind == 'pose':
            p, q = out
            # Unit, finite, and the direction of the input (math.hypot does not overflow).
            norm = math.hypot(*values[3:])
            assert abs(float(q @ q) - 1.0) <= 1e-12
            np.testing.assert_allclose(q, [v / norm for v in values[3:]], atol=1e-12)
            np.testing.assert_array_equal(p, values[:3])
        else:
            np.testing.assert_array_equal(out, values)


@given(st.sampled_from([1.7e308, 1e300, 1e200, 1e-6]))
def test_huge_quaternions_normalise_without_overflow(scale):
    msg = PoseStamped()
    msg.pose.orientation.x = msg.pose.orientation.w = scale
    _, q = check_target(msg, '')
    np.testing.assert_allclose(q, [math.sqrt(0.5), 0.0, 0.0, math.sqrt(0.5)], atol=1e-15)


@given(st.sampled_from([5e-324, 3e-160, 1e-7]))
def test_tiny_quaternions_are_zero(scale):
    msg = PoseStamped()
    msg.pose.orientation.x = msg.pose.orientation.w = scale
    try:
        check_target(msg, '')
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
