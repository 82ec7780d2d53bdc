# SPDX-License-Identifier: Apache-2.0

"""The node's task over DDS (issue 52): a 5-DoF arm by others goes to positions; bad tasks stop it.

The SO-101 (test/urdf_corpus/external, unmodified) has five joints: it cannot
meet every 6-D pose, so the node's task is the position by default, and says
so at start-up. Targets come as PoseStamped (any orientation) and as
PointStamped; where the arm ends is judged from the joint_states that reach
the client, by the raw description's forward kinematics (oracle.RawModel).
"""

from geometry_msgs.msg import PointStamped, PoseStamped
from models import URDF_CORPUS
from node_process import start_in_process
import numpy as np
from oracle import RawModel
import pytest
from ros_helpers import in_process_ik_node, unique_domain_id, wait_until
from sensor_msgs.msg import JointState

SO101 = URDF_CORPUS / 'external' / 'so101_new_calib.urdf'
PARAMS = {'urdf_path': str(SO101), 'base_link': 'base_link', 'tip_link': 'gripper_frame_link',
          'target_marker': False}
# Arrived: by the oracle's FK from what joint_states say (m).
ARRIVED_M = 1e-4
# Reachable positions of the tip: at these joints (rad; within the SO-101's limits).
REACH_Q = ([0.3, -0.5, 0.6, 0.4, 0.2], [-0.4, 0.2, -0.3, 0.9, -1.0])


def test_a_five_joint_arm_goes_to_points_and_to_positions_of_poses(capfd):
    raw = RawModel(SO101.read_text())
    names = ['shoulder_pan', 'shoulder_lift', 'elbow_flex', 'wrist_flex', 'wrist_roll']
    goals = [raw.pose('base_link', 'gripper_frame_link', dict(zip(names, q)))[:3, 3]
             for q in REACH_Q]
    with in_process_ik_node(PARAMS) as (node, client, spin_once):
        err = capfd.readouterr().err
        assert 'task position (the orientation free); 5 joints cannot meet every 6-D pose' in \
            err and 'task:=axis' in err, err
        states = []
        client.create_subscription(JointState, 'joint_states', states.append, 100)
        point_pub = client.create_publisher(PointStamped, '/ik_node/target_point', 10)
        pose_pub = client.create_publisher(PoseStamped, '/ik_node/target_pose', 10)
        assert wait_until(lambda: point_pub.get_subscription_count() > 0 and
                          pose_pub.get_subscription_count() > 0 and states, 10.0, spin_once)

        def tip_now():
            last = states[-1]
            return raw.pose('base_link', 'gripper_frame_link',
                            dict(zip(last.name, last.position)))[:3, 3]

        def at_rest_at(goal):
            return len(states) > 2 and np.linalg.norm(tip_now() - goal) <= ARRIVED_M and \
                list(states[-1].position) == list(states[-2].position)

        point = PointStamped()
        point.header.frame_id = 'base_link'
        point.point.x, point.point.y, point.point.z = map(float, goals[0])
        point_pub.publish(point)
        assert wait_until(lambda: at_rest_at(goals[0]), 20.0, spin_once), tip_now()
        pose = PoseStamped()
        pose.header.frame_id = 'base_link'
        pose.pose.position.x, pose.pose.position.y, pose.pose.position.z = map(float, goals[1])
        # An orientation the five joints cannot also meet there: left free.
        pose.pose.orientation.x, pose.pose.orientation.w = 0.6, 0.8
        pose_pub.publish(pose)
        assert wait_until(lambda: at_rest_at(goals[1]), 20.0, spin_once), tip_now()
        for message in states:
            assert all(np.isfinite(message.position))
        assert node.rejected == {}
        from ik_node.ros.diagnostics import tracker_values
        values = tracker_values(node.session.tracker.status())
        assert values['task'] == 'position' and values['arrival'] == 'arrived', values
        assert float(values['angle_to_target_rad']) == 0.0   # the orientation is free


def test_a_twist_is_refused_by_a_look_at_node_and_counted():
    from geometry_msgs.msg import TwistStamped
    from models import ARMS
    path, base, tip = ARMS['ur5e']
    params = {'urdf_path': str(path), 'base_link': base, 'tip_link': tip, 'task': 'look_at',
              'target_marker': False}
    with in_process_ik_node(params) as (node, client, spin_once):
        twist_pub = client.create_publisher(TwistStamped, '/ik_node/target_twist', 10)
        assert wait_until(lambda: twist_pub.get_subscription_count() > 0, 10.0, spin_once)
        twist = TwistStamped()
        twist.header.frame_id = base
        twist.twist.linear.x = 0.05
        q = node.session.q.copy()
        assert wait_until(lambda: (twist_pub.publish(twist), node.rejected['twist_for_task'])[1],
                          10.0, spin_once)
        assert node.callback_errors == 0
        np.testing.assert_array_equal(node.session.q, q)


