# SPDX-License-Identifier: Apache-2.0

"""``ik_bench analytic``: the closed-form solvers on the bundled 7-DoF arms.

Random joint vectors within limits (seeded) give reachable target poses by FK.
Each target is solved one at a time (with the pose's own free parameter, with
the generating configuration as reference, with no hint at all, and with the
pose's own swivel angle), and all of them at once with ``solve_batch``. The
residual of every answer is measured by forward kinematics.

``--arm iiwa14`` (default): the SRS solver, free parameter the swivel angle.
``--arm panda`` / ``xarm7``: the offset-wrist solver, free parameter q7, and
the Jacobian solver on the same targets (from mid-limits) side by side.

``--offset-mm X`` runs the iiwa14 rows on a deliberately offset copy of the
arm: joints 2-7 moved sideways by X mm each (seeded directions), so that no
axes meet exactly: a near-SRS arm, solved on its nearest exact SRS model and
polished on the true chain.
"""

import time
from xml.etree import ElementTree

from ik_node.bench.common import (format_duration, machine_info, print_json, print_table)
from ik_node.core.ik.closed_form.offset_wrist import AnalyticOffsetWrist
from ik_node.core.ik.closed_form.srs import AnalyticSRS
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.core.model.chain import Chain
from ik_node.description.urdf import bundled_urdf
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


def _single(solve, chain, targets, hints, kind, check_every):
    """Time back-to-back ``solve(target, hint)`` calls, then check every answer.

    The check is not inside the timed loop. A warm-up pass over the first
    targets comes first: on this class of VM the same call measured 2x slower
    before the CPU settled.
    """
    for target, hint in list(zip(targets, hints))[:WARM_UP]:
        solve(target, hint)
    times, results = [], []
    for target, hint in zip(targets, hints):
        start = time.perf_counter()
        res = solve(target, hint)
        times.append(time.perf_counter() - start)
        results.append(res)
    ok = sum(r.success and chain.within_limits(r.q) for r in results)
    worst = max(_residual(chain, results[i].q, targets[i])
                for i in range(0, len(targets), check_every))
    t = np.array(times)
    return {'solve': kind, 'n': len(targets), 'success_rate': ok / len(targets),
            'max_residual': worst, 'median_s': float(np.median(t)),
            'p95_s': float(np.percentile(t, 95)), 'max_s': float(np.max(t))}


# Rows: (kind, label, solve(arm, target, (free parameter, swivel, q)) -> IKResult).
SRS_ROWS = (
    ('swivel', 'solve(T, swivel=psi of the pose)', lambda a, t, h: a.solve(t, swivel=h[0])),
    ('reference', 'solve(T, q_reference=q)', lambda a, t, h: a.solve(t, q_reference=h[2])),
    ('none', 'solve(T) (swivel 0, limits)', lambda a, t, h: a.solve(t)),
)
OFFSET_ROWS = (
    ('q7', 'solve(T, q7=q7 of the pose)', lambda a, t, h: a.solve(t, q7=h[0])),
    ('reference', 'solve(T, q_reference=q)', lambda a, t, h: a.solve(t, q_reference=h[2])),
    ('none', 'solve(T) (q7 mid-range, limits)', lambda a, t, h: a.solve(t)),
    ('swivel', 'solve(T, swivel=psi of the pose)', lambda a, t, h: a.solve(t, swivel=h[1])),
)
ARMS = {'iiwa14': ('iiwa14.urdf', 'iiwa_link_0'), 'panda': ('panda.urdf', 'panda_link0'),
        'xarm7': ('xarm7.urdf', 'link_base')}


def _arm(args):
    """Return (chain, solver, rows, label) of the arm the arguments ask for."""
    file, base = ARMS[args.arm]
    with open(bundled_urdf(file), encoding='utf-8') as handle:
        text = handle.read()
    if args.offset_mm:
        text = offset_copy(text, args.offset_mm)
    chain = Chain.from_urdf_string(text, base, 'tool0')
    if args.arm == 'iiwa14':
        arm = AnalyticSRS.from_chain(chain, backend=args.backend)
        label = f'iiwa14 offset {args.offset_mm:g} mm' if args.offset_mm else 'iiwa14'
        return chain, arm, SRS_ROWS, label
    return chain, AnalyticOffsetWrist.from_chain(chain, backend=args.backend), OFFSET_ROWS, \
        args.arm


