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

"""Publish one unbroken twist stream as fast as Python can (a teleop device gone wild).

Usage: twist_flooder.py SECONDS FRAME VZ. Waits (bounded) for the node's
subscription, publishes TwistStamped(linear.z = VZ) back to back for SECONDS,
then prints the count sent and the achieved rate, Hz, as one JSON line.
"""

import json
import sys
import time

from geometry_msgs.msg import TwistStamped
import rclpy


def main():
    """Flood ~/target_twist of /ik_node; print {"sent": N, "rate_hz": R}."""
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
        while time.monotonic() - start < seconds:
            pub.publish(msg)
            sent += 1
        elapsed = time.monotonic() - start
        print(json.dumps({'sent': sent, 'rate_hz': sent / elapsed}), flush=True)
    except KeyboardInterrupt:
        pass
    finally:
        node.destroy_node()
        rclpy.try_shutdown()


if __name__ == '__main__':
    main()
