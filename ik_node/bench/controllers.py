# SPDX-License-Identifier: Apache-2.0

"""``ik_bench controllers``: what reaches the hardware through ros2_control's controllers.

Every combination of arm (iiwa14, Panda), output (joint_trajectory,
position_array), hardware (mock; a lagging servo), controller rate (500 Hz,
1 kHz), latency (within the budget) and scenario (a move, a 20 Hz
figure-eight, a twist stream, the node killed mid-motion) runs through the
controller stand-ins (ik_node.bench.hardware, no DDS) with three streams on
the same inputs: the node's (jerk stage), Ruckig online after the same
limiting step (as MoveIt Servo smooths; joint_trajectory only: between its
points Ruckig's plan is not one cubic, the controller's quintic is its
interpolation) and the previous release's (one point per message).
Reported per stream, output and scenario, worst case over the rest: peak
acceleration and jerk at the hardware over the node's limits, stalled
controller ticks while moving, rejected messages, the largest servo tracking
error, the delay the stream adds (by design, and measured: the median time
from the first input to the first command that moves, against the previous
stream's), and the median planning cost per node tick.
A table runs the node's stream with a latency beyond the budget. Then two
tables of issue 29: joint_trajectory_controller on a clock behind or ahead
of the node's (``--clock-offsets-ms``), the node's messages against the
previous window (first point at or before now instead of now - budget); and
forward_position_controller running its own loop (phase 0.37 period, 50 us
jitter) against the node's array timer made late by a busy machine
(``--array-lateness-ms``), each array sampled at its timer's due instant (the
node) or when the callback ran (before): peak acceleration and jerk at the
hardware, and the share of controller updates that reused an array or
skipped one.
"""

import importlib.util
import statistics
import sys

from ik_node.bench.common import machine_info, print_json, print_table, print_title
from ik_node.bench.hardware import ARMS, SCENARIOS, simulate

STREAMS = {'node': {}, 'ruckig': {'stage': 'ruckig'}, 'previous': {'legacy': True}}


def add_parser(subparsers):
    """Register the ``controllers`` subcommand."""
    p = subparsers.add_parser('controllers',
                              help='the stream at the hardware through emulated controllers')
    p.add_argument('--arms', nargs='+', default=sorted(ARMS), choices=sorted(ARMS))
    p.add_argument('--outputs', nargs='+', default=['joint_trajectory', 'position_array'],
                   choices=['joint_trajectory', 'position_array'])
    p.add_argument('--scenarios', nargs='+', default=list(SCENARIOS), choices=SCENARIOS)
    p.add_argument('--rates', nargs='+', type=float, default=[500.0, 1000.0],
                   help='controller update rates, Hz')
    p.add_argument('--latencies-ms', nargs='+', type=float, default=[1.0, 9.0, 20.0])
    p.add_argument('--servos', nargs='+', type=float, default=[0.0, 0.05],
                   help='servo time constants, s (0: mock hardware)')
    p.add_argument('--budget-ms', type=float, default=30.0, help="the node's latency budget")
    p.add_argument('--beyond-ms', type=float, default=45.0, help='a latency beyond the budget')
    p.add_argument('--duration', type=float, default=3.0, help='seconds per run')
    p.add_argument('--streams', nargs='+', default=list(STREAMS), choices=list(STREAMS))
    p.add_argument('--clock-offsets-ms', nargs='+', type=float,
                   default=[-30.0, -25.0, -12.0, -5.0, 0.0, 5.0, 12.0, 25.0, 30.0],
                   help="the controller's clock minus the node's, ms (joint_trajectory)")
    p.add_argument('--array-lateness-ms', nargs='+', type=float, default=[0.0, 0.2, 0.5, 2.0],
                   help="position_array: the node's array timer callbacks up to this late, ms")
    p.add_argument('--tables', nargs='+', default=['streams', 'clocks', 'forward'],
                   choices=['streams', 'clocks', 'forward'], help='which tables to run')
    p.set_defaults(func=run)


