# SPDX-License-Identifier: Apache-2.0

"""Collision in the node over DDS: the floor, obstacles added and removed, margin changes.

The node runs as a subprocess on the bundled iiwa14 with the bundled floor
(config/obstacles/floor.yaml); the client reads /joint_states and judges
every state with the tests' own forward kinematics (oracle.RawModel) and
the solids of the description (geometry_oracle), never with the node's
collision model. Configurations refused at start-up run ik_node's main in
this process (test_start_up's way).
"""

import math

from diagnostic_msgs.msg import DiagnosticStatus
from geometry_oracle import distance_interval, RobotSolids
from ik_node.ros.conversions import matrix_to_pose
from models import ARMS, ROOT
from node_process import model_params, NodeUnderTest, start_in_process
import numpy as np
from oracle import RawModel
import pytest
from rcl_interfaces.srv import SetParameters
from rclpy.parameter import Parameter
from ros_helpers import unique_domain_id
from visualization_msgs.msg import Marker, MarkerArray

coal = pytest.importorskip('coal', reason='coal is not installed: collision is off without it')

FLOOR = ROOT / 'config' / 'obstacles' / 'floor.yaml'
HOME = [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]
MARGIN = 0.01
SLACK = 1e-3
# The links whose solids are judged against the floor and the obstacles.
LINKS = ['iiwa_link_1', 'iiwa_link_2', 'iiwa_link_3', 'iiwa_link_4', 'iiwa_link_5',
         'iiwa_link_6', 'iiwa_link_7', 'tool0']


class Judge:
    """The tests' distances from the arm's solids to the floor and to obstacles."""

    def __init__(self):
        """Read the description with the oracle's reader."""
        path, base, _ = ARMS['iiwa14']
        xml = path.read_text()
        self.solids = RobotSolids(xml, RawModel(xml), base, LINKS)

    def floor_clearance(self, msg):
        """Return the lowest point of the arm's solids above z = 0 (m) for a JointState."""
        values = dict(zip(msg.name, msg.position))
        low = math.inf
        for link in LINKS:
            for kind, size, pose in self.solids.posed(link, values):
                low = min(low, _lowest_z(kind, size, pose))
        return low

    def clearance(self, msg, solid):
        """Return a certified lower bound of the distance from the arm to ``solid``, m."""
        values = dict(zip(msg.name, msg.position))
        return min(distance_interval(s, solid, MARGIN - SLACK)[0] for link in LINKS
                   for s in self.solids.posed(link, values))


def _lowest_z(kind, size, pose):
    """Return the lowest z of a solid (closed forms; a hull: its lowest vertex)."""
    z = pose[:3, 2]
    if kind == 'hull':   # its lowest vertex
        return float(np.min(size.points @ pose[2, :3])) + pose[2, 3]
    if kind == 'sphere':
        return pose[2, 3] - size[0]
    if kind == 'cylinder':
        return (pose[2, 3] - 0.5 * size[1] * abs(z[2])
                - size[0] * math.sqrt(max(0.0, 1 - z[2] ** 2)))
    half = 0.5 * np.array(size)
    return pose[2, 3] - float(np.abs(pose[2, :3]) @ half)


def params(**extra):
    """Return the iiwa14's parameters with the floor and a ready pose."""
    p = dict(model_params('iiwa14'), obstacles_file=str(FLOOR), collision_checking='true',
             initial_positions='[' + ', '.join(str(v) for v in HOME) + ']')
    p.update(extra)
    return p


def below_the_floor(chain_pose_z=-0.25):
    """Return a tool-down target 0.5 m ahead, ``chain_pose_z`` m below the floor."""
    t = np.eye(4)
    t[:3, :3] = np.diag([1.0, -1.0, -1.0])
    t[:3, 3] = [0.5, 0.0, chain_pose_z]
    return t


def still_for(joints, count):
    """Return True when the newest ``count`` JointStates all hold the same positions."""
    if len(joints) < count:
        return False
    last = np.array(joints[-1].position)
    return all(np.array_equal(np.array(m.position), last) for m in joints[-count:])


