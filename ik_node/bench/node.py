# SPDX-License-Identifier: Apache-2.0

"""``ik_bench node``: the node over DDS loopback (a separate process).

1. Latency, smoothing off: targets 0.05 mm apart along a line, each sent
   with the arm at rest on the previous one; the reaction is the time from
   publishing a target to the first joint_states message that moves toward
   it (the node publishes one on arrival), the arrival the time to the first
   one whose FK reaches it (1e-6 m, 1e-5 rad): the motion itself, limited by
   the joint speed and acceleration limits (a velocity cannot jump).
2. Sustained rate, smoothing off: bursts of targets at increasing rates; a
   rate is held when the node answers every target and the latency at the
   end of the burst has not grown (no backlog).
3. Jitter, smoothing on, publish_rate 250 Hz, while tracking a 50 Hz stream
   of targets on a 5 cm circle: periods between joint_states header stamps
   (the node's clock) and between arrivals (the client's).

The floor: latency and jitter are mostly what rclpy and the machine cost, and
both drift by up to 2x on a shared VM. So the same run measures the relay
(``ik_node.bench.relay``: an rclpy node answering each target with a
JointState, no IK), its targets interleaved one for one with the node's,
and its 250 Hz timer back to back with the node's. The node's own cost is
the difference.
"""

import os
import signal
import subprocess
import sys
import time

from geometry_msgs.msg import PoseStamped
from ik_node.bench import relay
from ik_node.bench.common import machine_info, print_json, print_table
from ik_node.bench.session import BASE, iiwa_arguments, Q_START, TIP
from ik_node.core.model.chain import Chain
from ik_node.core.warm import die_with_parent
from ik_node.description.urdf import bundled_urdf
from ik_node.ros.conversions import matrix_to_pose
from ik_node.ros.process import free_domain, NodeProcess
import numpy as np
from rclpy.qos import HistoryPolicy, QoSProfile, ReliabilityPolicy
from sensor_msgs.msg import JointState


class Relay:
    """The floor process (``ik_node.bench.relay``) and the client side of it."""

    def __init__(self, client, domain, rate_hz=0.0):
        """Start the relay on ``domain``; subscribe with ``client`` (an rclpy node)."""
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'ik_node.bench.relay', '--rate', str(rate_hz)],
            env=dict(os.environ, ROS_DOMAIN_ID=str(domain)), preexec_fn=die_with_parent())
        self.received, self.kinds = [], []
        qos = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE)
        client.create_subscription(JointState, relay.TOPIC_OUT, self._on_reply, qos)
        self.pub = client.create_publisher(PoseStamped, relay.TOPIC_IN, qos)

    def _on_reply(self, msg):
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        self.received.append((time.perf_counter(), stamp))
        self.kinds.append('answer' if msg.position else 'timer')

    def send(self):
        """Publish a target; return the perf_counter time of publication."""
        msg = PoseStamped()
        msg.pose.orientation.w = 1.0
        t = time.perf_counter()
        self.pub.publish(msg)
        return t

    def close(self):
        """Stop the relay with SIGINT (killed after 10 s)."""
        self.proc.send_signal(signal.SIGINT)
        try:
            self.proc.wait(timeout=10.0)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            self.proc.wait()


class Harness(NodeProcess):
    """The node as a subprocess and a client on a private ROS domain."""

    def __init__(self, params, relay_rate_hz=None):
        """Start the node with ``params`` (and the relay, unless None); create the client."""
        self.chain = Chain.from_urdf_file(bundled_urdf('iiwa14.urdf'), BASE, TIP)
        domain = free_domain()
        super().__init__(iiwa_arguments(params), domain, 'ik_bench_node')
        self.relay = None if relay_rate_hz is None else Relay(self.node, domain, relay_rate_hz)
        self.received = []
        qos = QoSProfile(depth=1000, history=HistoryPolicy.KEEP_LAST,
                         reliability=ReliabilityPolicy.RELIABLE)
        self.node.create_subscription(JointState, 'joint_states', self._on_joints, qos)
        self.pub = self.node.create_publisher(PoseStamped, '/ik_node/target_pose', qos)
        try:
            self._wait_ready(30.0)
        except BaseException:
            self.close()  # never leave the node process behind
            raise

    def _wait_ready(self, timeout_s):
        self.wait_for(lambda: self.received and self.pub.get_subscription_count() > 0,
                      timeout_s, 'joint_states and the target subscription', step_s=0.05)
        if self.relay is not None:
            relay = self.relay
            self.wait_for(lambda: relay.pub.get_subscription_count() > 0
                          or relay.proc.poll() is not None, timeout_s, 'the relay', step_s=0.05)
            if relay.proc.poll() is not None:
                raise RuntimeError(f'the relay exited with code {relay.proc.returncode}')

    def close(self, timeout_s: float = 10.0) -> int:
        """Stop the relay, then the node; return the node's exit code."""
        if self.relay is not None:
            self.relay.close()
        return super().close(timeout_s)

    def _on_joints(self, msg):
        stamp = msg.header.stamp.sec + 1e-9 * msg.header.stamp.nanosec
        self.received.append((time.perf_counter(), stamp, np.array(msg.position)))

    def spin(self, seconds, step_s=0.0005):
        """Process callbacks for ``seconds`` (short waits: latency is measured)."""
        super().spin(seconds, step_s)

    def send(self, pose):
        """Publish a target pose; return the perf_counter time of publication."""
        msg = PoseStamped(pose=matrix_to_pose(pose))
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


