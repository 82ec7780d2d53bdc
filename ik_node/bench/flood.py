# SPDX-License-Identifier: Apache-2.0

"""``ik_bench flood``: targets at 10 kHz for 10 s, and what the node does meanwhile.

The node (iiwa14, smoothing on, default queue depth 10, 100 Hz) runs as a
subprocess; ``ik_node.bench.flooder`` floods it from a third process (the two
cores of a small machine: node on one, flood on the other). Measured:

- whether joint_states kept its rate during the flood (messages per second
  against ``publish_rate``, periods between header stamps);
- the queue: targets sent = targets the node read + targets it dropped
  unread (its ``targets_dropped_unread``, from gaps in the sequence
  numbers), plus the trajectory's own bounded key buffer (``keys_dropped``);
- the node's RSS before, one second into the flood (the baseline: by then
  the buffers a flood needs exist) and its peak until the last target is
  reached; growth = peak - baseline (goal < 5 MB);
- seconds from the end of the flood until the arm is at the last target.
"""

import json
import os
import subprocess
import sys
import time

from ik_node.bench.common import machine_info, print_json, print_measures, print_title
from ik_node.bench.session import KIB_PER_MIB, MonitoredNode, Q_START
from ik_node.core.rotations import matrix_to_quaternion
from ik_node.core.warm import die_with_parent
from ik_node.ros.process import free_domain
import numpy as np


def flood(rate_hz: float = 10000.0, seconds: float = 10.0, queue_depth: int = 10,
          publish_rate: float = 100.0, domain=None, twist: bool = False) -> dict:
    """Run one flood against a fresh node; return the measurements (see the module doc)."""
    domain = free_domain() if domain is None else domain
    mon = MonitoredNode(domain, {'target_queue_depth': queue_depth,
                                 'publish_rate': publish_rate}, 'ik_flood_client',
                        queue_depth=100)
    try:
        mon.watch(1.0)
        rss_before = mon.rss[-1][1]
        start_pose = mon.chain.forward(Q_START)
        flooder = subprocess.Popen(
            [sys.executable, '-m', 'ik_node.bench.flooder', '--rate', str(rate_hz),
             '--seconds', str(seconds), '--center', *(f'{v:.9f}' for v in start_pose[:3, 3]),
             '--quaternion', *(f'{v:.12f}' for v in matrix_to_quaternion(start_pose[:3, :3])),
             *(['--twist'] if twist else [])],
            env=dict(os.environ, ROS_DOMAIN_ID=str(domain)), stdout=subprocess.PIPE, text=True,
            preexec_fn=die_with_parent())
        try:
            mon.watch(seconds + 30.0, every_s=0.25, until=lambda: flooder.poll() is not None)
            out, _ = flooder.communicate(timeout=10.0)
        finally:
            if flooder.poll() is None:
                flooder.kill()
                flooder.wait()
        sent = json.loads(out.strip().splitlines()[-1])
        reach_s = None
        if not twist:
            last = start_pose.copy()
            last[:3, 3] = sent['last_position']
            reach_s = mon.reaches(last, 60.0)
        mon.watch(1.5)   # the diagnostics after the flood (2 Hz)
        alive = mon.proc.poll() is None
    finally:
        code = mon.close()
    report = _report(mon, sent, rss_before, reach_s, alive, code, rate_hz, seconds,
                     queue_depth, publish_rate)
    if twist:
        read, dropped = mon.count('twists_received'), mon.count('twists_dropped_unread')
        report.update(benchmark='flood --twist', targets_read=None,
                      targets_dropped_unread=None, twists_read=read,
                      twists_dropped_unread=dropped, accounted=read + dropped == sent['sent'],
                      dead_man_stops=mon.count('twist_timeouts'))
    return report