def test_a_target_below_the_floor_stops_the_arm_at_the_margin_and_says_why():
    judge = Judge()
    node = NodeUnderTest(params())
    try:
        node.ready(60.0)
        node.send(below_the_floor())
        # It comes to rest at the closest free pose: a second of identical states
        # (joint_states at 100 Hz), the arrival naming the floor.
        assert node.wait(lambda: still_for(node.joints, 100) and
                         node.diagnostic('arrival') == 'blocked', 30.0), \
            (node.diagnostic('arrival_reason'), node.output())
        count = len(node.joints)
        rest = np.array(node.joints[-1].position)
        node.spin(3.0)   # and stays there: no humming at the margin
        moved = max(float(np.max(np.abs(np.array(m.position) - rest)))
                    for m in node.joints[count:])
        assert moved == 0.0, moved
        reason = node.diagnostic('arrival_reason')
        assert node.diagnostic('arrival') == 'blocked', reason
        assert 'floor' in reason and 'closest free pose' in reason, reason
        assert 'floor' in node.diagnostic('collision_last_hold')
        levels = {s.level for a in node.diagnostics[-3:] for s in a.status}
        assert levels == {DiagnosticStatus.WARN}, [   # WARN while the target is out of bounds
            (s.level, s.message) for a in node.diagnostics[-3:] for s in a.status]
        clearances = [judge.floor_clearance(m) for m in node.joints]
        assert min(clearances) >= MARGIN - SLACK, min(clearances)
        assert clearances[-1] < MARGIN + 0.01   # it went down to the margin
    finally:
        assert node.stop() == 0


def test_an_obstacle_added_in_the_path_is_kept_apart_and_removing_it_frees_the_way():
    judge = Judge()
    node = NodeUnderTest(params())
    pub = node.client.create_publisher(MarkerArray, '/ik_node/obstacles', 10)
    try:
        node.ready(60.0)
        start = np.array(node.joints[-1].position)
        from ik_node import Chain
        path, base, tip = ARMS['iiwa14']
        chain = Chain.from_urdf_file(str(path), base, tip)
        goal_q = np.array(start) + [0.8, 0.0, 0.0, 0.0, 0.0, 0.0, 0.0]
        goal = chain.forward(goal_q)
        # On the straight line the smoothed tip path takes.
        mid = 0.5 * (chain.forward(start)[:3, 3] + goal[:3, 3])
        # A ball on the straight line the smoothed tip path takes (its distance
        # to every solid has a closed form: the judge is exact and quick).
        radius = 0.08
        ball = Marker(ns='test', id=1, type=Marker.SPHERE, action=Marker.ADD)
        ball.header.frame_id = 'world'
        ball.pose = matrix_to_pose(_translation(mid))
        ball.scale.x = ball.scale.y = ball.scale.z = 2 * radius
        assert node.wait(lambda: pub.get_subscription_count() > 0, 10.0)
        pub.publish(MarkerArray(markers=[ball]))
        assert node.wait(lambda: node.diagnostic('obstacles') == '2', 10.0), node.output()
        solid = ('sphere', (radius,), _translation(mid))
        assert judge.clearance(node.joints[-1], solid) > 0.05   # clear of the arm at the start
        node.send(goal)
        # Held at the ball, or slid along it (then the hold may end between two
        # diagnostics): the last hold names it either way.
        assert node.wait(lambda: 'test/1' in (node.diagnostic('collision_last_hold') or ''),
                         20.0), node.output()
        node.spin(2.0)
        clear = [judge.clearance(m, solid) for m in node.joints]
        assert min(clear) >= MARGIN - SLACK, min(clear)
        # Held at the ball or going around it (sliding along it): the guard's
        # choice; either way it never came closer than the margin.
        # Bad markers are refused, counted, and the box stays.
        bad = Marker(ns='test', id=2, type=Marker.CUBE, action=Marker.ADD)
        bad.scale.x = float('nan')
        odd = Marker(ns='test', id=3, type=Marker.ARROW, action=Marker.ADD)
        pub.publish(MarkerArray(markers=[bad, odd]))
        assert node.wait(lambda: int(node.diagnostic('rejected_obstacle_size') or 0) >= 1 and
                         int(node.diagnostic('rejected_obstacle_type') or 0) >= 1, 10.0), \
            node.output()
        assert node.diagnostic('obstacles') == '2'
        # DELETE: the way is free, the arm reaches the goal (if it had not).
        pub.publish(MarkerArray(markers=[Marker(ns='test', id=1, action=Marker.DELETE)]))
        assert node.wait(lambda: np.linalg.norm(chain.forward(np.array(
            node.joints[-1].position))[:3, 3] - goal[:3, 3]) < 1e-3, 30.0), node.output()
    finally:
        assert node.stop() == 0


