# SPDX-License-Identifier: Apache-2.0

"""``ik_bench soak --minutes N``: a random valid target stream for N minutes.

The node (iiwa14, defaults: smoothing on, 100 Hz) runs as a subprocess. The
client draws episodes at random (seeded): a stream at 20-100 Hz along a
joint-space line between two random configurations (its targets are their
forward kinematics, so every one is reachable), or a single target jump
followed by a pause; now and then an elbow pole. Reported per interval: the
node's RSS, joint_states periods (from header stamps), the solve-time
percentiles of its diagnostics; and over the run: failures of any kind.

A failure is: the node exiting, a joint state not finite or outside the
limits, a callback error or a rejected message (all inputs are valid), a
target reported unreachable (all are reachable), or the final target not
reached. Memory is flat when the RSS after the first interval never exceeds
that interval's by 5 MB or more.
"""

import time

from geometry_msgs.msg import PointStamped
from ik_node.bench.common import cell, machine_info, print_json, print_measures, print_table, \
    print_title
from ik_node.bench.session import KIB_PER_MIB, MonitoredNode, Q_START
from ik_node.ros.process import free_domain
import numpy as np

RSS_EVERY_S = 5.0
SPREAD_RAD = 0.6          # random configurations: Q_START +- this, within the limits
LIMIT_MARGIN_RAD = 0.05


class SoakSession(MonitoredNode):
    """The monitored node plus the random stream and per-interval rows."""

    def __init__(self, domain: int, seed: int):
        """Start the node; seed the stream."""
        super().__init__(domain, {}, 'ik_soak_client')
        self.rng = np.random.default_rng(seed)
        self.q_goal = Q_START.copy()
        self.targets = self.poles = 0
        self.unreachable_reports = 0
        self.solve = {'p50': [], 'p99': [], 'max': []}
        self.started_at = time.time()   # wall clock, s: the rows' origin

    def _on_diag(self, msg):
        super()._on_diag(msg)
        if self.diagnostics.get('target_reachable') == 'false':
            self.unreachable_reports += 1
        for key in self.solve:
            if f'solve_time_{key}_s' in self.diagnostics:
                self.solve[key].append(float(self.diagnostics[f'solve_time_{key}_s']))

    def random_configuration(self) -> np.ndarray:
        """Return a joint vector near Q_START, inside the limits by LIMIT_MARGIN_RAD."""
        q = Q_START + self.rng.uniform(-SPREAD_RAD, SPREAD_RAD, self.chain.n)
        return np.clip(q, self.chain.lower + LIMIT_MARGIN_RAD,
                       self.chain.upper - LIMIT_MARGIN_RAD)

    def episode(self) -> None:
        """One random episode: a stream along a joint-space line, or a jump and a pause."""
        q_next = self.random_configuration()
        if self.rng.random() < 0.5:
            rate = self.rng.uniform(20.0, 100.0)
            n = max(2, int(rate * self.rng.uniform(0.5, 3.0)))
            for k in range(1, n + 1):
                self.send_pose(self.chain.forward(self.q_goal + (q_next - self.q_goal) * k / n))
                self.targets += 1
                self.watch(1.0 / rate, RSS_EVERY_S)
        else:
            self.send_pose(self.chain.forward(q_next))
            self.targets += 1
            self.watch(self.rng.uniform(0.5, 3.0), RSS_EVERY_S)
        self.q_goal = q_next
        if self.rng.random() < 0.1:
            msg = PointStamped()
            msg.point.x, msg.point.y, msg.point.z = (float(v) for v in self.rng.uniform(
                [-0.6, -0.6, 0.2], [0.6, 0.6, 1.2]))
            self.pole_pub.publish(msg)
            self.poles += 1


def _interval_row(session: SoakSession, t_start: float, t_end: float) -> dict:
    """Statistics of one interval [t_start, t_end) (wall clock, s)."""
    stamps = np.asarray(session.stamps)
    inside = stamps[(stamps >= t_start) & (stamps < t_end)]
    periods = np.diff(inside)
    rss = [kib for t, kib in session.rss if t_start <= t < t_end]
    return {'minute_end': (t_end - session.started_at) / 60.0,
            'rss_mib': (max(rss) if rss else 0) / KIB_PER_MIB,
            'joint_states': int(inside.size),
            'period_p50_ms': float(np.percentile(periods, 50) * 1e3) if periods.size else None,
            'period_p99_ms': float(np.percentile(periods, 99) * 1e3) if periods.size else None,
            'period_max_ms': float(periods.max() * 1e3) if periods.size else None,
            'solve_p99_ms': session.solve['p99'][-1] * 1e3 if session.solve['p99'] else None,
            'targets_sent': session.targets}


