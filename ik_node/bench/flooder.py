# SPDX-License-Identifier: Apache-2.0

"""The flood of ``ik_bench flood``: targets as fast as asked, from its own process.

``python -m ik_node.bench.flooder --rate 10000 --seconds 10 --center X Y Z
--quaternion X Y Z W`` publishes PoseStamped targets on
``/ik_node/target_pose`` (reliable, keep last 10, as a typical script would),
moving around a 5 cm circle about ``center`` (one turn per second) with a fixed
orientation; with ``--twist``, TwistStamped on ``/ik_node/target_twist``
instead: the circle's velocity (0.31 m/s, base frame). Paced against the
clock: every 0.2 ms it publishes the messages that are due, so the average
rate is the one asked for. At the end it
prints one JSON line: how many it sent, in how long (wall-clock start and
end, s), and the last target.
"""

import argparse
import json
import math
import sys
import time
from typing import Optional

from geometry_msgs.msg import PoseStamped, TwistStamped
import rclpy
from rclpy.duration import Duration
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy

TOPIC = '/ik_node/target_pose'
TWIST_TOPIC = '/ik_node/target_twist'
RADIUS_M = 0.05


def circle_point(center, t: float):
    """Point (x, y, z), metres, of the flood's circle at ``t`` seconds (1 turn/s, x-y plane)."""
    angle = 2.0 * math.pi * t
    return (center[0] + RADIUS_M * (math.cos(angle) - 1.0),
            center[1] + RADIUS_M * math.sin(angle), center[2])


def circle_velocity(t: float):
    """Velocity (vx, vy, vz), m/s, along the flood's circle at ``t`` seconds."""
    angle = 2.0 * math.pi * t
    speed = 2.0 * math.pi * RADIUS_M
    return (-speed * math.sin(angle), speed * math.cos(angle), 0.0)


def _message(args, t: Optional[float]):
    """Return the flood's message at ``t`` s: a target pose, or with --twist a twist.

    Twists: ``t`` None is a zero twist (the one before the flood and the one
    after it: the node stops without its dead-man, so a dead-man stop counted
    is one during the unbroken flood).
    """
    if args.twist:
        msg = TwistStamped()
        if t is not None:
            msg.twist.linear.x, msg.twist.linear.y, msg.twist.linear.z = circle_velocity(t)
        return msg
    msg = PoseStamped()
    msg.pose.position.x, msg.pose.position.y, msg.pose.position.z = circle_point(args.center, t)
    (msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
     msg.pose.orientation.w) = args.quaternion
    return msg


def main(argv=None):
    """Wait for the node's subscription (10 s at most), flood, print the summary."""
    parser = argparse.ArgumentParser(prog='ik_node.bench.flooder')
    parser.add_argument('--rate', type=float, default=10000.0, help='targets per second')
    parser.add_argument('--seconds', type=float, default=10.0)
    parser.add_argument('--center', type=float, nargs=3, required=True, help='metres')
    parser.add_argument('--quaternion', type=float, nargs=4, required=True, help='x y z w')
    parser.add_argument('--twist', action='store_true', help='flood twists instead')
    args = parser.parse_args(argv)
    rclpy.init()
    node = rclpy.create_node('ik_bench_flooder')
    pub = node.create_publisher(
        TwistStamped if args.twist else PoseStamped, TWIST_TOPIC if args.twist else TOPIC,
        QoSProfile(depth=10, history=HistoryPolicy.KEEP_LAST,
                   reliability=ReliabilityPolicy.RELIABLE))
    end = time.monotonic() + 10.0
    while pub.get_subscription_count() == 0 and time.monotonic() < end:
        time.sleep(0.01)
    msg = _message(args, None if args.twist else 0.0)
    # One target first, acknowledged, and a pause: the node has read it
    # before the flood, so every target after it that the node does not read
    # shows as a gap in the sequence numbers (counted, not guessed).
    pub.publish(msg)
    pub.wait_for_all_acked(Duration(seconds=5.0))
    time.sleep(0.5)
    total = int(args.rate * args.seconds)
    sent = largest_burst = 0
    longest_pause = pause_at = longest_publish = 0.0
    before = time.perf_counter()
    started_at = time.time()
    start = time.perf_counter()
    while sent < total:
        due = min(total, int((time.perf_counter() - start) * args.rate) + 1)
        largest_burst = max(largest_burst, due - sent)
        while sent < due:
            msg = _message(args, sent / args.rate)
            msg.header.stamp = node.get_clock().now().to_msg()
            t_pub = time.perf_counter()
            pub.publish(msg)
            longest_publish = max(longest_publish, time.perf_counter() - t_pub)
            sent += 1
        time.sleep(0.0002)
        now = time.perf_counter()
        if now - before > longest_pause:
            longest_pause, pause_at = now - before, before - start
        before = now
    elapsed = time.perf_counter() - start
    ended_at = time.time()
    if args.twist:
        pub.publish(_message(args, None))
        sent += 1
    # Let the reliable writer deliver what it still holds before the process goes.
    pub.wait_for_all_acked(Duration(seconds=5.0))
    # sent + 1: the first target, before the flood.
    print(json.dumps({'sent': sent + 1, 'seconds': elapsed, 'rate_hz': sent / elapsed,
                      'largest_burst': largest_burst, 'longest_pause_s': longest_pause,
                      'longest_pause_at_s': pause_at, 'longest_publish_s': longest_publish,
                      'started_at': started_at, 'ended_at': ended_at,
                      'last_position': None if args.twist else [
                          msg.pose.position.x, msg.pose.position.y, msg.pose.position.z]}),
          flush=True)
    node.destroy_node()
    rclpy.shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