def test_a_larger_margin_at_run_time_holds_the_arm_where_it_is_inside_it():
    judge = Judge()
    node = NodeUnderTest(params())
    client = node.client.create_client(SetParameters, '/ik_node/set_parameters')
    try:
        node.ready(60.0)
        node.send(below_the_floor())
        assert node.wait(lambda: (node.diagnostic('collision') or '').startswith('held'),
                         30.0), node.output()
        node.spin(1.0)
        at = judge.floor_clearance(node.joints[-1])
        assert client.wait_for_service(timeout_sec=10.0)
        future = client.call_async(SetParameters.Request(parameters=[
            Parameter('collision_margin', value=0.05).to_parameter_msg()]))
        assert node.wait(future.done, 10.0) and future.result().results[0].successful
        assert node.wait(lambda: node.diagnostic('collision_margin') == '0.05', 10.0), \
            (node.diagnostic('collision_margin'), len(node.diagnostics), node.output())
        count = len(node.joints)
        node.spin(2.0)
        # Judged on 100 states at least, however slow a busy machine makes them.
        assert node.wait(lambda: len(node.joints) >= count + 100, 30.0), len(node.joints) - count
        # Inside the new margin, toward a target below the floor: never closer.
        later = [judge.floor_clearance(m) for m in node.joints[count:]]
        assert min(later) >= at - SLACK, (at, min(later))
        # A margin out of range is refused with the reason.
        future = client.call_async(SetParameters.Request(parameters=[
            Parameter('collision_margin', value=-0.1).to_parameter_msg()]))
        assert node.wait(future.done, 10.0) and not future.result().results[0].successful
    finally:
        assert node.stop() == 0


def _translation(p):
    t = np.eye(4)
    t[:3, 3] = p
    return t


@pytest.mark.parametrize('content, pattern', [
    ('obstacles: [{name: a, shape: box, size: [0.1, 0.1]}]', 'takes 3'),
    ('obstacles: [{name: a, shape: sphere, size: [0.1], frame: nowhere}]', "'nowhere'"),
    ('obstacles: [{name: a, shape: sphere, size: [.nan]}]', 'not within'),
    ('obstacles: 3', 'expected a mapping'),
    ('obstacles: [{name: a, shape: mesh, mesh: /no/such.stl}]', 'cannot read mesh'),
    ('{{{', 'not YAML'),
])
def test_a_bad_obstacles_file_stops_the_node_at_start_up(content, pattern, tmp_path, capfd):
    path = tmp_path / 'obstacles.yaml'
    path.write_text(content)
    code, err = start_in_process(dict(model_params('iiwa14'), obstacles_file=str(path),
                                      collision_checking='true'), capfd, unique_domain_id())
    assert code == 1, err
    assert pattern in err, err
    assert 'Traceback' not in err


def test_a_bad_srdf_stops_the_node_at_start_up(tmp_path, capfd):
    path = tmp_path / 'arm.srdf'
    path.write_text('<robot name="iiwa14"><disable_collisions link1="iiwa_link_1" '
                    'link2="no_such_link" reason="Never"/></robot>')
    code, err = start_in_process(dict(model_params('iiwa14'), srdf_path=str(path),
                                      collision_checking='true'), capfd, unique_domain_id())
    assert code == 1, err
    assert "'no_such_link'" in err, err
    assert 'Traceback' not in err