def soak(minutes: float, seed: int = 0, interval_s: float = 60.0, domain=None) -> dict:
    """Run the random stream for ``minutes``; return rows per interval and the verdict."""
    domain = free_domain() if domain is None else domain
    session = SoakSession(domain, seed)
    rows = []
    try:
        session.started_at = time.time()
        end = session.started_at + minutes * 60.0
        row_start = session.started_at
        while time.time() < end:
            session.episode()
            if time.time() - row_start >= interval_s or time.time() >= end:
                now = time.time()
                rows.append(_interval_row(session, row_start, now))
                row_start = now
        final = session.chain.forward(session.random_configuration())
        session.send_pose(final)
        session.targets += 1
        reached_s = session.reaches(final, 30.0)
        session.watch(1.0, RSS_EVERY_S)   # the newest diagnostics
        alive = session.proc.poll() is None
    finally:
        code = session.close()
    return _verdict(session, rows, reached_s, alive, code, minutes)


def _verdict(session, rows, reached_s, alive, code, minutes) -> dict:
    stamps = np.asarray(session.stamps)
    periods = np.diff(stamps)
    rss = np.array([kib for _, kib in session.rss]) / KIB_PER_MIB
    first = rows[0]['rss_mib'] if rows else float('nan')
    later = [r['rss_mib'] for r in rows[1:]]
    growth = (max(later) - first) if later else 0.0
    failures = {
        'node_exited': not alive or code != 0,
        'bad_joint_states': session.bad_joints,
        'callback_errors': session.count('callback_errors'),
        'rejected_messages': session.count('rejected_messages'),
        'unreachable_reports': session.unreachable_reports,
        'final_target_missed': reached_s is None,
    }
    solve = {k: float(np.max(v)) if v else None for k, v in session.solve.items()}
    return {
        'benchmark': 'soak', 'machine': machine_info(), 'minutes': minutes,
        'targets_sent': session.targets, 'poles_sent': session.poles,
        'targets_received': session.count('targets_received'),
        'targets_dropped_unread': session.count('targets_dropped_unread'),
        'joint_states': int(stamps.size),
        'joint_states_rate_hz': float(stamps.size / max(stamps[-1] - stamps[0], 1e-9)),
        'period_p50_ms': float(np.percentile(periods, 50) * 1e3),
        'period_p99_ms': float(np.percentile(periods, 99) * 1e3),
        'period_max_ms': float(periods.max() * 1e3),
        'solve_p50_ms_worst': solve['p50'] * 1e3 if solve['p50'] else None,
        'solve_p99_ms_worst': solve['p99'] * 1e3 if solve['p99'] else None,
        'solve_max_ms': solve['max'] * 1e3 if solve['max'] else None,
        'rss_min_mib': float(rss.min()), 'rss_max_mib': float(rss.max()),
        'rss_growth_after_first_interval_mib': growth,
        'final_target_reached_after_s': reached_s,
        'node_alive_at_end': alive, 'node_exit_code': code,
        'last_diagnostics': dict(session.diagnostics),
        'failures': failures,
        'ok': not any(failures.values()) and growth < 5.0,
        'rows': rows,
    }


def run(args):
    """Soak for ``--minutes``; print the interval table and the verdict (or JSON)."""
    report = soak(args.minutes, args.seed, interval_s=args.interval)
    if args.json:
        print_json(report)
        return 0 if report['ok'] else 1
    print_title('soak', f'{args.minutes:g} min', report['machine'])
    rows = report['rows']
    if rows:
        print_table(list(rows[0]), [[cell(v) for v in r.values()] for r in rows])
        print()
    print_measures([(k, v) for k, v in report.items()
                    if k not in ('benchmark', 'machine', 'rows', 'failures', 'last_diagnostics')]
                   + [(f'failure: {k}', v) for k, v in report['failures'].items()])
    return 0 if report['ok'] else 1


def add_parser(subparsers):
    """Register the ``soak`` subcommand."""
    p = subparsers.add_parser('soak', help='a random valid target stream for N minutes')
    p.add_argument('--minutes', type=float, default=30.0, help='length of the run')
    p.add_argument('--interval', type=float, default=60.0,
                   help='seconds per row of the table')
    p.set_defaults(func=run)
