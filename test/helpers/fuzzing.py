# SPDX-License-Identifier: Apache-2.0

"""Fuzzing the node over DDS: hypothesis batches of bad messages, then a valid target."""

from hypothesis import given, HealthCheck, settings
from hypothesis import strategies as st
from ik_node.bench.fuzz import BASE, FuzzSession, ODD_FRAMES, SPECIAL, TINY
from ros_helpers import unique_domain_id


def message_batches(max_batch: int = 12):
    """Hypothesis strategy: lists of (kind, frame, values, stamp, repeat)."""
    number = st.one_of(st.sampled_from(SPECIAL), st.floats(-2.0, 2.0), st.floats(-2.0, 2.0),
                       st.floats(allow_nan=True, allow_infinity=True))
    tiny = st.sampled_from(TINY)
    quaternion = st.one_of(st.tuples(*[number] * 4), st.tuples(*[tiny] * 4),
                           st.tuples(*[st.floats(-1e3, 1e3)] * 4))
    frame = st.one_of(st.sampled_from(['', BASE]), st.sampled_from(['', BASE]),
                      st.sampled_from(ODD_FRAMES),
                      st.text(max_size=12))
    stamp = st.tuples(st.integers(-2**31, 2**31 - 1), st.integers(0, 999_999_999))
    pose = st.tuples(st.just('pose'), frame,
                     st.builds(lambda p, q: p + q, st.tuples(*[number] * 3), quaternion), stamp,
                     st.sampled_from([1, 1, 1, 5]))
    pole = st.tuples(st.just('pole'), frame, st.tuples(*[number] * 3), stamp, st.just(1))
    return st.lists(st.one_of(pose, pole), min_size=1, max_size=max_batch)


def fuzz_then_reach(batches):
    """Send ``batches`` fuzzed batches, each then a valid target that must be reached.

    Then every bad message is counted by the node, no joint state was bad and
    the node still runs; it exits 0 on SIGINT.
    """
    session = FuzzSession(unique_domain_id())
    try:
        @settings(max_examples=batches, deadline=None, suppress_health_check=list(HealthCheck))
        @given(message_batches())
        def batch_then_valid_target(batch):
            session.send_batch(batch)
            assert session.reach_valid_target(), (session.sent, session.last_miss)
        batch_then_valid_target()
        assert session.wait_for_counts(), (session.sent, session.counted(), session.valid,
                                           session.diagnostics)
        assert sum(session.sent.values()) > 2 * batches  # the run did send garbage
        assert session.bad_joints == 0
        assert session.proc.poll() is None
    finally:
        assert session.close() == 0
