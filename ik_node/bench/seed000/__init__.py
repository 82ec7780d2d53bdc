# SPDX-License-Identifier: Apache-2.0

"""``ik_bench seed000``: the log-quaternion IK experiment of seed article 000.

Five unit links along +z; each joint starts at random yaw, pitch, roll in
[0, pi] (seeded); the target is minus the start effector position; every
update moves the effector 0.001 toward it (``u += J^+ dp``), at most 10,000
updates; 100 trials. Reported: the RMS difference between the updates used
and the ideal count ``int(2 |p0| / 0.001) + 1`` (the moves plus the final
check that finds the target within one step), for log-quaternion and for
yaw-pitch-roll parameters on the same start poses, and the time per update:
one chain at a time (as the article ran it) and all trials as one batch.
"""

import time

from ik_node.bench.common import machine_info, print_json, print_table
from ik_node.bench.seed000.balljoint import BallJointChain
from ik_node.core import rotations as rot
import numpy as np

ARTICLE = {'quaternion_rms': '0.66-0.85', 'euler_rms': '52-100',
           'quaternion_update_ms': '0.019-0.022', 'euler_update_ms': '0.022-0.025'}
LINKS = 5
STEP = 0.001
MAX_UPDATES = 10_000


def start_poses(rng, trials):
    """Return (trials, LINKS, 3) yaw, pitch, roll in [0, pi]."""
    return rng.uniform(0.0, np.pi, size=(trials, LINKS, 3))


def initial_params(ypr, parameterization):
    """Parameters of the start poses: the angles, or log-quaternions of the same rotations."""
    if parameterization == 'euler':
        return ypr.copy()
    q = rot.matrix_to_quaternion(rot.ypr_to_matrix(ypr[..., 0], ypr[..., 1], ypr[..., 2]))
    return rot.log(q)


def run_trials(ypr, parameterization, max_updates=MAX_UPDATES):
    """Run every trial as one batch.

    Returns:
        (updates used per trial (T,), ideal counts (T,), seconds, moves made).

    """
    chain = BallJointChain(np.tile([0.0, 0.0, 1.0], (LINKS, 1)), parameterization)
    params = initial_params(ypr, parameterization)
    target = -chain.forward(params)
    ideal = (2.0 * np.linalg.norm(target, axis=1) / STEP).astype(int) + 1
    moves = np.zeros(len(ypr), dtype=int)
    start = time.perf_counter()
    for _ in range(max_updates):
        moving = chain.update(params, target, STEP)
        moves += moving
        if not moving.any():
            break
    seconds = time.perf_counter() - start
    return moves + 1, ideal, seconds, int(moves.sum())


def sequential_update_time(ypr, parameterization, updates):
    """Mean seconds per update with numpy, one chain at a time (``updates`` updates)."""
    total_s, total_moves = 0.0, 0
    for trial in ypr:
        budget = updates - total_moves
        if budget <= 0:
            break
        _, _, seconds, moves = run_trials(trial[None], parameterization, min(budget, MAX_UPDATES))
        total_s += seconds
        total_moves += moves
    return total_s / max(total_moves, 1)


def compiled_trials(ypr, parameterization):
    """Run every trial one chain at a time with the compiled update.

    Returns:
        (updates used (T,), ideal (T,), seconds per update) or None without numba.

    """
    try:
        from ik_node.bench.seed000 import jit
    except ImportError:
        return None
    kind = jit.QUATERNION if parameterization == 'quaternion' else jit.EULER
    offsets = np.tile([0.0, 0.0, 1.0], (LINKS, 1))
    chain = BallJointChain(offsets, parameterization)
    params = initial_params(ypr, parameterization)
    target = -chain.forward(params)
    ideal = (2.0 * np.linalg.norm(target, axis=1) / STEP).astype(int) + 1
    jit.run_trial(offsets, params[0].copy(), target[0], STEP, kind, 10)  # compile / warm up
    used = np.empty(len(ypr), dtype=int)
    total_s, total_moves = 0.0, 0
    for t in range(len(ypr)):
        p = params[t].copy()
        start = time.perf_counter()
        moves, deficient = jit.run_trial(offsets, p, target[t], STEP, kind, MAX_UPDATES)
        total_s += time.perf_counter() - start
        if deficient:  # finish the trial on the numpy path (SVD pseudo-inverse)
            rest, _, _, _ = run_trials(np.asarray(ypr[t:t + 1]), parameterization)
            moves = rest[0] - 1
        used[t] = moves + 1
        total_moves += moves
    return used, ideal, total_s / max(total_moves, 1)


def run(args):
    """Run both parameterisations on the same seeded start poses and report."""
    ypr = start_poses(np.random.default_rng(args.seed), args.trials)
    report = {'benchmark': 'seed000', 'trials': args.trials, 'seed': args.seed,
              'machine': machine_info(), 'article': ARTICLE}
    for name in ('quaternion', 'euler'):
        used, ideal, seconds, moves = run_trials(ypr, name)
        report[f'{name}_rms'] = float(np.sqrt(np.mean((used - ideal) ** 2.0)))
        report[f'{name}_capped'] = int(np.sum(used > MAX_UPDATES))
        report[f'{name}_batched_update_ms'] = 1e3 * seconds / max(moves, 1)
        report[f'{name}_numpy_update_ms'] = 1e3 * sequential_update_time(
            ypr, name, args.sequential_updates)
        compiled = compiled_trials(ypr, name)
        if compiled is None:
            report[f'{name}_update_ms'] = report[f'{name}_numpy_update_ms']
            report[f'{name}_update_backend'] = 'numpy'
        else:
            c_used, c_ideal, per_update = compiled
            report[f'{name}_update_ms'] = 1e3 * per_update
            report[f'{name}_update_backend'] = 'numba'
            report[f'{name}_compiled_rms'] = float(np.sqrt(np.mean((c_used - c_ideal) ** 2.0)))
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f"ik_bench seed000  ({args.trials} trials, seed {args.seed}; {info['cpu']}, "
          f"{info['cores']} cores; commit {info['commit']})")
    rows = []
    for name, label in (('quaternion', 'log-quaternion'), ('euler', 'yaw-pitch-roll')):
        rows.append((label, f"{report[name + '_rms']:.2f}",
                     f"{report.get(name + '_compiled_rms', float('nan')):.2f}",
                     ARTICLE[name + '_rms'], f"{report[name + '_capped']}",
                     f"{report[name + '_update_ms']:.4f} ({report[name + '_update_backend']})",
                     f"{report[name + '_numpy_update_ms']:.4f}",
                     f"{report[name + '_batched_update_ms']:.4f}",
                     ARTICLE[name + '_update_ms']))
    print_table(['parameters', 'RMS (numpy)', 'RMS (compiled)', 'article RMS',
                 'hit 10,000 cap', 'ms/update, one chain', 'numpy, one chain',
                 f'numpy, batch of {args.trials}', 'article ms/update (2008 C++)'], rows)
    return 0


def add_parser(subparsers):
    """Register the ``seed000`` subcommand."""
    p = subparsers.add_parser('seed000', help="seed 000's log-quaternion vs Euler IK experiment")
    p.add_argument('--trials', type=int, default=100, help='trials (default 100)')
    p.add_argument('--sequential-updates', type=int, default=20_000,
                   help='updates timed one chain at a time (default 20000)')
    p.set_defaults(func=run)
