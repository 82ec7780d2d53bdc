# SPDX-License-Identifier: Apache-2.0

"""launch_testing test of launch/ik_node.launch.py (rviz:=false).

Runs where launch_testing is installed (a ROS 2 distro, after colcon build);
skips, saying so, where it is not (launch_testing has no PyPI wheel), where
ik_node is not in the ament index (not built with colcon, or its
install/setup.bash not sourced) or where robot_state_publisher is missing.
Only ik_node's own joint_states count: they are told from any other
publisher on the domain by the publisher's node name (through its DDS
writer id) and by the arm's joint names. Every process must exit cleanly.
"""

from pathlib import Path
import time
import unittest

import pytest

launch_testing = pytest.importorskip(
    'launch_testing', reason='launch_testing is not installed (no PyPI wheel); run this test '
    'on a ROS 2 install after colcon build')
from ament_index_python.packages import get_package_prefix, PackageNotFoundError  # noqa: E402,I100
import launch  # noqa: E402
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import rclpy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402


def _not_installed(*packages):
    missing = []
    for package in packages:
        try:
            get_package_prefix(package)
        except PackageNotFoundError:
            missing.append(package)
    return missing


_MISSING = _not_installed('ik_node', 'robot_state_publisher')
ROOT = Path(__file__).resolve().parents[2]
LAUNCH_FILE = ROOT / 'launch' / 'ik_node.launch.py'
# The first start compiles the numba kernels when their cache is cold (about a minute).
FIRST_STATE_TIMEOUT_S = 180.0


def iiwa14_joint_names():
    """Joint names of the bundled iiwa14 chain, read from its URDF."""
    from ik_node.description.urdf import chain_from_urdf_file
    return chain_from_urdf_file(str(ROOT / 'urdf' / 'iiwa14.urdf'), 'iiwa_link_0',
                                'tool0').joint_names


def _launch_description():
    """Start the shipped launch file without RViz."""
    return launch.LaunchDescription([
        launch.actions.IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
            launch_arguments={'rviz': 'false', 'robot': 'iiwa14'}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


SKIP_REASON = (f"{' and '.join(_MISSING)} not in the ament index (AMENT_PREFIX_PATH): build "
               'ik_node with colcon and source install/setup.bash on a ROS 2 install with '
               'robot_state_publisher')
if not _MISSING:
    # Without generate_test_description, launch_testing's pytest plugin leaves
    # the module to pytest, which reports the two classes below as skipped with
    # the reason (a module-level skip inside the plugin's collection hook is an
    # error: 'found no collectors', exit code 4).
    generate_test_description = pytest.mark.launch_test(_launch_description)


@unittest.skipIf(_MISSING, SKIP_REASON)
class TestJointStates(unittest.TestCase):
    """While running: ik_node itself publishes joint_states of the iiwa14's joints."""

    def test_ik_node_publishes_the_arms_joint_states(self):
        """Wait (bounded) for a joint_states message whose writer belongs to /ik_node."""
        names = iiwa14_joint_names()
        rclpy.init()
        node = rclpy.create_node('launch_test_client')
        received = []
        node.create_subscription(
            JointState, '/joint_states',
            lambda msg, info: received.append((msg, bytes(info['publisher_gid']['data']))), 10)

        def from_ik_node():
            writers = {bytes(e.endpoint_gid) for e in node.get_publishers_info_by_topic(
                '/joint_states') if e.node_name == 'ik_node' and e.node_namespace == '/'}
            return [msg for msg, gid in received if gid in writers]
        try:
            end = time.monotonic() + FIRST_STATE_TIMEOUT_S
            while not from_ik_node() and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
            ours = from_ik_node()
            self.assertTrue(ours, f'no joint_states from /ik_node within '
                                  f'{FIRST_STATE_TIMEOUT_S:.0f} s ({len(received)} from others)')
            for msg in ours:
                self.assertEqual(list(msg.name), names)
                self.assertEqual(len(msg.position), len(names))
        finally:
            node.destroy_node()
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
@unittest.skipIf(_MISSING, SKIP_REASON)
class TestShutdown(unittest.TestCase):
    """After shutdown: every process exited cleanly."""

    def test_exit_codes(self, proc_info):
        """Exit code 0 for every process (ik_node and robot_state_publisher handle SIGINT)."""
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0])
