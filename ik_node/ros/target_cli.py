# SPDX-License-Identifier: Apache-2.0

"""``ik_target``: publish one target pose from the shell (no ROS 2 CLI needed).

Example: ``ik_target 0.5 0.0 0.6 --rpy 3.14159 0 0`` publishes a PoseStamped
on /ik_node/target_pose (frame: the base link by default, i.e. empty) until a
subscriber has it, at most ``--wait`` seconds.
"""

import argparse
import sys
import time

from geometry_msgs.msg import PoseStamped
from ik_node.core.rotations import matrix_to_quaternion, ypr_to_matrix
from ik_node.ros.conversions import pose_msg
import rclpy
from rclpy.duration import Duration
from rclpy.qos import QoSProfile, ReliabilityPolicy


def main(argv=None):
    """Publish the target; exit 0 once delivered to a subscriber, 1 if none appeared."""
    parser = argparse.ArgumentParser(prog='ik_target', description=__doc__.splitlines()[0])
    parser.add_argument('x', type=float, help='metres, base frame')
    parser.add_argument('y', type=float)
    parser.add_argument('z', type=float)
    parser.add_argument('--rpy', type=float, nargs=3, default=(0.0, 0.0, 0.0),
                        metavar=('ROLL', 'PITCH', 'YAW'), help='orientation, radians (URDF rpy)')
    parser.add_argument('--topic', default='/ik_node/target_pose')
    parser.add_argument('--frame', default='', help="frame_id ('' = the base link)")
    parser.add_argument('--best-effort', action='store_true', help='best-effort QoS')
    parser.add_argument('--wait', type=float, default=5.0, help='seconds to wait for a reader')
    args, ros_args = parser.parse_known_args(argv)
    roll, pitch, yaw = args.rpy
    q = matrix_to_quaternion(ypr_to_matrix(yaw, pitch, roll))
    msg = PoseStamped()
    msg.header.frame_id = args.frame
    msg.pose = pose_msg((args.x, args.y, args.z), q)
    rclpy.init(args=ros_args)
    node = rclpy.create_node('ik_target')
    qos = QoSProfile(depth=1, reliability=(ReliabilityPolicy.BEST_EFFORT if args.best_effort
                                           else ReliabilityPolicy.RELIABLE))
    pub = node.create_publisher(PoseStamped, args.topic, qos)
    end = time.monotonic() + args.wait
    while pub.get_subscription_count() == 0 and time.monotonic() < end:
        rclpy.spin_once(node, timeout_sec=0.05)
    delivered = False
    if pub.get_subscription_count() > 0:
        msg.header.stamp = node.get_clock().now().to_msg()
        pub.publish(msg)
        # A matched count > 0 does not mean the reader has matched us yet: wait for its
        # acknowledgement (reliable) so the sample is not lost when this process exits.
        left = max(end - time.monotonic(), 1.0)
        delivered = pub.wait_for_all_acked(Duration(nanoseconds=int(left * 1e9)))
        rclpy.spin_once(node, timeout_sec=0.05)
    if delivered:
        print(f'target ({args.x}, {args.y}, {args.z}) rpy {tuple(args.rpy)} sent on {args.topic}')
    elif pub.get_subscription_count() > 0:
        print(f'ik_target: the subscriber on {args.topic} did not acknowledge the target '
              f'within {args.wait} s', file=sys.stderr)
    else:
        print(f'ik_target: nobody subscribes to {args.topic} (is ik_node running, same '
              'ROS_DOMAIN_ID?)', file=sys.stderr)
    node.destroy_node()
    rclpy.shutdown()
    return 0 if delivered else 1


if __name__ == '__main__':
    sys.exit(main())
