# SPDX-License-Identifier: Apache-2.0

"""Publish one unbroken twist stream as fast as Python can (a teleop device gone wild).

Usage: twist_flooder.py SECONDS FRAME VZ. Waits (bounded) for the node's
subscription, publishes TwistStamped(linear.z = VZ) back to back for SECONDS,
then prints the count sent, the achieved rate (Hz), the longest pause between
two publishes (s) and how many pauses reached LONG_GAP_S, as one JSON line.
"""

import json
import sys
import time

from geometry_msgs.msg import TwistStamped
import rclpy

# Half the node's default twist_timeout (0.2 s): a pause this long between two
# publishes, plus delivery, can expire the newest twist.
LONG_GAP_S = 0.1


def main():
    """Flood ~/target_twist of /ik_node; print {"sent": N, "rate_hz": R, ...}."""
    seconds, frame, vz = float(sys.argv[1]), sys.argv[2], float(sys.argv[3])
    rclpy.init()
    node = rclpy.create_node('twist_flooder')
    pub = node.create_publisher(TwistStamped, '/ik_node/target_twist', 10)
    try:
        deadline = time.monotonic() + 20.0
        while pub.get_subscription_count() == 0 and time.monotonic() < deadline:
            time.sleep(0.05)
        msg = TwistStamped()
        msg.header.frame_id = frame
        msg.twist.linear.z = vz
        sent, start = 0, time.monotonic()
        last, longest, long_gaps = start, 0.0, 0
        while True:
            now = time.monotonic()
            if now - start >= seconds:
                break
            # The flood is broken where this process was not running (a busy
            # machine): the test allows a dead-man stop per such gap.
            gap, last = now - last, now
            longest = max(longest, gap)
            long_gaps += gap >= LONG_GAP_S
            pub.publish(msg)
            sent += 1
        elapsed = time.monotonic() - start
        print(json.dumps({'sent': sent, 'rate_hz': sent / elapsed, 'longest_gap_s': longest,
                          'long_gaps': long_gaps}), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