def _runs(args, stream, output, scenario, latencies):
    for arm in args.arms:
        for rate in args.rates:
            for latency in latencies:
                for tau in args.servos:
                    yield tau, simulate(arm, scenario, output, controller_rate=rate,
                                        latency=latency * 1e-3, servo_tau=tau,
                                        duration=args.duration, budget=args.budget_ms * 1e-3,
                                        **STREAMS[stream])


def _row(runs):
    """Worst case over runs: accel, jerk, stalls, rejected %, servo error, delay, tick cost."""
    ratios = [r.peak_ratios() for _, r in runs]
    messages = sum(r.messages for _, r in runs)
    rejected = sum(len(r.rejected) for _, r in runs)
    servo = [r.tracking_error() for tau, r in runs if tau > 0.0]
    ticks = [t for _, r in runs for t in r.tick_seconds]
    return {'accel_over_limit': max(x['accel'] for x in ratios),
            'jerk_over_limit': max(x['jerk'] for x in ratios),
            'speed_over_limit': max(x['speed'] for x in ratios),
            'stalled_ticks': sum(r.stalled_ticks() for _, r in runs),
            'rejected_percent': 100.0 * rejected / messages if messages else 0.0,
            'servo_error_rad': max(servo) if servo else None,
            'added_delay_ms': 1e3 * max(r.added_delay_s for _, r in runs),
            'reaction_ms_median': _median_ms([r.reaction_s() for _, r in runs]),
            'tick_us_median': 1e6 * statistics.median(ticks) if ticks else None}


def _median_ms(values):
    values = [v for v in values if v is not None]
    return 1e3 * statistics.median(values) if values else None


def _clock_rows(args):
    """joint_trajectory on a controller clock off the node's: worst over arms and scenarios."""
    rows = []
    for offset in args.clock_offsets_ms:
        for window in ('budget', 'now'):
            ratios = [simulate(arm, scenario, 'joint_trajectory', controller_rate=rate,
                               latency=0.001, duration=args.duration, clock_offset=offset * 1e-3,
                               budget=args.budget_ms * 1e-3, window=window).peak_ratios()
                      for arm in args.arms for scenario in ('move', 'figure8')
                      for rate in args.rates]
            rows.append({'offset_ms': offset, 'messages': 'node' if window == 'budget'
                         else 'before', 'accel_over_limit': max(r['accel'] for r in ratios),
                         'jerk_over_limit': max(r['jerk'] for r in ratios)})
    return rows


def _forward_rows(args):
    """forward_position_controller on its own loop, arrays late by a busy machine's scheduler."""
    rows = []
    for rate in args.rates:
        for lateness in args.array_lateness_ms:
            for sample in ('due', 'actual'):
                runs = [simulate(arm, 'figure8', 'position_array', controller_rate=rate,
                                 latency=0.0005, duration=args.duration,
                                 array_jitter=lateness * 1e-3, controller_phase=0.37 / rate,
                                 controller_jitter=0.00005, seed=3, array_sample=sample)
                        for arm in args.arms]
                ticks = [r.array_ticks() for r in runs]
                rows.append({'rate_hz': rate, 'lateness_ms': lateness,
                             'arrays': 'node' if sample == 'due' else 'before',
                             'accel_over_limit': max(r.peak_ratios()['accel'] for r in runs),
                             'jerk_over_limit': max(r.peak_ratios()['jerk'] for r in runs),
                             'reused_percent': 100.0 * max(t['reused'] for t in ticks),
                             'skipped_percent': 100.0 * max(t['skipped'] for t in ticks),
                             'arrays_per_s': min(r.arrays_sent for r in runs) / args.duration})
    return rows


