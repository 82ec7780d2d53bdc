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

"""``ik_bench analytic``: the closed-form SRS solver on the bundled 7-DoF arm.

Random joint vectors within limits (seeded) give reachable target poses by FK.
Each target is solved one at a time (with the pose's own swivel angle, with the
generating configuration as reference, and with no hint at all), and all of
them at once with ``solve_batch``. The residual of every answer is measured by
forward kinematics.

``--offset-mm X`` runs the same on a deliberately offset copy of the arm:
joints 2-7 moved sideways by X mm each (seeded directions), so that no axes
meet exactly: a near-SRS arm, solved on its nearest exact SRS model and
polished on the true chain.
"""

import time
from xml.etree import ElementTree

from ik_node.bench.common import (format_duration, machine_info, print_json, print_table)
from ik_node.core.chain import Chain
from ik_node.core.srs import AnalyticSRS
from ik_node.urdf import bundled_urdf
import numpy as np

WARM_UP = 2000
OFFSET_SEED = 3


def offset_copy(text, millimetres, seed=OFFSET_SEED, first='iiwa_joint_1'):
    """Return URDF text with every revolute joint but ``first`` moved sideways (x, y) by mm."""
    rng = np.random.default_rng(seed)
    root = ElementTree.fromstring(text)
    for joint in root.iter('joint'):
        if joint.get('type') != 'revolute' or joint.get('name') == first:
            continue
        origin = joint.find('origin')
        xyz = np.array([float(v) for v in origin.get('xyz').split()])
        side = rng.normal(size=2)
        xyz[:2] += 1e-3 * millimetres * side / np.linalg.norm(side)
        origin.set('xyz', ' '.join(repr(float(v)) for v in xyz))
    return ElementTree.tostring(root, encoding='unicode')


def _residual(chain, q, target):
    tip = chain.forward(q)
    r = tip[:3, :3].T @ target[:3, :3]
    sin = 0.5 * np.linalg.norm([r[2, 1] - r[1, 2], r[0, 2] - r[2, 0], r[1, 0] - r[0, 1]])
    return max(float(np.linalg.norm(tip[:3, 3] - target[:3, 3])),
               float(np.arctan2(sin, (np.trace(r) - 1.0) / 2.0)))


def _single(arm, chain, targets, hints, kind, check_every):
    """Time back-to-back solves, then check every answer (not inside the timed loop).

    A warm-up pass over the first targets comes first: on this class of VM the
    same call measured 2x slower before the CPU settled.
    """
    for target, (psi, q_ref) in list(zip(targets, hints))[:WARM_UP]:
        arm.solve(target, swivel=psi) if kind == 'swivel' else \
            arm.solve(target, q_reference=q_ref) if kind == 'reference' else arm.solve(target)
    times, results = [], []
    for target, (psi, q_ref) in zip(targets, hints):
        kwargs = {'swivel': psi} if kind == 'swivel' else \
            {'q_reference': q_ref} if kind == 'reference' else {}
        start = time.perf_counter()
        res = arm.solve(target, **kwargs)
        times.append(time.perf_counter() - start)
        results.append(res)
    ok = sum(r.success and chain.within_limits(r.q) for r in results)
    worst = max(_residual(chain, results[i].q, targets[i])
                for i in range(0, len(targets), check_every))
    t = np.array(times)
    return {'solve': kind, 'n': len(targets), 'success_rate': ok / len(targets),
            'max_residual': worst, 'median_s': float(np.median(t)),
            'p95_s': float(np.percentile(t, 95)), 'max_s': float(np.max(t))}


def run(args):
    """Run the benchmark and print a table, or one JSON object with --json."""
    with open(bundled_urdf('iiwa14.urdf'), encoding='utf-8') as handle:
        text = handle.read()
    if args.offset_mm:
        text = offset_copy(text, args.offset_mm)
    chain = Chain.from_urdf_string(text, 'iiwa_link_0', 'tool0')
    arm = AnalyticSRS.from_chain(chain, backend=args.backend)
    rng = np.random.default_rng(args.seed)
    qs = rng.uniform(chain.lower, chain.upper, size=(args.n, 7))
    targets = np.array([chain.forward(q) for q in qs])
    hints = [(arm.swivel_of(q), q) for q in qs]
    arm.solve(targets[0])  # compile / warm up
    rows = [_single(arm, chain, targets, hints, kind, args.check_every)
            for kind in ('swivel', 'reference', 'none')]
    branches = np.array([arm.branch_of(q) for q in qs], dtype=float)
    psi = np.array([h[0] for h in hints])
    arm.solve_batch(targets[:10], psi[:10], branches[:10])
    start = time.perf_counter()
    q_batch, valid = arm.solve_batch(targets, psi, branches)
    batch_s = time.perf_counter() - start
    batch_worst = max(_residual(chain, q_batch[i], targets[i])
                      for i in range(0, args.n, args.check_every))
    report = {'benchmark': 'analytic', 'n': args.n, 'seed': args.seed, 'backend': arm.backend,
              'offset_mm': args.offset_mm, 'model': arm.model_note,
              'machine': machine_info(), 'single': rows,
              'batch': {'n': args.n, 'seconds': batch_s, 'poses_per_s': args.n / batch_s,
                        'valid_rate': float(np.mean(valid)), 'max_residual': batch_worst,
                        'recovers_q': float(np.mean(np.all(np.abs(q_batch - qs) < 1e-9,
                                                           axis=1)))}}
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    arm_name = f'iiwa14 offset {args.offset_mm:g} mm' if args.offset_mm else 'iiwa14'
    print(f'ik_bench analytic  ({arm_name}: {arm.model_note}; n={args.n}, seed {args.seed}, '
          f'backend {arm.backend}; residual by FK on every {args.check_every}th; '
          f'{info["cpu"]}, {info["cores"]} cores; commit {info["commit"]})')
    labels = {'swivel': 'solve(T, swivel=psi of the pose)',
              'reference': 'solve(T, q_reference=q)', 'none': 'solve(T) (swivel 0, limits)'}
    table = [(labels[r['solve']], f"{100 * r['success_rate']:.3f} %",
              f"{r['max_residual']:.2e}", format_duration(r['median_s']),
              format_duration(r['p95_s']), format_duration(r['max_s'])) for r in rows]
    b = report['batch']
    table.append((f'solve_batch (N={args.n})', f"{100 * b['valid_rate']:.3f} %",
                  f"{b['max_residual']:.2e}", f"{b['poses_per_s']:,.0f} poses/s", '', ''))
    print_table(['call', 'success', 'max residual (m or rad)', 'median', 'p95', 'max'], table)
    return 0


def add_parser(subparsers):
    """Register the ``analytic`` subcommand."""
    p = subparsers.add_parser('analytic', help='closed-form SRS IK on the bundled 7-DoF arm')
    p.add_argument('-n', type=int, default=100_000, help='random poses (default 100000)')
    p.add_argument('--check-every', type=int, default=1,
                   help='measure the FK residual of every k-th answer (default 1)')
    p.add_argument('--backend', choices=['auto', 'numba', 'numpy'], default='auto')
    p.add_argument('--offset-mm', type=float, default=0.0,
                   help='move joints 2-7 sideways by this many mm: a near-SRS copy (default 0)')
    p.set_defaults(func=run)