def test_a_point_is_refused_where_the_task_needs_an_orientation():
    with in_process_ik_node(dict(PARAMS, task='axis')) as (node, client, spin_once):
        point_pub = client.create_publisher(PointStamped, '/ik_node/target_point', 10)
        assert wait_until(lambda: point_pub.get_subscription_count() > 0, 10.0, spin_once)
        point = PointStamped()
        point.header.frame_id = 'base_link'
        point.point.x = 0.2
        q = node.session.q.copy()
        assert wait_until(lambda: (point_pub.publish(point), node.rejected['point_for_task'])[1],
                          10.0, spin_once)
        np.testing.assert_array_equal(node.session.q, q)
        assert node.session.tracker.solver.task.name == 'axis'


@pytest.mark.parametrize('params, message', [
    ({'task': 'gaze'}, 'task: expected one of pose, position, orientation, axis, look_at'),
    ({'task': 'axis', 'tool_axis': '[0.0, 0.0, 0.0]'}, 'tool_axis: expected 3 finite numbers'),
    ({'task': 'axis', 'tool_axis': '[1.0, 0.0]'}, 'tool_axis: expected 3 finite numbers'),
    ({'task': 'position', 'solver': 'analytic'},
     "the closed forms solve the full pose, not the task 'position'"),
])
def test_a_bad_task_stops_the_node_at_start_up_with_one_line(params, message, capfd):
    code, err = start_in_process(dict(PARAMS, **params), capfd, unique_domain_id())
    assert code == 1 and message in err and 'Traceback' not in err, err


def test_a_look_at_handle_sits_at_the_point_looked_at():
    """Ahead of the camera before a target (not at the tip: that point has no direction)."""
    from ik_node.core.ik.factory import make_solver
    from ik_node.core.ik.task import Task
    from ik_node.core.motion.session import MotionSession
    from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
    from ik_node.ros.handles import handle_pose, LOOK_AHEAD_M
    from models import ARMS
    from ik_node import Chain
    path, base, tip = ARMS['ur5e']
    chain = Chain.from_urdf_string(path.read_text(), base, tip)
    q0 = chain.mid_limits() + 0.3
    task = Task('look_at', (0.0, 0.0, 1.0))
    tracker = MotionTracker(chain, make_solver(chain, 'auto', task=task), TrackerConfig(), q0,
                            0.0)
    session = MotionSession(tracker, 0.01, 0.02, 500.0)
    camera = chain.forward(q0)
    np.testing.assert_allclose(handle_pose(session)[:3, 3],
                               camera[:3, 3] + LOOK_AHEAD_M * camera[:3, 2], atol=1e-12)
    point = np.eye(4)
    point[:3, 3] = [2.0, -1.0, 0.5]
    session.target(0.0, point)
    np.testing.assert_array_equal(handle_pose(session)[:3, 3], point[:3, 3])
    pose_tracker = MotionTracker(chain, make_solver(chain, 'auto'), TrackerConfig(), q0, 0.0)
    np.testing.assert_array_equal(
        handle_pose(MotionSession(pose_tracker, 0.01, 0.02, 500.0)), camera)


def test_the_start_up_line_says_a_tool_axis_the_task_does_not_use():
    from ik_node import Chain
    from ik_node.ros.parameters import task_for
    from models import ARMS
    path, base, tip = ARMS['ur5e']
    chain = Chain.from_urdf_string(path.read_text(), base, tip)
    task, line = task_for(chain, '', [1.0, 0.0, 0.0])
    assert task.name == 'pose' and 'tool_axis is set but not used by the task pose' in line
    task, line = task_for(chain, 'axis', [1.0, 0.0, 0.0])
    assert task.tool_axis == (1.0, 0.0, 0.0) and 'not used' not in line
    so101 = Chain.from_urdf_string(SO101.read_text(), 'base_link', 'gripper_frame_link')
    task, line = task_for(so101, 'pose', [])
    assert '5 joints cannot meet every target of it' in line
