# SPDX-License-Identifier: Apache-2.0

"""The node's motion policy defects found in review, each reproduced in-process.

The node runs in this process on its own ROS domain with a client node; both
share one executor. What it publishes on joint_states is judged against the
joint speed limits for the time between header stamps (the node's clock).
"""

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PoseStamped
from ik_node.core.model.chain import Chain
from ik_node.ros.conversions import matrix_to_pose
from node_process import ARMS, in_process_node
import numpy as np
import pytest
from rclpy.parameter import Parameter
from ros_helpers import wait_until
from sensor_msgs.msg import JointState
from std_srvs.srv import Trigger

pytestmark = pytest.mark.integration


class Recorder:
    """joint_states seen by the client: (stamp in integer nanoseconds, positions (n,))."""

    def __init__(self, client, topic='/joint_states'):
        """Subscribe with a deep queue (a burst must not be dropped)."""
        self.states = []
        client.create_subscription(JointState, topic, self._on, 1000)

    def _on(self, msg):
        # Integer nanoseconds: float seconds since 1970 round to ~0.2 us.
        stamp = msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec
        self.states.append((stamp, np.array(msg.position)))

    def last(self):
        """Return the newest positions."""
        return self.states[-1][1]


def speed_violations(states, velocity_limit, start=0):
    """Largest ratio |dq| / (limit * dt) over consecutive states (> 1 is a violation)."""
    worst = 0.0
    for (t0, q0), (t1, q1) in zip(states[start:], states[start + 1:]):
        dt = (t1 - t0) * 1e-9
        step = np.abs(q1 - q0)
        if dt <= 0.0:
            if np.any(step > 1e-12):
                return np.inf
            continue
        worst = max(worst, float(np.max(step / (velocity_limit * dt))))
    return worst


def target_msg(pose, frame):
    """Return the PoseStamped message of a 4x4 pose."""
    msg = PoseStamped(pose=matrix_to_pose(pose))
    msg.header.frame_id = frame
    return msg


def iiwa():
    """Return the bundled iiwa14 chain and its base link."""
    path, base, tip = ARMS['iiwa14']
    return Chain.from_urdf_file(str(path), base, tip), base


def test_a_burst_of_targets_with_smoothing_off_respects_the_speed_limits():
    # Defect: each target callback took a full-period step however close together
    # targets arrived (50 in 8.7 ms moved the joints 26.8x too far).
    chain, base = iiwa()
    with in_process_node('iiwa14', smoothing=False, target_queue_depth=100) as \
            (node, client, spin_once):
        recorder = Recorder(client)
        pub = client.create_publisher(PoseStamped, '/ik_node/target_pose', 100)
        assert wait_until(lambda: recorder.states and pub.get_subscription_count() > 0,
                          10.0, spin_once)
        far = chain.forward(chain.mid_limits() + np.array([0.6, 0.4, -0.5, 0.5, 0.4, -0.4, 0.3]))
        start = len(recorder.states)
        for _ in range(50):
            pub.publish(target_msg(far, base))
        # 50 states after the burst (0.5 s at 100 Hz on a quiet machine; the
        # burst's 50 solves first, and in a CI worker beside three others no
        # state came within a fixed 1 s wait).
        assert wait_until(lambda: len(recorder.states) - start > 50, 30.0, spin_once)
        assert speed_violations(recorder.states, chain.velocity, start) <= 1.0 + 1e-6


def test_turning_smoothing_back_on_keeps_the_target_reached_meanwhile():
    # Defect: targets received with smoothing off never reached the trajectory, so
    # turning smoothing on drove the arm back to where it was before.
    chain, base = iiwa()
    q_a = chain.mid_limits() + np.array([0.3, 0.5, -0.2, -0.8, 0.4, 0.7, 0.1])
    q_b = q_a + np.array([0.2, -0.2, 0.1, 0.2, -0.1, 0.1, 0.2])
    with in_process_node('iiwa14') as (node, client, spin_once):
        recorder = Recorder(client)
        pub = client.create_publisher(PoseStamped, '/ik_node/target_pose', 10)
        assert wait_until(lambda: recorder.states and pub.get_subscription_count() > 0,
                          10.0, spin_once)

        def at(q):
            tip = chain.forward(recorder.last())
            return np.linalg.norm(tip[:3, 3] - chain.forward(q)[:3, 3]) < 1e-6
        pub.publish(target_msg(chain.forward(q_a), base))
        assert wait_until(lambda: at(q_a), 20.0, spin_once)
        assert node.set_parameters([Parameter('smoothing', value=False)])[0].successful
        pub.publish(target_msg(chain.forward(q_b), base))
        assert wait_until(lambda: at(q_b), 20.0, spin_once)
        assert node.set_parameters([Parameter('smoothing', value=True)])[0].successful
        wait_until(lambda: False, 2.0, spin_once)
        assert at(q_b), 'the arm left the last target when smoothing was turned back on'


def test_a_new_ik_timeout_reaches_the_solver():
    # Defect: a run-time change of ik_timeout was accepted and had no effect. The
    # diagnostics report the budget the solver in use holds.
    with in_process_node('ur5e', solver='jacobian') as (node, client, spin_once):
        budgets = []
        client.create_subscription(DiagnosticArray, '/diagnostics', lambda msg: budgets.extend(
            kv.value for st in msg.status for kv in st.values if kv.key == 'ik_timeout_s'), 10)
        assert node.set_parameters([Parameter('ik_timeout', value=0.02)])[0].successful
        assert wait_until(lambda: budgets and float(budgets[-1]) == 0.02, 10.0, spin_once), \
            budgets[-3:]


def test_reset_moves_back_within_the_speed_limits():
    # Defect: ~/reset jumped to the initial positions in one message.
    chain, base = iiwa()
    with in_process_node('iiwa14') as (node, client, spin_once):
        recorder = Recorder(client)
        pub = client.create_publisher(PoseStamped, '/ik_node/target_pose', 10)
        reset = client.create_client(Trigger, '/ik_node/reset')
        assert wait_until(lambda: recorder.states and pub.get_subscription_count() > 0
                          and reset.service_is_ready(), 10.0, spin_once)
        q0 = recorder.last().copy()
        q_far = chain.mid_limits() + np.array([0.8, 0.6, -0.6, 0.9, 0.5, -0.6, 0.4])
        pub.publish(target_msg(chain.forward(q_far), base))
        assert wait_until(lambda: np.max(np.abs(recorder.last() - q0)) > 0.5, 20.0, spin_once)
        start = len(recorder.states) - 1
        future = reset.call_async(Trigger.Request())
        assert wait_until(future.done, 10.0, spin_once) and future.result().success
        assert wait_until(lambda: np.max(np.abs(recorder.last() - q0)) < 1e-9, 30.0, spin_once)
        assert speed_violations(recorder.states, chain.velocity, start) <= 1.0 + 1e-6
