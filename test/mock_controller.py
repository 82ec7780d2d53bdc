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

"""A stand-in for ros2_control (a controller on mock hardware) in its own process, for tests.

It takes commands the way joint_trajectory_controller (trajectory_msgs/
JointTrajectory, one point: its positions) or forward_position_controller
(std_msgs/Float64MultiArray, in a given joint order) does, and publishes
sensor_msgs/JointState on /joint_states at a fixed rate, as
joint_state_broadcaster does. Like mock hardware the state follows the
command; ``--lag`` adds a first-order lag (time constant, s) as a real
servo has. For tests of the loop: ``~/push`` (Float64MultiArray, one value
per joint) displaces the state once, as a hand pushing the arm;
``~/pause`` (std_msgs/Bool) stops and resumes the joint states (a broadcaster
that died). Joint names, initial positions and order come from the command
line; it knows no URDF.

usage: mock_controller.py --joints a b c --initial 0 0 0 --mode trajectory|position
       [--command-topic T] [--rate HZ] [--lag S] [--extra-joint NAME]
"""

import argparse
import math

import rclpy
from rclpy.executors import ExternalShutdownException
from sensor_msgs.msg import JointState
from std_msgs.msg import Bool, Float64MultiArray
from trajectory_msgs.msg import JointTrajectory

DEFAULT_TOPICS = {'trajectory': '/joint_trajectory_controller/joint_trajectory',
                  'position': '/forward_position_controller/commands'}


class MockController:
    """The controller, the hardware and the broadcaster in one rclpy node."""

    def __init__(self, node, args):
        """Create the interfaces on ``node`` from the command-line arguments."""
        self.node = node
        self.joints = list(args.joints)
        self.state = [float(v) for v in args.initial]
        self.command = list(self.state)
        self.velocity = [0.0] * len(self.joints)
        self.lag = args.lag
        self.extra = args.extra_joint
        self.paused = False
        self.period = 1.0 / args.rate
        topic = args.command_topic or DEFAULT_TOPICS[args.mode]
        if args.mode == 'trajectory':
            node.create_subscription(JointTrajectory, topic, self.on_trajectory, 10)
        else:
            node.create_subscription(Float64MultiArray, topic, self.on_array, 10)
        node.create_subscription(Float64MultiArray, '~/push', self.on_push, 10)
        node.create_subscription(Bool, '~/pause', self.on_pause, 10)
        self.pub = node.create_publisher(JointState, '/joint_states', 10)
        node.create_timer(self.period, self.tick)

    def on_trajectory(self, msg):
        """Take the positions of a trajectory's first point, by joint name."""
        if not msg.points:
            return
        where = {name: k for k, name in enumerate(msg.joint_names)}
        positions = msg.points[0].positions
        self.command = [positions[where[name]] if name in where else old
                        for name, old in zip(self.joints, self.command)]

    def on_array(self, msg):
        """Take positions in this controller's joint order."""
        if len(msg.data) == len(self.joints):
            self.command = list(msg.data)

    def on_push(self, msg):
        """Displace the state once (the arm was pushed)."""
        if len(msg.data) == len(self.joints):
            self.state = [s + d for s, d in zip(self.state, msg.data)]

    def on_pause(self, msg):
        """Stop (True) or resume (False) publishing joint states."""
        self.paused = bool(msg.data)

    def tick(self):
        """Move the state toward the command (first-order lag) and broadcast it."""
        keep = math.exp(-self.period / self.lag) if self.lag > 0.0 else 0.0
        new = [keep * s + (1.0 - keep) * c for s, c in zip(self.state, self.command)]
        self.velocity = [(n - s) / self.period for n, s in zip(new, self.state)]
        self.state = new
        if self.paused:
            return
        msg = JointState()
        msg.header.stamp = self.node.get_clock().now().to_msg()
        # Reversed (and with a joint that is not the arm's, when asked): feedback
        # is matched by name, in any order.
        names, positions, velocities = self.joints[::-1], self.state[::-1], self.velocity[::-1]
        if self.extra:
            names, positions, velocities = names + [self.extra], positions + [0.0], \
                velocities + [0.0]
        msg.name, msg.position, msg.velocity = names, positions, velocities
        self.pub.publish(msg)


def main():
    """Run the mock controller until SIGINT."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument('--joints', nargs='+', required=True)
    parser.add_argument('--initial', nargs='+', type=float, required=True)
    parser.add_argument('--mode', choices=sorted(DEFAULT_TOPICS), required=True)
    parser.add_argument('--command-topic', default='')
    parser.add_argument('--rate', type=float, default=100.0)
    parser.add_argument('--lag', type=float, default=0.0, help='time constant, s')
    parser.add_argument('--extra-joint', default='', help='also broadcast this joint')
    args = parser.parse_args()
    rclpy.init()
    node = rclpy.create_node('mock_controller')
    MockController(node, args)
    try:
        rclpy.spin(node)
    except (KeyboardInterrupt, ExternalShutdownException):
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
