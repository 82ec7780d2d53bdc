# SPDX-License-Identifier: Apache-2.0

"""Fuzzing the node over DDS: hypothesis batches of bad messages, then a valid target."""

from hypothesis import given, HealthCheck, settings
from ik_node.bench.fuzz import FuzzSession, message_batches
from ros_helpers import unique_domain_id


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
