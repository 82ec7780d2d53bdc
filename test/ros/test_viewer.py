# SPDX-License-Identifier: Apache-2.0

"""ik_viewer beside the node: drawn where FK says, gizmos move the arm, a real browser shows it.

The node runs as a subprocess on the bundled iiwa14, the viewer as another
(``python -m ik_node.ros.viewer``) on the same ROS domain. The browser's
side is played twice: by viser_client (viser's own wire protocol, as its
web client speaks it), and by Debian's Chromium, headless, on the page
itself (skipped, saying so, where no chromium is installed; CI installs
it). Poses are judged with the tests' own forward kinematics (oracle).
"""

import math
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile

from models import ARMS
from node_process import model_params, NodeUnderTest
import numpy as np
from oracle import forward, pose_errors, RawModel
import pytest
from ros_helpers import OutputDrain, wait_until

viser = pytest.importorskip('viser', reason='viser is not installed: ik_viewer is optional')
from viser_client import ViserClient  # noqa: E402 (needs viser's own dependencies)

ARM = 'iiwa14'
HOME = [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]
LINKS = ['iiwa_link_2', 'iiwa_link_3', 'iiwa_link_4', 'iiwa_link_5', 'iiwa_link_6']
# The viewer's initial camera (ik_node.ros.viewer.main) and viser's default field of view.
CAMERA, LOOK_AT, FOV_DEG = np.array([1.8, 1.4, 1.3]), np.array([0.0, 0.0, 0.5]), 75.0


def free_port():
    """Return a TCP port free on localhost now."""
    with socket.socket() as s:
        s.bind(('127.0.0.1', 0))
        return s.getsockname()[1]


class Viewer:
    """ik_viewer as a subprocess on ``domain``, serving on a free port."""

    def __init__(self, domain, args=()):
        """Start it (more command-line ``args``); its output is drained on a thread."""
        self.port = free_port()
        env = dict(os.environ, ROS_DOMAIN_ID=str(domain), PYTHONUNBUFFERED='1')
        self.proc = subprocess.Popen([sys.executable, '-m', 'ik_node.ros.viewer', '--port',
                                      str(self.port), *args], env=env, stdout=subprocess.PIPE,
                                     stderr=subprocess.STDOUT, text=True)
        self.drain = OutputDrain(self.proc.stdout)

    def drawn(self, node, timeout_s=30.0):
        """Wait until it says it draws the model."""
        assert node.wait(lambda: 'drawing' in self.drain.so_far(), timeout_s), \
            self.drain.so_far()

    def errors(self):
        """Return the lines of its output that report an error (a logged one or a traceback)."""
        return [line for line in self.drain.so_far().splitlines()
                if '[ERROR]' in line or 'Traceback' in line]

    def stop(self):
        """SIGINT, bounded; return the exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=10)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait(timeout=5)


def start():
    """Return (node, viewer, chain, raw): the iiwa14 at HOME and the viewer drawing it."""
    path, base, tip = ARMS[ARM]
    params = dict(model_params(ARM), initial_positions='[' + ', '.join(map(str, HOME)) + ']')
    node = NodeUnderTest(params)
    viewer = Viewer(node.domain)
    from ik_node.core.model.chain import Chain
    chain = Chain.from_urdf_file(str(path), base, tip)
    try:
        node.ready(60.0)
        viewer.drawn(node)
    except BaseException:
        viewer.stop()
        node.stop()
        raise
    return node, viewer, chain, RawModel(path.read_text())


def wxyz_of(rotation):
    """Return (w, x, y, z) of a rotation matrix (transforms3d, not the code under test)."""
    import transforms3d
    return tuple(transforms3d.quaternions.mat2quat(rotation))


def test_a_gizmo_dragged_in_viser_moves_the_arm_and_the_links_are_drawn_where_fk_puts_them():
    node, viewer, chain, raw = start()
    try:
        client = ViserClient(viewer.port, viser.__version__)
        client.receive(2.0)
        goal = forward(chain, np.array([0.3, 0.8, -0.2, -0.9, 0.2, 0.9, 0.1]))
        here = forward(chain, np.array(node.joints[-1].position))
        steps = [(wxyz_of(goal[:3, :3]), tuple((1 - s) * here[:3, 3] + s * goal[:3, 3]))
                 for s in np.linspace(0.2, 1.0, 5)]
        client.drag('/target', steps)
        assert node.wait(lambda: pose_errors(chain, np.array(node.joints[-1].position),
                                             goal)[0] < 1e-4, 30.0), node.joints[-1].position
        assert all(np.all(np.array(m.position) >= chain.lower - 1e-9)
                   and np.all(np.array(m.position) <= chain.upper + 1e-9) for m in node.joints)
        node.spin(1.0)
        client.receive(1.5)
        values = dict(zip(node.joints[-1].name, node.joints[-1].position))
        for link in LINKS:
            drawn = client.newest('SetPositionMessage', f'/robot/{link}')
            assert drawn is not None, link
            truth = raw.pose(ARMS[ARM][1], link, values)[:3, 3]
            assert np.linalg.norm(np.array(drawn['position']) - truth) < 2e-3, link
        client.close()   # a browser closed: the viewer goes on, the node too
        node.spin(1.0)
        assert viewer.proc.poll() is None and node.proc.poll() is None
    finally:
        viewer_code, node_code = viewer.stop(), node.stop()   # both, whatever fails
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()
        assert node_code == 0


def project(point, width, height):
    """Return the pixel (column, row) of a base-frame point seen by the viewer's camera."""
    forward_axis = (LOOK_AT - CAMERA) / np.linalg.norm(LOOK_AT - CAMERA)
    right = np.cross(forward_axis, [0.0, 0.0, 1.0])
    right /= np.linalg.norm(right)
    up = np.cross(right, forward_axis)
    d = point - CAMERA
    x, y, z = d @ right, d @ up, d @ forward_axis
    f = 0.5 * height / math.tan(math.radians(FOV_DEG) / 2)
    return int(round(width / 2 + f * x / z)), int(round(height / 2 - f * y / z))


