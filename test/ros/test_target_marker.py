# SPDX-License-Identifier: Apache-2.0

"""The RViz handles over DDS: served, dragged, followed, coloured, refused, menu.

The node runs as a subprocess on the bundled iiwa14; the client is
rviz_client.RvizLikeClient (upstream's client rules: sequence numbers,
init / update). Poses are judged with the tests' own forward kinematics
(oracle.forward), joint limits with the description's (the chain's limits
as the URDF reader of the oracle reads them).
"""

import math
import time

from ik_node.core.model.chain import Chain
from ik_node.ros.conversions import matrix_to_pose, pose_to_matrix
from models import ARMS
from node_process import model_params, NodeUnderTest
import numpy as np
from oracle import forward, pose_errors
from rviz_client import RUNNING, RvizLikeClient
from visualization_msgs.msg import InteractiveMarkerControl as Control, \
    InteractiveMarkerFeedback as Feedback

ARM = 'iiwa14'
NAMESPACE = '/ik_node/target_marker'
HOME = [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]


def start(**extra):
    """Return (node, client, chain, base): the iiwa14 at HOME, an RViz-like client running."""
    path, base, tip = ARMS[ARM]
    params = dict(model_params(ARM), initial_positions='[' + ', '.join(map(str, HOME)) + ']')
    params.update(extra)
    node = NodeUnderTest(params)
    client = RvizLikeClient(node.client, NAMESPACE, fixed_frame=base)
    chain = Chain.from_urdf_file(str(path), base, tip)
    node.ready(60.0)
    assert node.wait(lambda: running(client) and 'target' in client.markers, 30.0), \
        (client.state, node.output())
    return node, client, chain, base


def running(client):
    """Run the client's cycle once (as RViz does each frame); return whether it is RUNNING."""
    client.update()
    return client.state == RUNNING


def latest_q(node):
    """Return the newest joint state's positions (n,)."""
    return np.array(node.joints[-1].position)


def within_limits(chain, node, tol=1e-9):
    """Return the joint states outside the description's position limits (an empty list: none)."""
    return [m.position for m in node.joints
            if np.any(np.array(m.position) < chain.lower - tol)
            or np.any(np.array(m.position) > chain.upper + tol)]


def handle_pose(client):
    """Return the target handle's pose (4, 4) as the client holds it."""
    client.update()
    return pose_to_matrix(client.markers['target'].pose)


def path_to(start_pose, goal, steps=25):
    """Return ``steps`` - 1 poses (Pose msgs) after start_pose on to goal: a line, and slerp."""
    from ik_node.core.rotations import matrix_to_quaternion, quaternion_to_matrix, slerp
    q0, q1 = matrix_to_quaternion(start_pose[:3, :3]), matrix_to_quaternion(goal[:3, :3])
    poses = []
    for s in np.linspace(0.0, 1.0, steps)[1:]:
        t = np.eye(4)
        t[:3, :3] = quaternion_to_matrix(slerp(q0, q1, s))
        t[:3, 3] = (1 - s) * start_pose[:3, 3] + s * goal[:3, 3]
        poses.append(matrix_to_pose(t))
    return poses


def test_the_handle_is_served_at_the_tip_in_the_base_frame_with_a_menu_and_a_pole():
    node, client, chain, base = start()
    try:
        marker = client.markers['target']
        assert marker.header.frame_id == base
        assert (marker.header.stamp.sec, marker.header.stamp.nanosec) == (0, 0)   # frame-locked
        tip = forward(chain, latest_q(node))
        shown = pose_to_matrix(marker.pose)
        assert np.linalg.norm(shown[:3, 3] - tip[:3, 3]) < 2e-3
        assert pose_errors(chain, latest_q(node), shown)[1] < 0.02
        titles = [e.title for e in marker.menu_entries]
        assert any('Reset' in t for t in titles) and '[x] Smoothing' in titles
        assert '[x] auto' in titles
        modes = {c.interaction_mode for c in marker.controls}
        assert {Control.MOVE_AXIS, Control.ROTATE_AXIS} <= modes
        assert 'pole' in client.markers   # the iiwa14's analytic solver turns the elbow
        assert node.proc.poll() is None
    finally:
        assert node.stop() == 0