def run(args):
    """Run the benchmark and print a table, or one JSON object with --json."""
    chain, arm, kinds, arm_name = _arm(args)
    offset = isinstance(arm, AnalyticOffsetWrist)
    rng = np.random.default_rng(args.seed)
    qs = rng.uniform(chain.lower, chain.upper, size=(args.n, 7))
    targets = np.array([chain.forward(q) for q in qs])
    hints = [(q[6] if offset else arm.swivel_of(q), arm.swivel_of(q), q) for q in qs]
    arm.solve(targets[0])  # compile / warm up
    rows = [_single(lambda t, h: solve(arm, t, h), chain, targets, hints, kind,
                    args.check_every) for kind, _, solve in kinds]
    labels = {kind: label for kind, label, _ in kinds}
    if offset:
        jacobian = JacobianIK(chain, backend=args.backend)
        rows.append(_single(lambda t, h: jacobian.solve(t), chain, targets, hints,
                            'jacobian', args.check_every))
        labels['jacobian'] = f'JacobianIK.solve(T) (mid-limits start, {jacobian.backend})'
    branches = np.array([arm.branch_of(q) for q in qs], dtype=float)
    free = np.array([h[0] for h in hints])
    arm.solve_batch(targets[:10], free[:10], branches[:10])
    start = time.perf_counter()
    q_batch, valid = arm.solve_batch(targets, free, branches)
    batch_s = time.perf_counter() - start
    batch_worst = max(_residual(chain, q_batch[i], targets[i])
                      for i in range(0, args.n, args.check_every))
    wrapped = (q_batch - qs + np.pi) % (2.0 * np.pi) - np.pi
    report = {'benchmark': 'analytic', 'arm': args.arm, 'n': args.n, 'seed': args.seed,
              'backend': arm.backend, 'offset_mm': args.offset_mm, 'model': arm.model_note,
              'machine': machine_info(), 'single': rows,
              'batch': {'n': args.n, 'seconds': batch_s, 'poses_per_s': args.n / batch_s,
                        'valid_rate': float(np.mean(valid)), 'max_residual': batch_worst,
                        'recovers_q': float(np.mean(np.all(np.abs(wrapped) < 1e-9, axis=1)))}}
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f'ik_bench analytic  ({arm_name}: {arm.model_note}; n={args.n}, seed {args.seed}, '
          f'backend {arm.backend}; residual by FK on every {args.check_every}th; '
          f'{info["cpu"]}, {info["cores"]} cores; commit {info["commit"]})')
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
    p = subparsers.add_parser('analytic', help='closed-form IK on the bundled 7-DoF arms')
    p.add_argument('-n', type=int, default=100_000, help='random poses (default 100000)')
    p.add_argument('--arm', choices=sorted(ARMS), default='iiwa14',
                   help='iiwa14 (SRS, default), panda or xarm7 (offset wrist, q7 free)')
    p.add_argument('--check-every', type=int, default=1,
                   help='measure the FK residual of every k-th answer (default 1)')
    p.add_argument('--backend', choices=['auto', 'numba', 'numpy'], default='auto')
    p.add_argument('--offset-mm', type=float, default=0.0,
                   help='move joints 2-7 sideways by this many mm: a near-SRS copy of the '
                        'iiwa14 (default 0)')
    p.set_defaults(func=_checked)


def _checked(args):
    """Refuse --offset-mm on the offset-wrist arms (it makes near-SRS copies of the iiwa14)."""
    if args.offset_mm and args.arm != 'iiwa14':
        raise SystemExit('ik_bench analytic: --offset-mm applies to --arm iiwa14 only')
    return run(args)