def test_chromium_shows_the_arm_where_fk_puts_its_links():
    browser = shutil.which('chromium') or shutil.which('chromium-browser')
    if browser is None:
        if os.environ.get('CI') == 'true':
            pytest.fail('CI installs chromium (.ci/run) and it is not there')
        pytest.skip('no chromium on this machine (Debian: apt-get install chromium); CI has it')
    from PIL import Image
    node, viewer, chain, raw = start()
    try:
        node.spin(1.0)
        width, height = 900, 700
        with tempfile.TemporaryDirectory() as folder:
            shot = os.path.join(folder, 'viewer.png')
            subprocess.run([browser, '--headless=new', '--no-sandbox', '--disable-gpu',
                            '--use-angle=swiftshader', '--enable-unsafe-swiftshader',
                            f'--user-data-dir={folder}/profile', '--hide-scrollbars',
                            f'--window-size={width},{height}', '--virtual-time-budget=20000',
                            f'--screenshot={shot}', f'http://localhost:{viewer.port}'],
                           check=True, timeout=120, capture_output=True)
            image = np.asarray(Image.open(shot).convert('RGB'), dtype=float)
        values = dict(zip(node.joints[-1].name, node.joints[-1].position))
        background = np.median(image[:40, :40].reshape(-1, 3), axis=0)   # a corner: no arm
        robot_seen = 0
        for link in LINKS:
            column, row = project(raw.pose(ARMS[ARM][1], link, values)[:3, 3], width, height)
            patch = image[row - 2:row + 3, column - 2:column + 3].reshape(-1, 3)
            if np.max(np.abs(np.median(patch, axis=0) - background)) > 40:
                robot_seen += 1
        assert robot_seen == len(LINKS), (robot_seen, background)
        # Where FK puts nothing (a metre to the side, high up), the background.
        column, row = project(np.array([0.0, -1.0, 1.4]), width, height)
        patch = image[row - 2:row + 3, column - 2:column + 3].reshape(-1, 3)
        assert np.max(np.abs(np.median(patch, axis=0) - background)) < 20
    finally:
        viewer_code, node_code = viewer.stop(), node.stop()   # both, whatever fails
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()
        assert node_code == 0


def test_a_browser_closed_mid_drag_leaves_the_arm_at_rest_and_the_viewer_running():
    node, viewer, chain, raw = start()
    try:
        client = ViserClient(viewer.port, viser.__version__)
        client.receive(1.0)
        here = forward(chain, np.array(node.joints[-1].position))
        client.send('TransformControlsDragStartMessage', name='/target')
        for k in range(1, 6):
            client.send('TransformControlsUpdateMessage', name='/target',
                        wxyz=[float(v) for v in wxyz_of(here[:3, :3])],
                        position=[float(here[0, 3]), float(here[1, 3] + 0.02 * k),
                                  float(here[2, 3])])
            client.receive(0.03)
        client.close()   # no drag end: the tab is gone
        assert node.wait(lambda: len(node.joints) > 2 and np.array_equal(
            node.joints[-1].position, node.joints[-2].position)
            and np.max(np.abs(node.joints[-1].velocity)) == 0.0, 30.0)
        assert all(np.all(np.isfinite(m.position)) for m in node.joints)
        # The gizmo is free again: a new browser drags it.
        again = ViserClient(viewer.port, viser.__version__)
        again.receive(1.0)
        goal = forward(chain, np.array(HOME))
        again.drag('/target', [(wxyz_of(goal[:3, :3]), tuple(goal[:3, 3]))])
        assert node.wait(lambda: pose_errors(chain, np.array(node.joints[-1].position),
                                             goal)[0] < 1e-4, 30.0)
        again.close()
        assert viewer.proc.poll() is None
    finally:
        viewer_code, node_code = viewer.stop(), node.stop()   # both, whatever fails
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()
        assert node_code == 0