def test_a_drag_moves_the_arm_there_within_its_limits_and_then_the_handle_follows_the_arm():
    node, client, chain, base = start()
    try:
        q_goal = np.array([0.4, 0.7, -0.3, -1.0, 0.3, 0.8, 0.2])
        goal = forward(chain, q_goal)
        start_pose = handle_pose(client)
        count = len(node.joints)
        client.drag('target', path_to(start_pose, goal), node.spin)
        assert node.wait(lambda: pose_errors(chain, latest_q(node), goal)[0] < 1e-4
                         and pose_errors(chain, latest_q(node), goal)[1] < 1e-3, 30.0), \
            (pose_errors(chain, latest_q(node), goal), node.output())
        assert not within_limits(chain, node)
        states = node.joints[count:]
        assert all(np.all(np.isfinite(m.position)) for m in states)
        # Released, the handle follows the arm wherever something else sends it
        # (here ~/target_pose): the update topic puts it at the tip.
        other = forward(chain, np.array([-0.3, 0.4, 0.2, -1.4, -0.2, 0.7, -0.4]))
        node.send(other)
        assert node.wait(lambda: pose_errors(chain, latest_q(node), other)[0] < 1e-4, 30.0)
        assert node.wait(lambda: running(client) and np.linalg.norm(
            handle_pose(client)[:3, 3] - other[:3, 3]) < 2e-3, 10.0), handle_pose(client)
        assert pose_errors(chain, latest_q(node), handle_pose(client))[1] < 0.02
        assert client.resets == 0   # every update was numbered one after the last
        assert node.diagnostic('handle_targets') not in (None, '0')
    finally:
        assert node.stop() == 0


def test_a_drag_to_an_unreachable_pose_turns_the_handle_red_and_says_unreachable():
    node, client, chain, base = start()
    try:
        far = handle_pose(client)
        far[:3, 3] = [2.5, 0.0, 0.5]   # beyond the iiwa14's reach (1.3 m)
        client.drag('target', path_to(handle_pose(client), far, steps=6), node.spin)
        assert node.wait(lambda: running(client)
                         and 'unreachable' in client.markers['target'].description, 20.0), \
            client.markers['target'].description
        ball = client.markers['target'].controls[0].markers[0].color
        assert ball.r > 0.8 and ball.g < 0.3   # red
        node.spin(1.0)
        assert not within_limits(chain, node)
        assert (node.diagnostic('target_reachable') or '') == 'false'
    finally:
        assert node.stop() == 0


def test_bad_feedback_is_refused_and_counted_and_a_flood_is_coalesced():
    node, client, chain, base = start()
    try:
        pose = client.markers['target'].pose
        bad = matrix_to_pose(np.eye(4))
        bad.position.x = math.nan
        client.feedback('no_such_marker', Feedback.POSE_UPDATE, pose)
        client.feedback('target', Feedback.POSE_UPDATE, bad)
        unknown_frame = Feedback(client_id=client.client_id, marker_name='target',
                                 event_type=Feedback.POSE_UPDATE, pose=pose)
        unknown_frame.header.frame_id = 'no_such_frame'
        client.feedback_pub.publish(unknown_frame)
        node.spin(0.5)
        # A mouse at 1 kHz for 2 s: the newest pose per tick is taken, never a burst.
        here = pose_to_matrix(pose)
        sent, t0 = 0, time.monotonic()
        while time.monotonic() - t0 < 2.0:
            here[0, 3] += 2e-5
            client.feedback('target', Feedback.POSE_UPDATE, matrix_to_pose(here))
            sent += 1
            node.executor.spin_once(timeout_sec=0.0)
            time.sleep(0.001)
        client.feedback('target', Feedback.MOUSE_UP, matrix_to_pose(here))
        assert node.wait(lambda: node.diagnostic('handle_refused_marker_unknown') == '1'
                         and node.diagnostic('handle_refused_marker_not_finite') == '1'
                         and node.diagnostic('handle_refused_marker_wrong_frame') == '1', 10.0), \
            [(k.key, k.value) for s in node.diagnostics[-1].status for k in s.values]
        node.spin(1.0)
        taken = int(node.diagnostic('handle_targets'))
        coalesced = int(node.diagnostic('handle_poses_coalesced'))
        unread = int(node.diagnostic('handle_feedback_dropped_unread'))
        # Each pose sent was streamed, replaced by a newer one, or lost unread
        # behind the subscription's keep-last queue: all of them counted.
        assert taken + coalesced + unread == sent, (taken, coalesced, unread, sent)
        # One target per tick at most (a tick publishes one joint state).
        assert taken <= len(node.joints), (taken, len(node.joints))
        assert node.proc.poll() is None and node.diagnostic('callback_errors') == '0'
        assert not within_limits(chain, node)
        assert all(np.all(np.isfinite(m.position)) for m in node.joints)
    finally:
        assert node.stop() == 0


