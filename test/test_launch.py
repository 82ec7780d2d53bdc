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

"""launch_testing test of launch/ik_node.launch.py (rviz:=false).

Runs where launch_testing is installed (a ROS 2 distro, after colcon build);
skips, saying so, where it is not (launch_testing has no PyPI wheel).
"""

from pathlib import Path
import time
import unittest

import pytest

launch_testing = pytest.importorskip(
    'launch_testing', reason='launch_testing is not installed (no PyPI wheel); run this test '
    'on a ROS 2 install after colcon build')
import launch  # noqa: E402,I100
from launch.launch_description_sources import PythonLaunchDescriptionSource  # noqa: E402
import launch_testing.actions  # noqa: E402
import launch_testing.asserts  # noqa: E402
import rclpy  # noqa: E402
from sensor_msgs.msg import JointState  # noqa: E402

LAUNCH_FILE = Path(__file__).resolve().parents[1] / 'launch' / 'ik_node.launch.py'


@pytest.mark.launch_test
def generate_test_description():
    """Start the shipped launch file without RViz."""
    return launch.LaunchDescription([
        launch.actions.IncludeLaunchDescription(
            PythonLaunchDescriptionSource(str(LAUNCH_FILE)),
            launch_arguments={'rviz': 'false', 'robot': 'iiwa14'}.items()),
        launch_testing.actions.ReadyToTest(),
    ])


class TestJointStates(unittest.TestCase):
    """While running: ik_node publishes joint_states for the 7 joints."""

    def test_joint_states_are_published(self):
        """Subscribe and wait (bounded) for one joint_states message."""
        rclpy.init()
        node = rclpy.create_node('launch_test_client')
        received = []
        node.create_subscription(JointState, 'joint_states', received.append, 10)
        try:
            end = time.monotonic() + 30.0
            while not received and time.monotonic() < end:
                rclpy.spin_once(node, timeout_sec=0.1)
            self.assertTrue(received, 'no joint_states within 30 s')
            self.assertEqual(len(received[0].name), 7)
        finally:
            node.destroy_node()
            rclpy.shutdown()


@launch_testing.post_shutdown_test()
class TestShutdown(unittest.TestCase):
    """After shutdown: every process exited cleanly."""

    def test_exit_codes(self, proc_info):
        """Exit codes 0, or SIGINT / SIGTERM from launch's own shutdown."""
        launch_testing.asserts.assertExitCodes(proc_info, allowable_exit_codes=[0, -2, -15])