def run(args):
    """Run every combination; print tables (or one JSON object)."""
    rows, beyond = [], []
    clocks = _clock_rows(args) if 'clocks' in args.tables else []
    forward = _forward_rows(args) if 'forward' in args.tables else []
    streams = list(args.streams) if 'streams' in args.tables else []
    if 'ruckig' in streams and importlib.util.find_spec('ruckig') is None:
        streams.remove('ruckig')
        print('ik_bench controllers: ruckig is not installed (pip install ruckig): '
              'its rows are left out', file=sys.stderr)
    for stream in streams:
        for output in args.outputs:
            if stream == 'ruckig' and output != 'joint_trajectory':
                continue   # its plan is not a cubic between points: arrays would need Ruckig
            for scenario in args.scenarios:
                runs = list(_runs(args, stream, output, scenario, args.latencies_ms))
                rows.append(dict(stream=stream, output=output, scenario=scenario,
                                 **_row(runs)))
    for output in args.outputs if streams else []:
        for scenario in args.scenarios:
            runs = list(_runs(args, 'node', output, scenario, [args.beyond_ms]))
            beyond.append(dict(stream='node', output=output, scenario=scenario,
                               **_row(runs)))
    report = {'benchmark': 'controllers', 'machine': machine_info(), 'arms': args.arms,
              'rates': args.rates, 'latencies_ms': args.latencies_ms, 'servos': args.servos,
              'budget_ms': args.budget_ms, 'rows': rows, 'beyond_budget': beyond,
              'clock_offsets': clocks, 'forward_controller': forward}
    if args.json:
        print_json(report)
        return 0
    detail = (f"arms {', '.join(args.arms)}; {'/'.join(f'{r:g}' for r in args.rates)} Hz; "
              f"latencies {'/'.join(f'{x:g}' for x in args.latencies_ms)} ms within a "
              f'{args.budget_ms:g} ms budget; servos {args.servos} s')
    print_title('controllers', detail, report['machine'])
    if rows:
        _table(rows)
        print(f'\nlatency {args.beyond_ms:g} ms, beyond the {args.budget_ms:g} ms budget:')
        _table(beyond)
    if clocks:
        print(f'\njoint_trajectory_controller on its own clock (latency 1 ms, budget '
              f'{args.budget_ms:g} ms; worst over arms, move and figure8, rates):')
        print_table(['clock offset ms', 'messages', 'accel / limit', 'jerk / limit'],
                    [(_fmt(r['offset_ms']), r['messages'], _fmt(r['accel_over_limit']),
                      _fmt(r['jerk_over_limit'])) for r in clocks])
    if forward:
        print('\nforward_position_controller on its own loop (phase 0.37 period, 50 us jitter; '
              'figure8; worst over arms):')
        print_table(['rate Hz', 'timer late ms', 'arrays', 'accel / limit', 'jerk / limit',
                     'reused %', 'skipped %', 'arrays / s'],
                    [(_fmt(r['rate_hz']), _fmt(r['lateness_ms']), r['arrays'],
                      _fmt(r['accel_over_limit']), _fmt(r['jerk_over_limit']),
                      _fmt(r['reused_percent']), _fmt(r['skipped_percent']),
                      _fmt(r['arrays_per_s'])) for r in forward])
    return 0


def _fmt(value, digits=3):
    if value is None:
        return '-'
    return f'{value:.{digits}g}' if isinstance(value, float) else str(value)


def _table(rows):
    print_table(['stream', 'output', 'scenario', 'accel / limit', 'jerk / limit', 'stalled ticks',
                 'rejected %', 'servo error rad', 'added delay ms', 'reaction ms (median)',
                 'tick us (median)'],
                [(r['stream'], r['output'], r['scenario'], _fmt(r['accel_over_limit']),
                  _fmt(r['jerk_over_limit']), r['stalled_ticks'], _fmt(r['rejected_percent']),
                  _fmt(r['servo_error_rad']), _fmt(r['added_delay_ms']),
                  _fmt(r['reaction_ms_median']), _fmt(r['tick_us_median'])) for r in rows])
