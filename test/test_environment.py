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


"""The environment the README sets up: rclpy, an RMW and the messages work over DDS."""

import os

import pytest

from ros_helpers import unique_domain_id, wait_until


def test_ros_environment_variables_are_set_by_the_test_command():
    # The README's test command sets these; without them message packages
    # are not found or DDS traffic leaves the loopback interface.
    prefix = os.environ.get('AMENT_PREFIX_PATH', '')
    assert any(os.path.isdir(os.path.join(p, 'share', 'sensor_msgs'))
               for p in prefix.split(os.pathsep) if p), prefix
    assert os.environ.get('ROS_AUTOMATIC_DISCOVERY_RANGE') == 'LOCALHOST'
    assert os.environ.get('ROS_HOME', '').startswith(os.path.dirname(os.path.dirname(
        os.path.abspath(__file__))))


@pytest.mark.integration
def test_joint_state_round_trip_over_dds_loopback():
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from sensor_msgs.msg import JointState

    context = Context()
    rclpy.init(context=context, domain_id=unique_domain_id())
    try:
        node = rclpy.create_node('environment_probe', context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        received = []
        node.create_subscription(JointState, 'probe', received.append, 10)
        publisher = node.create_publisher(JointState, 'probe', 10)
        message = JointState(name=['a', 'b'], position=[0.25, -1.5])

        def publish_and_spin(period_s):
            publisher.publish(message)
            executor.spin_once(timeout_sec=period_s)

        assert wait_until(lambda: bool(received), 10.0, publish_and_spin, 0.05), \
            'no JointState came back over DDS loopback within 10 s'
        assert list(received[0].name) == ['a', 'b']
        assert list(received[0].position) == [0.25, -1.5]
        executor.shutdown(timeout_sec=1.0)
        node.destroy_node()
    finally:
        rclpy.shutdown(context=context)
