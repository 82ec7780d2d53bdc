# SPDX-License-Identifier: Apache-2.0

"""``ik_bench handles``: the RViz handle over DDS, from a drag to the arm.

1. Latency: the node (a separate process, iiwa14, smoothing off, 100 Hz) at
   rest; a POSE_UPDATE on ``/ik_node/target_marker/feedback`` as RViz sends
   one (frame-locked: the base frame) 0.05 mm along a line; the reaction is
   the time to the first joint_states message that moves. The same number
   of targets on ``~/target_pose`` are interleaved one for one: the drag's
   cost over a plain target is the difference.
2. A mouse at ``--flood-hz`` (default 1 kHz) for ``--flood-seconds``: the
   targets the node took per second (one per tick at most; the rest are
   coalesced), and the node process's CPU (user + system, /proc) during the
   flood against the same time at rest.
"""

import os
import time

from ik_node.bench.common import machine_info, print_json, print_table
from ik_node.bench.node import at_rest, first_state, Harness, line_target
from ik_node.bench.session import BASE, cpu_seconds
from ik_node.ros.conversions import matrix_to_pose
import numpy as np
from rclpy.qos import QoSProfile
from visualization_msgs.msg import InteractiveMarkerFeedback as Feedback

NAMESPACE = '/ik_node/target_marker'


class HandleHarness(Harness):
    """The node and a client that drags its handle as RViz does."""

    def __init__(self, params):
        """Start the node; add a feedback publisher (RViz's QoS: keep last 100, reliable)."""
        super().__init__(params)
        self.feedback = self.node.create_publisher(Feedback, f'{NAMESPACE}/feedback',
                                                   QoSProfile(depth=100))
        self.wait_for(lambda: self.feedback.get_subscription_count() > 0, 10.0,
                      'the feedback subscription', step_s=0.05)

    def drag(self, pose) -> float:
        """Publish one POSE_UPDATE of the target handle; return the perf_counter time."""
        msg = Feedback(client_id='ik_bench', marker_name='target', control_name='move_3d',
                       event_type=Feedback.POSE_UPDATE, pose=matrix_to_pose(pose))
        msg.header.frame_id = BASE
        t = time.perf_counter()
        self.feedback.publish(msg)
        return t


def latency(n):
    """Reaction samples (s): drags and plain targets, interleaved; the node's exit code."""
    h = HandleHarness({'smoothing': 'false', 'publish_rate': 100.0})
    samples = {'drag': [], 'target': []}
    try:
        h.spin(1.0)
        for k in range(1, 2 * n + 1):
            way = 'drag' if k % 2 else 'target'
            rest = at_rest(h, 2.0)
            if rest is None:
                continue
            h.received.clear()
            pose = line_target(h.chain, k)
            sent = h.drag(pose) if way == 'drag' else h.send(pose)
            lat = first_state(h, lambda q: bool(np.any(q != rest)), sent, 0.5)
            if lat is not None:
                samples[way].append(lat)
    finally:
        code = h.close()
    return {k: np.array(v) for k, v in samples.items()}, code


def flood(rate_hz, seconds):
    """Feedback at ``rate_hz`` for ``seconds``: targets taken per s, CPU busy fraction vs rest."""
    h = HandleHarness({'publish_rate': 100.0})
    try:
        h.spin(1.0)
        start = h.chain.forward(np.array(h.received[-1][2]))
        cpu0, t0 = cpu_seconds(h.proc.pid), time.perf_counter()
        h.spin(seconds)
        rest_cpu = (cpu_seconds(h.proc.pid) - cpu0) / (time.perf_counter() - t0)
        sent, period = 0, 1.0 / rate_hz
        cpu0, t0 = cpu_seconds(h.proc.pid), time.perf_counter()
        while time.perf_counter() - t0 < seconds:
            pose = start.copy()
            pose[1, 3] += 0.05 * np.sin(2 * np.pi * 0.5 * (time.perf_counter() - t0))
            h.drag(pose)
            sent += 1
            h.spin(max(0.0, t0 + sent * period - time.perf_counter()))
        elapsed = time.perf_counter() - t0
        flood_cpu = (cpu_seconds(h.proc.pid) - cpu0) / elapsed
        h.spin(1.0)
        taken = _diagnostic(h, 'handle_targets')
    finally:
        code = h.close()
    return {'sent': sent, 'sent_hz': sent / elapsed, 'taken': taken,
            'taken_hz': None if taken is None else taken / elapsed,
            'cpu_rest': rest_cpu, 'cpu_flood': flood_cpu, 'node_exit_code': code}


def _diagnostic(h, key):
    """Return the newest /diagnostics value of ``key`` as an int (None: not seen)."""
    from diagnostic_msgs.msg import DiagnosticArray
    seen = []
    h.node.create_subscription(DiagnosticArray, '/diagnostics', seen.append, 10)
    h.wait_for(lambda: any(kv.key == key for a in seen for s in a.status for kv in s.values),
               5.0, 'diagnostics', step_s=0.05)
    for array in reversed(seen):
        for status in array.status:
            for kv in status.values:
                if kv.key == key:
                    return int(kv.value)
    return None


def _stats(samples):
    return {'answered': int(samples.size), 'p50_s': float(np.percentile(samples, 50)),
            'p99_s': float(np.percentile(samples, 99)), 'max_s': float(samples.max())}


def run(args):
    """Run both measurements; print tables (or one JSON object)."""
    samples, code = latency(args.n)
    report = {'benchmark': 'handles', 'machine': machine_info(), 'n': args.n,
              'latency': {k: _stats(v) for k, v in samples.items()}, 'node_exit_code': code,
              'flood': flood(args.flood_hz, args.flood_seconds)}
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f"ik_bench handles  (iiwa14; {info['cpu']}, {info['cores']} cores, load "
          f"{os.getloadavg()[0]:.2f}; commit {info['commit']})")
    lat = report['latency']

    def ms(v):
        return f'{v * 1e3:.2f} ms'
    print_table(['reaction, smoothing off, 100 Hz', f"drag ({lat['drag']['answered']}/{args.n})",
                 f"~/target_pose ({lat['target']['answered']}/{args.n})", 'difference'],
                [(p, ms(lat['drag'][f'{p}_s']), ms(lat['target'][f'{p}_s']),
                  ms(lat['drag'][f'{p}_s'] - lat['target'][f'{p}_s']))
                 for p in ('p50', 'p99', 'max')])
    f = report['flood']
    print()
    print_table(['mouse flood', 'value'], [
        ('feedback sent', f"{f['sent']} ({f['sent_hz']:.0f} Hz)"),
        ('targets taken', f"{f['taken']} ({f['taken_hz']:.1f} per s)"),
        ('node CPU at rest', f"{f['cpu_rest'] * 100:.1f} % of a core"),
        ('node CPU in the flood', f"{f['cpu_flood'] * 100:.1f} % of a core")])
    return 0


def add_parser(subparsers):
    """Register the ``handles`` subcommand."""
    p = subparsers.add_parser('handles', help='the RViz handle over DDS: drag latency, a flood')
    p.add_argument('-n', type=int, default=200, help='drags (and as many targets) to time')
    p.add_argument('--flood-hz', type=float, default=1000.0, help='feedback rate of the flood')
    p.add_argument('--flood-seconds', type=float, default=5.0, help='seconds of flood and rest')
    p.set_defaults(func=run)