def line_target(chain, k, step_m=5e-5):
    """Return the k-th target (4, 4) of a line from the start pose, step_m (m) apart."""
    pose = chain.forward(Q_START)
    pose[:3, 3] += np.array([0.6, 0.8, 0.0]) * step_m * k
    return pose


def first_state(h, test, since, timeout_s):
    """Seconds from ``since`` to the first joint state received after it passing test(q)."""
    end = time.monotonic() + timeout_s
    checked = 0
    while time.monotonic() < end:
        while checked < len(h.received):
            t, _, q = h.received[checked]
            checked += 1
            if t >= since and test(q):
                return t - since
        h.spin(0.0005)
    return None


def _first_reaching(h, pose, since, timeout_s):
    """Seconds from ``since`` to the first joint state reaching pose, or None."""
    return first_state(h, lambda q: h.reaches(q, pose), since, timeout_s)


def at_rest(h, timeout_s):
    """Wait until two consecutive joint states are equal; return that position (or None)."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if len(h.received) >= 2 and np.array_equal(h.received[-1][2], h.received[-2][2]):
            return h.received[-1][2]
        h.spin(0.0005)
    return None


def _relay_reply(h, since, timeout_s):
    """Seconds from ``since`` to the relay's answer, or None."""
    end = time.monotonic() + timeout_s
    while time.monotonic() < end:
        if h.relay.received:
            return h.relay.received[0][0] - since
        h.spin(0.0005)
    return None


def latency(n):
    """Reaction and arrival samples (s) over n targets with smoothing off; the relay's answers."""
    h = Harness({'smoothing': 'false', 'publish_rate': 100.0}, relay_rate_hz=0.0)
    reaction, arrival, floor = [], [], []
    try:
        h.spin(1.0)
        for k in range(1, n + 1):
            pose = line_target(h.chain, k)
            rest = at_rest(h, 2.0)
            if rest is None:
                continue
            h.received.clear()
            sent = h.send(pose)
            lat = first_state(h, lambda q: bool(np.any(q != rest)), sent, 0.5)
            if lat is not None:
                reaction.append(lat)
            lat = _first_reaching(h, pose, sent, 2.0)
            if lat is not None:
                arrival.append(lat)
            h.relay.received.clear()
            h.relay.kinds.clear()
            lat = _relay_reply(h, h.relay.send(), 0.5)
            if lat is not None:
                floor.append(lat)
    finally:
        code = h.close()
    return np.array(reaction), np.array(arrival), np.array(floor), code


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
                last_pose = line_target(h.chain, k)
                last_sent = h.send(last_pose)
            lat = _first_reaching(h, last_pose, last_sent, 5.0)
            answered = len(h.received) / max(count, 1)
        finally:
            h.close()
        out.append({'rate_hz': rate, 'targets': count, 'end_latency_s': lat,
                    'messages_per_target': answered})
    return out


def _circle_stream(h, seconds, send_relay=False):
    """Send targets on a 5 cm circle at 50 Hz (one turn in 4 s) for ``seconds``."""
    start_pose = h.chain.forward(Q_START)
    t0 = time.perf_counter()
    k = 0
    while time.perf_counter() - t0 < seconds:
        k += 1
        while time.perf_counter() < t0 + k * 0.02:
            h.executor.spin_once(timeout_sec=0.002)
        angle = 2.0 * np.pi * k * 0.02 / 4.0
        pose = start_pose.copy()
        pose[:3, 3] += 0.05 * np.array([np.cos(angle) - 1.0, np.sin(angle), 0.0])
        if send_relay:
            h.relay.send()
        else:
            h.send(pose)


def jitter(seconds):
    """Periods (s) at 250 Hz: node stamps, node arrivals, relay stamps, relay arrivals.

    The node (smoothing on) tracks a 50 Hz stream of targets on a circle;
    then the relay's 250 Hz timer runs, answering the same stream, for as long.
    """
    h = Harness({'smoothing': 'true', 'publish_rate': 250.0})
    try:
        h.spin(1.0)
        h.received.clear()
        _circle_stream(h, seconds)
    finally:
        h.close()
    h2 = Harness({'publish_rate': 1.0}, relay_rate_hz=250.0)
    try:
        h2.spin(1.0)
        h2.relay.received.clear()
        h2.relay.kinds.clear()
        _circle_stream(h2, seconds, send_relay=True)
    finally:
        h2.close()
    node = np.array([r[:2] for r in h.received])
    # The relay's timer messages carry no position; its answers to targets do.
    floor = np.array([r for r, m in zip(h2.relay.received, h2.relay.kinds) if m == 'timer'])
    return (np.diff(node[:, 1]), np.diff(node[:, 0]), np.diff(floor[:, 1]),
            np.diff(floor[:, 0]))