def test_the_menu_switches_smoothing_and_the_solver_and_resets_the_arm():
    node, client, chain, base = start()
    try:
        marker = client.markers['target']
        entry = {e.title: e.id for e in marker.menu_entries}
        client.feedback('target', Feedback.MENU_SELECT, menu_entry_id=entry['[x] Smoothing'])
        assert node.wait(lambda: running(client) and '[ ] Smoothing' in
                         [e.title for e in client.markers['target'].menu_entries], 10.0)
        # Drag away, then reset: the arm heads back to HOME.
        goal = forward(chain, np.array([0.3, 0.6, 0.0, -1.0, 0.0, 0.9, 0.0]))
        client.drag('target', path_to(handle_pose(client), goal, steps=5), node.spin)
        assert node.wait(lambda: pose_errors(chain, latest_q(node), goal)[0] < 1e-3, 30.0)
        entry = {e.title: e.id for e in client.markers['target'].menu_entries}
        reset = next(k for t, k in entry.items() if t.startswith('Reset'))
        client.feedback('target', Feedback.MENU_SELECT, menu_entry_id=reset)
        assert node.wait(lambda: np.max(np.abs(latest_q(node) - HOME)) < 1e-4, 30.0)
        assert not within_limits(chain, node)
        # The Jacobian solver uses no pole: its handle goes; back to analytic, it returns.
        client.feedback('target', Feedback.MENU_SELECT, menu_entry_id=entry['[ ] jacobian'])
        assert node.wait(lambda: running(client) and 'pole' not in client.markers
                         and '[x] jacobian' in [e.title for e in
                                                client.markers['target'].menu_entries], 10.0)
        assert node.diagnostic('solver') == 'jacobian' or node.wait(
            lambda: node.diagnostic('solver') == 'jacobian', 5.0)
        client.feedback('target', Feedback.MENU_SELECT, menu_entry_id=entry['[ ] analytic'])
        assert node.wait(lambda: running(client) and 'pole' in client.markers, 10.0)
        # An entry the menu does not have is refused and counted.
        client.feedback('target', Feedback.MENU_SELECT, menu_entry_id=999)
        assert node.wait(lambda: node.diagnostic('handle_refused_marker_menu_unknown') == '1',
                         10.0)
    finally:
        assert node.stop() == 0


def test_the_pole_handle_turns_the_elbow_and_keeps_the_tip():
    node, client, chain, base = start()
    try:
        tip = forward(chain, latest_q(node))
        elbow = pose_to_matrix(client.markers['pole'].pose)
        moved = elbow.copy()
        moved[1, 3] += 0.4   # the pole 0.4 m to the side
        client.drag('pole', [matrix_to_pose(moved)], node.spin)
        before = latest_q(node)
        assert node.wait(lambda: np.max(np.abs(latest_q(node) - before)) > 0.05, 20.0)
        node.wait(lambda: False, 3.0)
        assert pose_errors(chain, latest_q(node), tip)[0] < 1e-3
        assert not within_limits(chain, node)
        assert node.diagnostic('handle_poles') == '1'
    finally:
        assert node.stop() == 0