def test_the_viewer_draws_a_restarted_node():
    node, viewer, chain, raw = start()
    try:
        node.stop()
        node = NodeUnderTest(dict(model_params('ur5e')), domain=node.domain)
        node.ready(60.0)
        assert wait_until(lambda: 'of base_link -> tool0' in viewer.drain.so_far(), 30.0,
                          lambda p: node.executor.spin_once(timeout_sec=p)), \
            viewer.drain.so_far()
        assert viewer.proc.poll() is None
    finally:
        viewer_code = viewer.stop()
        node.stop()   # stopped before any assertion: a failed test leaves no node behind
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()


def test_a_namespaced_node_is_drawn_by_a_viewer_started_as_launch_starts_it():
    """As launch starts it: --namespace, and its own node in that namespace (-r __ns:=)."""
    path, base, tip = ARMS[ARM]
    node = NodeUnderTest(dict(model_params(ARM)), namespace='/arm1')
    viewer = Viewer(node.domain, ['--namespace', 'arm1', '--ros-args', '-r', '__ns:=/arm1'])
    try:
        node.ready(60.0)
        viewer.drawn(node)
        assert 'joint states from /arm1/joint_states' in viewer.drain.so_far()
        client = ViserClient(viewer.port, viser.__version__)
        assert node.wait(lambda: client.receive(0.05) is not None and client.newest(
            'SetPositionMessage', '/robot/iiwa_link_4') is not None, 20.0)
        client.close()
    finally:
        viewer_code, node_code = viewer.stop(), node.stop()   # both, whatever fails
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()
        assert node_code == 0


def test_obstacles_added_and_removed_on_the_node_are_drawn_and_removed_once():
    """The node re-sends its ~/markers at 5 Hz; the viewer draws what changed, once."""
    from visualization_msgs.msg import Marker, MarkerArray
    pytest.importorskip('coal', reason='coal is not installed: the node has no obstacles')
    path, base, tip = ARMS[ARM]
    params = dict(model_params(ARM), collision_checking='true',
                  initial_positions='[' + ', '.join(map(str, HOME)) + ']')
    node = NodeUnderTest(params)
    viewer = Viewer(node.domain)
    try:
        node.ready(60.0)
        viewer.drawn(node)
        client = ViserClient(viewer.port, viser.__version__)
        client.receive(1.0)
        pub = node.client.create_publisher(MarkerArray, '/ik_node/obstacles', 10)
        ball = Marker(ns='things', id=3, type=Marker.SPHERE, action=Marker.ADD)
        ball.header.frame_id = base
        ball.pose.position.x, ball.pose.position.y, ball.pose.position.z = 0.0, -0.6, 0.3
        ball.pose.orientation.w = 1.0
        ball.scale.x = ball.scale.y = ball.scale.z = 0.2
        assert node.wait(lambda: pub.get_subscription_count() > 0, 10.0)
        pub.publish(MarkerArray(markers=[ball]))

        def created():
            client.receive(0.05)
            return [m for m in client.messages if m.get('type') == 'IcosphereMessage'
                    and m.get('name', '').startswith('/obstacles/')]
        assert node.wait(lambda: created(), 20.0)
        drawn = created()[0]
        node.spin(1.5)   # ~7 more ~/markers messages, the same obstacle in each
        client.receive(0.5)
        assert len(created()) == 1, 'an unchanged obstacle was drawn again'
        assert drawn['props']['radius'] == pytest.approx(0.1)
        where = client.newest('SetPositionMessage', drawn['name'])
        assert np.allclose(where['position'], [0.0, -0.6, 0.3], atol=1e-6), where
        ball.action = Marker.DELETE
        pub.publish(MarkerArray(markers=[ball]))
        assert node.wait(lambda: client.receive(0.05) is not None and any(
            m.get('type') == 'RemoveSceneNodeMessage' and m.get('name') == drawn['name']
            for m in client.messages), 20.0)
        client.close()
    finally:
        viewer_code, node_code = viewer.stop(), node.stop()   # both, whatever fails
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()
        assert node_code == 0


