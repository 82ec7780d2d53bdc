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

"""``ik_bench node``: the node over DDS loopback (a separate process).

1. Latency, smoothing off: targets 0.05 mm apart along a line (each reachable
   within one tick's joint-speed budget); time from publishing a target to
   the first joint_states message whose FK reaches it (1e-6 m, 1e-5 rad).
2. Sustained rate, smoothing off: bursts of targets at increasing rates; a
   rate is held when the node answers every target and the latency at the
   end of the burst has not grown (no backlog).
3. Jitter, smoothing on, publish_rate 250 Hz: periods between joint_states
   header stamps (the node's clock) and between arrivals (the client's).
"""

import random
import time

from geometry_msgs.msg import PoseStamped
from ik_node.bench.common import machine_info, print_json, print_table
from ik_node.bench.ik import bundled_urdf
from ik_node.core.chain import Chain
from ik_node.core.rotations import matrix_to_quaternion
from ik_node.ros.process import NodeProcess
import numpy as np
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState

Q_START = np.array([0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0])


class Harness(NodeProcess):
    """The node as a subprocess and a client on a private ROS domain."""

    def __init__(self, params):
        """Start the node with ``params``; create the client."""
        urdf = bundled_urdf('iiwa14.urdf')
        self.chain = Chain.from_urdf_file(urdf, 'iiwa_link_0', 'tool0')
        args = ['-p', f'urdf_path:={urdf}', '-p', 'base_link:=iiwa_link_0',
                '-p', 'tip_link:=tool0',
                '-p', 'initial_positions:=[' + ', '.join(f'{v:.6f}' for v in Q_START) + ']',
                '--log-level', 'error']
        for key, value in params.items():
            args += ['-p', f'{key}:={value}']
        super().__init__(args, random.randint(150, 230), 'ik_bench_node')
        self.received = []
        qos = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, 'joint_states', self._on_joints, qos)
        self.pub = self.node.create_publisher(PoseStamped, '/ik_node/target_pose', qos)
        end = time.monotonic() + 30.0
        while (not self.received or self.pub.get_subscription_count() == 0) and \
                time.monotonic() < end:
            if self.proc.poll() is not None:
                raise RuntimeError(f'ik_node exited with code {self.proc.returncode}')
            self.spin(0.05)
        if not self.received:
            raise RuntimeError('ik_node published no joint_states within 30 s')

    def _on_joints(self, msg):
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        self.received.append((time.perf_counter(), stamp, np.array(msg.position)))

    def spin(self, seconds, step_s=0.0005):
        """Process callbacks for ``seconds`` (short waits: latency is measured)."""
        super().spin(seconds, step_s)

    def send(self, pose):
        """Publish a target pose; return the perf_counter time of publication."""
        msg = PoseStamped()
        (msg.pose.position.x, msg.pose.position.y, msg.pose.position.z) = \
            (float(v) for v in pose[:3, 3])
        (msg.pose.orientation.x, msg.pose.orientation.y, msg.pose.orientation.z,
         msg.pose.orientation.w) = (float(v) for v in matrix_to_quaternion(pose[:3, :3]))
        t = time.perf_counter()
        self.pub.publish(msg)
        return t

    def reaches(self, q, pose):
        """Return True when the tip of q is on pose (1e-6 m, 1e-5 rad).

        Stricter than the 1e-4 m of the issue on purpose: consecutive targets
        are 5e-5 m apart, so a state held from the previous target must not
        count as reaching the new one.
        """
        tip = self.chain.forward(q)
        r = tip[:3, :3].T @ pose[:3, :3]
        sin = 0.5 * np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
        return np.linalg.norm(tip[:3, 3] - pose[:3, 3]) <= 1e-6 and \
            np.arctan2(sin, (np.trace(r) - 1) / 2) <= 1e-5


def _path(chain, k, step_m=5e-5):
    pose = chain.forward(Q_START)
    pose[:3, 3] += np.array([0.6, 0.8, 0.0]) * step_m * k
    return pose


def _first_reaching(h, pose, since, timeout_s):
    """Seconds from ``since`` to the first joint state reaching pose, or None."""
    end = time.monotonic() + timeout_s
    checked = 0
    while time.monotonic() < end:
        while checked < len(h.received):
            t, _, q = h.received[checked]
            checked += 1
            if t >= since and h.reaches(q, pose):
                return t - since
        h.spin(0.0005)
    return None


def latency(n):
    """Latency samples (s) over n targets with smoothing off."""
    h = Harness({'smoothing': 'false', 'publish_rate': 100.0})
    samples = []
    try:
        for k in range(1, n + 1):
            pose = _path(h.chain, k)
            since = h.send(pose)
            lat = _first_reaching(h, pose, since, 0.5)
            if lat is not None:
                samples.append(lat)
            h.received.clear()
    finally:
        code = h.close()
    return np.array(samples), code


