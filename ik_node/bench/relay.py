# SPDX-License-Identifier: Apache-2.0

"""The floor of ``ik_bench node``: the least an rclpy node can do.

``python -m ik_node.bench.relay [--rate HZ]`` answers each PoseStamped on
``/ik_bench/relay/target_pose`` with a JointState on
``/ik_bench/relay/joint_states`` (no IK), and with ``--rate`` also publishes
a JointState from a timer. Same client library, executor and middleware as
ik_node, so its latency and jitter, measured in the same run, are what the
machine and rclpy cost before ik_node does any work.
"""

import argparse
import gc
import sys

from geometry_msgs.msg import PoseStamped
from ik_node.ros.spin import serve, StopRequest
import rclpy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState

TOPIC_IN = '/ik_bench/relay/target_pose'
TOPIC_OUT = '/ik_bench/relay/joint_states'


def main(argv=None):
    """Run the relay until SIGINT / SIGTERM."""
    parser = argparse.ArgumentParser(prog='ik_node.bench.relay')
    parser.add_argument('--rate', type=float, default=0.0, help='timer rate, Hz (0: none)')
    args = parser.parse_args(argv)
    stop = StopRequest()
    stop.install()
    rclpy.init(signal_handler_options=SignalHandlerOptions.NO)
    node = rclpy.create_node('ik_bench_relay')
    pub = node.create_publisher(JointState, TOPIC_OUT, 10)

    def answer(msg: PoseStamped):
        out = JointState()
        out.header.stamp = node.get_clock().now().to_msg()
        out.position = [msg.pose.position.x, msg.pose.position.y, msg.pose.position.z]
        pub.publish(out)

    def tick():
        out = JointState()
        out.header.stamp = node.get_clock().now().to_msg()
        pub.publish(out)

    node.create_subscription(PoseStamped, TOPIC_IN, answer, 10)
    if args.rate > 0.0:
        node.create_timer(1.0 / args.rate, tick)
    gc.freeze()  # as ik_node does: no full collection of start-up objects
    try:
        serve(node, stop)
    finally:
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
