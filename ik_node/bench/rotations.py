# SPDX-License-Identifier: Apache-2.0

"""``ik_bench rotations``: cost of the rotation kernels, single and batched."""

from ik_node.bench.common import (format_duration, machine_info, print_json, print_table,
                                  summarize, time_per_call)
from ik_node.core import rotations as rot
import numpy as np


def _inputs(rng, n):
    """Return n random unit quaternions, log vectors and rotation matrices."""
    q = rng.normal(size=(n, 4))
    q /= np.linalg.norm(q, axis=1, keepdims=True)
    u = rng.uniform(-1.0, 1.0, size=(n, 3))
    return q, u, rot.quaternion_to_matrix(q)


def _kernels(q, u, m):
    """Name -> zero-argument callable for each benchmarked operation."""
    return {
        'exp': lambda: rot.exp(u),
        'log': lambda: rot.log(q),
        'dexp (dq/du)': lambda: rot.dexp(u),
        'quaternion_to_matrix': lambda: rot.quaternion_to_matrix(q),
        'matrix_to_quaternion': lambda: rot.matrix_to_quaternion(m),
    }


def run(args):
    """Run the benchmark and print a table, or one JSON object with --json."""
    rng = np.random.default_rng(args.seed)
    single = _kernels(*(a[0] for a in _inputs(rng, 1)))
    batch_q, batch_u, batch_m = _inputs(rng, args.batch)
    batch = _kernels(batch_q, batch_u, batch_m)
    results = {}
    for name in single:
        one = summarize(time_per_call(single[name], args.calls, args.blocks))
        many = summarize(time_per_call(batch[name], 1, args.repeats))
        results[name] = {
            'single_median_s': one['median_s'], 'single_p95_s': one['p95_s'],
            'batch_median_s': many['median_s'], 'batch_p95_s': many['p95_s'],
            'batch_per_item_median_s': many['median_s'] / args.batch,
        }
    report = {'benchmark': 'rotations', 'batch_size': args.batch, 'seed': args.seed,
              'machine': machine_info(), 'results': results}
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f"ik_bench rotations  (seed {args.seed}; {info['cpu']}, {info['cores']} cores; "
          f"Python {info['python']}, numpy {info['numpy']}; commit {info['commit']})")
    rows = [(name, format_duration(r['single_median_s']), format_duration(r['single_p95_s']),
             format_duration(r['batch_median_s']), format_duration(r['batch_p95_s']),
             format_duration(r['batch_per_item_median_s']))
            for name, r in results.items()]
    print_table(['operation', 'single median', 'single p95', f'batch {args.batch:,} median',
                 'batch p95', 'per item (batch)'], rows)
    return 0


def add_parser(subparsers):
    """Register the ``rotations`` subcommand."""
    p = subparsers.add_parser('rotations', help='exp, log, dq/du, quaternion <-> matrix')
    p.add_argument('--batch', type=int, default=100_000, help='batch size (default 100000)')
    p.add_argument('--calls', type=int, default=200, help='single calls per timed block')
    p.add_argument('--blocks', type=int, default=50, help='timed blocks of single calls')
    p.add_argument('--repeats', type=int, default=15, help='timed batch calls')
    p.set_defaults(func=run)