def sustained(rates, seconds):
    """For each rate: (answered fraction, end-of-burst latency s)."""
    out = []
    for rate in rates:
        h = Harness({'smoothing': 'false', 'publish_rate': 100.0})
        try:
            h.spin(0.5)
            period = 1.0 / rate
            start = time.perf_counter()
            count = int(rate * seconds)
            for k in range(1, count + 1):
                while time.perf_counter() < start + k * period:
                    h.executor.spin_once(timeout_sec=0.0)
                last_pose = _path(h.chain, k)
                last_sent = h.send(last_pose)
            lat = _first_reaching(h, last_pose, last_sent, 5.0)
            answered = len(h.received) / max(count, 1)
        finally:
            h.close()
        out.append({'rate_hz': rate, 'targets': count, 'end_latency_s': lat,
                    'messages_per_target': answered})
    return out


def jitter(seconds):
    """Publish-period statistics (s) at 250 Hz with smoothing on."""
    h = Harness({'smoothing': 'true', 'publish_rate': 250.0})
    try:
        h.received.clear()
        h.spin(seconds)
    finally:
        h.close()
    stamps = np.array([r[1] for r in h.received])
    arrivals = np.array([r[0] for r in h.received])
    return np.diff(stamps), np.diff(arrivals)


def run(args):
    """Run the three measurements and print tables (or one JSON object)."""
    lat, code = latency(args.n)
    sus = sustained(args.rates, args.seconds)
    node_periods, arrival_periods = jitter(args.jitter_seconds)
    nominal = 1.0 / 250.0
    report = {
        'benchmark': 'node', 'machine': machine_info(), 'n': args.n,
        'latency': {'answered': int(lat.size), 'p50_s': float(np.percentile(lat, 50)),
                    'p99_s': float(np.percentile(lat, 99)), 'max_s': float(lat.max()),
                    'node_exit_code': code},
        'sustained': sus,
        'jitter_250hz': {
            'periods': int(node_periods.size),
            'stamp_p50_abs_dev_s': float(np.percentile(np.abs(node_periods - nominal), 50)),
            'stamp_p99_abs_dev_s': float(np.percentile(np.abs(node_periods - nominal), 99)),
            'arrival_p99_abs_dev_s': float(np.percentile(np.abs(arrival_periods - nominal), 99)),
            'mean_rate_hz': float(1.0 / np.mean(node_periods))},
    }
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f"ik_bench node  (iiwa14, analytic; {info['cpu']}, {info['cores']} cores; "
          f"commit {info['commit']})")
    la = report['latency']
    print_table(['measure', 'value'], [
        (f'latency p50 (smoothing off, {la["answered"]}/{args.n} targets)',
         f'{la["p50_s"] * 1e3:.3f} ms'),
        ('latency p99', f'{la["p99_s"] * 1e3:.3f} ms'),
        ('latency max', f'{la["max_s"] * 1e3:.3f} ms')])
    print()
    print_table(['target rate', 'targets', 'joint_states per target', 'latency of the last'],
                [(f"{s['rate_hz']:.0f} Hz", s['targets'], f"{s['messages_per_target']:.2f}",
                  'not reached' if s['end_latency_s'] is None
                  else f"{s['end_latency_s'] * 1e3:.2f} ms") for s in sus])
    print()
    j = report['jitter_250hz']
    print_table(['publish_rate 250 Hz, smoothing on', 'value'], [
        ('periods measured', j['periods']), ('mean rate', f"{j['mean_rate_hz']:.1f} Hz"),
        ('|period - 4 ms| p50 (header stamps)', f"{j['stamp_p50_abs_dev_s'] * 1e3:.3f} ms"),
        ('|period - 4 ms| p99 (header stamps)', f"{j['stamp_p99_abs_dev_s'] * 1e3:.3f} ms"),
        ('|period - 4 ms| p99 (arrival at the client)',
         f"{j['arrival_p99_abs_dev_s'] * 1e3:.3f} ms")])
    return 0


def add_parser(subparsers):
    """Register the ``node`` subcommand."""
    p = subparsers.add_parser('node', help='the node over DDS: latency, sustained rate, jitter')
    p.add_argument('-n', type=int, default=1000, help='targets for the latency (default 1000)')
    p.add_argument('--rates', type=float, nargs='+', default=[250.0, 500.0, 1000.0, 2000.0],
                   help='target rates for the sustained test, Hz')
    p.add_argument('--seconds', type=float, default=2.0, help='seconds per rate')
    p.add_argument('--jitter-seconds', type=float, default=10.0, help='seconds of 250 Hz')
    p.set_defaults(func=run)