def test_a_description_changed_on_the_topic_is_drawn_anew():
    """A node fed by robot_description (robot_state_publisher's topic): a new text is redrawn."""
    from rclpy.qos import DurabilityPolicy, QoSProfile
    from std_msgs.msg import String
    path, base, tip = ARMS[ARM]
    node = NodeUnderTest({'base_link': base, 'tip_link': tip})
    viewer = Viewer(node.domain)
    try:
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL)
        desc = node.client.create_publisher(String, '/robot_description', latched)
        text = path.read_text()
        desc.publish(String(data=text))
        node.ready(60.0)
        viewer.drawn(node)
        client = ViserClient(viewer.port, viser.__version__)
        client.receive(1.0)
        # The same arm with an orange link 4 (its joints unchanged: the node goes on).
        orange = text.replace('link_4.stl"/></geometry><material name="white"/>',
                              'link_4.stl"/></geometry><material name="orange"/>')
        assert orange != text

        def orange_link_4():
            client.receive(0.05)
            return any(m.get('name', '').startswith('/robot/iiwa_link_4/')
                       and m.get('props', {}).get('color') == [255, 115, 0]
                       for m in client.messages)
        # Sent again while not drawn: rclpy may lose a message it took under load
        # (ik_node.ros.viewer.spin); the viewer must draw the new text once it has it.
        for _ in range(6):
            desc.publish(String(data=orange))
            if node.wait(orange_link_4, 5.0):
                break
        assert orange_link_4(), viewer.drain.so_far()
        assert viewer.drain.so_far().count('drawing') == 2
        client.close()
    finally:
        viewer_code, node_code = viewer.stop(), node.stop()   # both, whatever fails
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()
        assert node_code == 0


def test_a_two_arm_node_is_drawn_with_a_gizmo_per_hand_and_dragging_one_moves_that_hand():
    """The bundled iiwa14_dual (config/iiwa14_dual.yaml): two hands, a gizmo and a verdict each.

    A browser (viser's protocol) drags the left hand's gizmo 5 cm up: the left
    hand goes there, the right one holds (the raw description's FK of the
    node's joint states); the left's verdict ball turns green (arrived), the
    right's stays grey (holding: no target); both arms' links are drawn where
    the FK puts them.
    """
    from pathlib import Path
    root = Path(__file__).resolve().parents[2]
    urdf = root / 'urdf' / 'iiwa14_dual.urdf'
    node = NodeUnderTest({'urdf_path': str(urdf)}, extra_args=[
        '--params-file', str(root / 'config' / 'iiwa14_dual.yaml')])
    viewer = Viewer(node.domain)
    raw = RawModel(urdf.read_text())
    try:
        assert node.wait(lambda: len(node.joints) > 5, 60.0), node.drain.text()
        viewer.drawn(node)
        client = ViserClient(viewer.port, viser.__version__)
        client.receive(2.0)
        values = dict(zip(node.joints[-1].name, node.joints[-1].position))
        left0, right0 = (raw.pose('base', tip, values) for tip in ('left_tool0', 'right_tool0'))
        goal = left0.copy()
        goal[2, 3] += 0.05
        steps = [(wxyz_of(goal[:3, :3]), tuple(left0[:3, 3] + s * (goal[:3, 3] - left0[:3, 3])))
                 for s in np.linspace(0.2, 1.0, 5)]
        client.drag('/target_left', steps)

        def hands():
            q = dict(zip(node.joints[-1].name, node.joints[-1].position))
            return raw.pose('base', 'left_tool0', q), raw.pose('base', 'right_tool0', q)
        assert node.wait(lambda: np.linalg.norm(hands()[0][:3, 3] - goal[:3, 3]) < 1e-4,
                         30.0), hands()[0][:3, 3] - goal[:3, 3]
        assert np.linalg.norm(hands()[1][:3, 3] - right0[:3, 3]) < 1e-4
        node.spin(1.5)
        client.receive(2.0)
        left = client.newest('SceneNodeUpdateMessage', '/target_left/verdict')
        assert left is not None and list(left['updates'].get('color', [])) == [40, 200, 60], left
        right = client.newest('IcosphereMessage', '/target_right/verdict')
        assert right is not None
        values = dict(zip(node.joints[-1].name, node.joints[-1].position))
        for link in ('left_iiwa_link_4', 'right_iiwa_link_4', 'left_iiwa_link_6'):
            drawn = client.newest('SetPositionMessage', f'/robot/{link}')
            assert drawn is not None, link
            truth = raw.pose('base', link, values)[:3, 3]
            assert np.linalg.norm(np.array(drawn['position']) - truth) < 2e-3, link
        assert 'drives several end effectors' not in viewer.drain.so_far()
        client.close()
    finally:
        viewer_code, node_code = viewer.stop(), node.stop()
        assert viewer_code == 0 and not viewer.errors(), viewer.drain.text()
        assert node_code == 0