def _period_stats(periods, nominal):
    dev = np.abs(periods - nominal)
    return {'periods': int(periods.size), 'mean_rate_hz': float(1.0 / np.mean(periods)),
            'p50_abs_dev_s': float(np.percentile(dev, 50)),
            'p99_abs_dev_s': float(np.percentile(dev, 99))}


def _latency_stats(samples, n):
    return {'answered': int(samples.size), 'of': n,
            'p50_s': float(np.percentile(samples, 50)),
            'p99_s': float(np.percentile(samples, 99)), 'max_s': float(samples.max())}


def run(args):
    """Run the three measurements and print tables (or one JSON object)."""
    lat, arrival, lat_floor, code = latency(args.n)
    sus = sustained(args.rates, args.seconds)
    stamps, arrivals, floor_stamps, floor_arrivals = jitter(args.jitter_seconds)
    nominal = 1.0 / 250.0
    report = {
        'benchmark': 'node', 'machine': machine_info(), 'n': args.n,
        'latency': dict(_latency_stats(lat, args.n), node_exit_code=code),
        'arrival': _latency_stats(arrival, args.n),
        'latency_floor': _latency_stats(lat_floor, args.n),
        'sustained': sus,
        'jitter_250hz': {'stamps': _period_stats(stamps, nominal),
                         'arrivals': _period_stats(arrivals, nominal)},
        'jitter_250hz_floor': {'stamps': _period_stats(floor_stamps, nominal),
                               'arrivals': _period_stats(floor_arrivals, nominal)},
    }
    if args.json:
        print_json(report)
        return 0
    _print_report(report, args)
    return 0


def _print_report(report, args):
    info = report['machine']
    print(f"ik_bench node  (iiwa14, analytic; {info['cpu']}, {info['cores']} cores; "
          f"commit {info['commit']})")
    la, fl = report['latency'], report['latency_floor']

    def ms(value):
        return f'{value * 1e3:.3f} ms'
    ar = report['arrival']
    print_table(['latency, smoothing off', f'ik_node reaction ({la["answered"]}/{args.n})',
                 f'relay floor ({fl["answered"]}/{args.n})', 'difference',
                 f'ik_node arrival ({ar["answered"]}/{args.n})'],
                [('p50', ms(la['p50_s']), ms(fl['p50_s']), ms(la['p50_s'] - fl['p50_s']),
                  ms(ar['p50_s'])),
                 ('p99', ms(la['p99_s']), ms(fl['p99_s']), ms(la['p99_s'] - fl['p99_s']),
                  ms(ar['p99_s'])),
                 ('max', ms(la['max_s']), ms(fl['max_s']), '', ms(ar['max_s']))])
    print()
    print_table(['target rate', 'targets', 'joint_states per target', 'latency of the last'],
                [(f"{s['rate_hz']:.0f} Hz", s['targets'], f"{s['messages_per_target']:.2f}",
                  'not reached' if s['end_latency_s'] is None
                  else f"{s['end_latency_s'] * 1e3:.2f} ms") for s in report['sustained']])
    print()
    j, f = report['jitter_250hz'], report['jitter_250hz_floor']
    print_table(['250 Hz, |period - 4 ms|', 'ik_node (smoothing on)', 'relay floor'], [
        ('periods measured', j['stamps']['periods'], f['stamps']['periods']),
        ('mean rate', f"{j['stamps']['mean_rate_hz']:.1f} Hz",
         f"{f['stamps']['mean_rate_hz']:.1f} Hz"),
        ('p50, header stamps', ms(j['stamps']['p50_abs_dev_s']),
         ms(f['stamps']['p50_abs_dev_s'])),
        ('p99, header stamps', ms(j['stamps']['p99_abs_dev_s']),
         ms(f['stamps']['p99_abs_dev_s'])),
        ('p99, arrival at the client', ms(j['arrivals']['p99_abs_dev_s']),
         ms(f['arrivals']['p99_abs_dev_s']))])


def add_parser(subparsers):
    """Register the ``node`` subcommand."""
    p = subparsers.add_parser('node', help='the node over DDS: latency, sustained rate, jitter')
    p.add_argument('-n', type=int, default=1000, help='targets for the latency (default 1000)')
    p.add_argument('--rates', type=float, nargs='+', default=[250.0, 500.0, 1000.0, 2000.0],
                   help='target rates for the sustained test, Hz')
    p.add_argument('--seconds', type=float, default=2.0, help='seconds per rate')
    p.add_argument('--jitter-seconds', type=float, default=10.0, help='seconds of 250 Hz')
    p.set_defaults(func=run)
