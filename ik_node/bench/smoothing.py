# SPDX-License-Identifier: Apache-2.0

"""``ik_bench smoothing``: cost of the cubic exp-map rule and quality of its variants.

Speed: microseconds per sample of ``spherical_cubic_interpolate_in_time``
(one key set, and a batch of 100,000) and of ``CartesianTrajectory.sample``.
Quality, for the article's implementations 1-4 on seeded random key
sequences (random rotations of ``--step`` radians, uniform and non-uniform
key spacing): the largest angular-velocity jump at key crossings and the
largest angle between each implementation and implementation 3.
"""

from ik_node.bench.common import (format_duration, machine_info, print_json, print_table,
                                  summarize, time_per_call)
from ik_node.core import rotations as rot
from ik_node.core.motion import smoothing as sm
from ik_node.core.motion.trajectory import CartesianTrajectory
import numpy as np


def key_sequence(rng, count, step, uniform):
    """Return (count, 4) keys by random rotations of ~step rad and their times."""
    qs = [np.array([0.0, 0.0, 0.0, 1.0])]
    for _ in range(count - 1):
        qs.append(rot.multiply(rot.exp(rng.normal(size=3) * step / 2.0), qs[-1]))
    spans = np.full(count, 0.5) if uniform else rng.uniform(0.05, 1.0, size=count)
    return np.array(qs), np.cumsum(spans)


def deviation_from_3(variant, qs, t, samples=20):
    """Largest angle (rad) between a variant and implementation 3 inside the segments."""
    worst = 0.0
    for k in range(1, len(qs) - 2):
        for w in np.linspace(0.0, 1.0, samples):
            args = (qs[k], qs[k + 1], qs[k - 1], qs[k + 2], w, t[k + 1] - t[k],
                    t[k - 1] - t[k], t[k + 2] - t[k])
            a = sm.SPHERICAL_VARIANTS[variant](*args)
            b = sm.SPHERICAL_VARIANTS[3](*args)
            d = min(1.0, abs(float(a @ b)))
            worst = max(worst, 2.0 * float(np.arccos(d)))
    return worst


def _speed(rng, batch, calls, blocks, repeats):
    q = rng.normal(size=(4, 4))
    single = summarize(time_per_call(lambda: sm.spherical_cubic_interpolate_in_time(
        q[0], q[1], q[2], q[3], 0.3, 1.0, -0.7, 1.6), calls, blocks))
    qb = rng.normal(size=(4, batch, 4))
    w = rng.uniform(0, 1, batch)
    many = summarize(time_per_call(lambda: sm.spherical_cubic_interpolate_in_time(
        qb[0], qb[1], qb[2], qb[3], w, 1.0, -0.7, 1.6), 1, repeats))
    traj = CartesianTrajectory(np.zeros(3), np.array([0.0, 0.0, 0.0, 1.0]), 0.0)
    for k in range(1, 200):
        traj.add_key(0.05 * k, [0.01 * k, 0.02 * np.sin(k / 5.0), 0.0],
                     rot.axis_angle_to_quaternion([0, 0, 1], 0.02 * k))
    clock = {'t': 0.0}

    def tick():
        clock['t'] += 0.004
        traj.sample(clock['t'])
    sample = summarize(time_per_call(tick, calls, blocks))
    return {'single': single, 'batch': many, 'batch_size': batch,
            'batch_per_item_s': many['median_s'] / batch, 'trajectory_sample': sample}


def run(args):
    """Run the benchmark and print tables, or one JSON object with --json."""
    rng = np.random.default_rng(args.seed)
    speed = _speed(rng, args.batch, args.calls, args.blocks, args.repeats)
    quality = []
    for uniform in (True, False):
        sequences = [key_sequence(rng, args.keys, args.step, uniform)
                     for _ in range(args.sequences)]
        for variant in (1, 2, 3, 4):
            jumps = max(float(sm.key_crossing_jumps(variant, qs, t).max()) for qs, t in sequences)
            dev = 0.0 if variant == 3 else max(deviation_from_3(variant, qs, t)
                                               for qs, t in sequences)
            quality.append({'spacing': 'uniform' if uniform else 'non-uniform',
                            'implementation': variant, 'max_jump_rad_s': jumps,
                            'max_deviation_rad': dev})
    report = {'benchmark': 'smoothing', 'seed': args.seed, 'machine': machine_info(),
              'speed': speed, 'quality': quality, 'keys': args.keys,
              'sequences': args.sequences, 'step_rad': args.step}
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f"ik_bench smoothing  (seed {args.seed}; {info['cpu']}, {info['cores']} cores; "
          f"commit {info['commit']})")
    print_table(['operation', 'median', 'p95'], [
        ('spherical_cubic_interpolate_in_time, one key set',
         format_duration(speed['single']['median_s']), format_duration(speed['single']['p95_s'])),
        (f'same, batch of {args.batch:,} (per item)', format_duration(speed['batch_per_item_s']),
         ''),
        ('CartesianTrajectory.sample (250 Hz, streamed keys)',
         format_duration(speed['trajectory_sample']['median_s']),
         format_duration(speed['trajectory_sample']['p95_s']))])
    print()
    print(f'{args.sequences} sequences of {args.keys} keys, random rotations of ~{args.step} rad '
          'between keys:')
    print_table(['spacing', 'implementation', 'max angular-velocity jump at keys (rad/s)',
                 'max deviation from implementation 3 (rad)'],
                [(q['spacing'], q['implementation'], f"{q['max_jump_rad_s']:.3g}",
                  f"{q['max_deviation_rad']:.3g}") for q in quality])
    return 0


def add_parser(subparsers):
    """Register the ``smoothing`` subcommand."""
    p = subparsers.add_parser('smoothing', help='exp-map cubic interpolation: speed, variants')
    p.add_argument('--batch', type=int, default=100_000, help='batch size (default 100000)')
    p.add_argument('--calls', type=int, default=50, help='single calls per timed block')
    p.add_argument('--blocks', type=int, default=40, help='timed blocks')
    p.add_argument('--repeats', type=int, default=5, help='timed batch calls')
    p.add_argument('--keys', type=int, default=20, help='keys per sequence (default 20)')
    p.add_argument('--sequences', type=int, default=10, help='sequences per spacing')
    p.add_argument('--step', type=float, default=1.0, help='rotation between keys, rad')
    p.set_defaults(func=run)