def _report(mon, sent, rss_before, reach_s, alive, code, rate_hz, seconds, queue_depth,
            publish_rate) -> dict:
    t0, t1 = sent['started_at'], sent['ended_at']
    stamps = np.array(mon.stamps)
    during = stamps[(stamps >= t0) & (stamps <= t1)]
    periods = np.diff(during)
    rss = np.array(mon.rss)
    after = rss[rss[:, 0] >= min(t0 + 1.0, t1)]   # sampled until the last target was reached
    baseline, peak = after[0, 1], after[:, 1].max()
    read = mon.count('targets_received')
    dropped = mon.count('targets_dropped_unread')
    return {
        'benchmark': 'flood', 'machine': machine_info(), 'rate_asked_hz': rate_hz,
        'seconds_asked': seconds, 'queue_depth': queue_depth, 'publish_rate_hz': publish_rate,
        'targets_sent': sent['sent'], 'flood_rate_hz': sent['rate_hz'],
        'largest_burst': sent['largest_burst'],
        'flooder_longest_pause_s': sent['longest_pause_s'],
        'flooder_longest_pause_at_s': sent['longest_pause_at_s'],
        'flooder_longest_publish_call_s': sent['longest_publish_s'],
        'targets_read': read, 'targets_dropped_unread': dropped,
        'accounted': read + dropped == sent['sent'],
        'keys_dropped': mon.count('keys_dropped'), 'keys_retimed': mon.count('keys_retimed'),
        'joint_states_rate_hz': float(during.size / (t1 - t0)),
        'joint_states_rate_held': float(during.size / ((t1 - t0) * publish_rate)),
        'period_p50_s': float(np.percentile(periods, 50)),
        'period_p99_s': float(np.percentile(periods, 99)),
        'period_max_s': float(periods.max()),
        'rss_before_mib': rss_before / KIB_PER_MIB, 'rss_baseline_mib': baseline / KIB_PER_MIB,
        'rss_peak_mib': peak / KIB_PER_MIB, 'rss_growth_mib': (peak - baseline) / KIB_PER_MIB,
        'last_target_reached_after_s': reach_s, 'bad_joint_states': mon.bad_joints,
        'callback_errors': mon.count('callback_errors'),
        'node_alive_until_stopped': alive, 'node_exit_code': code,
    }


def flood_ok(report: dict) -> bool:
    """Whether a flood met the goals: rate held, accounted, RSS < 5 MB, reached, clean.

    Twists: no dead-man stop during the unbroken stream instead of reaching.
    """
    arrived = report.get('dead_man_stops') == 0 if 'twists_read' in report else \
        report['last_target_reached_after_s'] is not None
    return (report['joint_states_rate_held'] >= 0.9 and report['accounted']
            and report['rss_growth_mib'] < 5.0 and arrived
            and report['bad_joint_states'] == 0 and report['callback_errors'] == 0
            and report['node_alive_until_stopped'] and report['node_exit_code'] == 0)


def run(args):
    """Flood once; print a table (or JSON); exit 1 when a goal is missed."""
    started = time.perf_counter()
    report = flood(args.rate, args.seconds, args.queue_depth, twist=args.twist)
    report['ok'] = flood_ok(report)
    report['bench_seconds'] = time.perf_counter() - started
    if args.json:
        print_json(report)
    else:
        what = 'twists' if args.twist else 'targets'
        print_title('flood', f'{args.rate:.0f} {what}/s for {args.seconds:g} s',
                    report['machine'])
        print_measures((k, v) for k, v in report.items() if k not in ('benchmark', 'machine'))
    return 0 if report['ok'] else 1


def add_parser(subparsers):
    """Register the ``flood`` subcommand."""
    p = subparsers.add_parser('flood', help='flood the node with targets; rate, queue, memory')
    p.add_argument('--rate', type=float, default=10000.0, help='targets per second')
    p.add_argument('--seconds', type=float, default=10.0, help='length of the flood')
    p.add_argument('--queue-depth', type=int, default=10,
                   help="the node's target_queue_depth")
    p.add_argument('--twist', action='store_true',
                   help="flood ~/target_twist (the circle's velocity) instead of targets")
    p.set_defaults(func=run)
