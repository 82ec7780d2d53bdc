# SPDX-License-Identifier: Apache-2.0
"""``ik_bench ticks``: what one tick of the node costs, per arm, and which part took the time.

The node's motion session (joint_states output at 100 Hz, collision on,
the worker in its own thread, as the node runs them) in real time: each
tick is started on its period's instant (a sleep), and timed. Per arm:
seeded obstacles clear of its start; then, in turn for ``--seconds``,
a free target every PHASE_S (its configuration clear of everything by
2 cm, within 1 rad of the start) and a 20 Hz stream of targets (a circle
of STREAM_RADIUS_M around another free target's tip). Reported: the tick's
wall-clock time (p50, p99, max; the share over one period), how late ticks
started (the worker's Python holding the GIL beyond a switch interval shows
there), and for the slowest 1 % of ticks the share of each part
(ik_node.core.motion.costs: goal, limits, collision, jerk, other).
``--worker immediate`` answers the worker's questions inside the tick
instead, as before issue 50.
"""

import math
import time
from typing import List, Optional

from ik_node.bench import scenes
from ik_node.bench.common import cell, machine_info, print_json, print_table, print_title, \
    real_time_ticks
from ik_node.bench.ik import BUNDLED
from ik_node.core.ik.task import Task, TASK_NAMES
from ik_node.core.motion.costs import PARTS
from ik_node.core.motion.worker import ImmediateWorker, ThreadWorker
import numpy as np

PHASE_S = 3.0             # a target or a stream, s
STREAM_HZ = 20.0          # the stream's target rate
STREAM_RADIUS_M = 0.05    # the stream's circle around a free tip pose, m
STREAM_TURN_S = 2.0       # one turn of the circle, s
SLOWEST = 0.01            # the share of ticks whose parts are reported


def drive(arm: scenes.Arm, seconds: float, obstacles: int, rng: np.random.Generator,
          threaded: bool, backend: str = 'auto', task: Optional[Task] = None) -> dict:
    """Run the session on ``arm`` in real time; return its tick times, lateness and parts.

    ``task``: the solver's (default: the node's for the arm).
    """
    scenes.scene(arm, obstacles, rng)
    worker = ThreadWorker() if threaded else ImmediateWorker()
    session = scenes.session(arm, worker, backend=backend, task=task)
    ticks, late, parts = [], [], []
    phase_end, streaming, centre, sent = 0.0, True, None, -math.inf
    try:
        for now in real_time_ticks(scenes.PERIOD, seconds, late):
            if now >= phase_end:
                streaming, phase_end = not streaming, now + PHASE_S
                found = scenes.free_target(arm, rng)
                centre = arm.chain.forward(arm.q0) if found is None else found[1]
                if not streaming:
                    session.target(now, centre)
            if streaming and now - sent >= 1.0 / STREAM_HZ:
                sent = now
                pose = centre.copy()
                angle = 2.0 * math.pi * now / STREAM_TURN_S
                pose[:3, 3] += STREAM_RADIUS_M * (math.cos(angle) * pose[:3, 0]
                                                  + math.sin(angle) * pose[:3, 1])
                session.target(now, pose)
            session.tick(now)
            session.check_reachability()   # a worker in this thread answers here
            costs = session.costs
            ticks.append(costs.total)
            parts.append([costs.parts[p] for p in PARTS] + [costs.other])
    finally:
        worker.stop()
    return {'ticks': np.array(ticks), 'late': np.array(late), 'parts': np.array(parts),
            'answered': worker.engine.answered}


def row(arm: scenes.Arm, result: dict) -> dict:
    """Summarise one arm's drive (times in ms)."""
    t, late = result['ticks'], result['late']
    order = np.argsort(t)
    slow = result['parts'][order[-max(1, int(SLOWEST * len(t))):]]
    share = slow.sum(axis=0) / max(slow.sum(), 1e-12)
    worst = result['parts'][order[-1]]
    names = list(PARTS) + ['other']
    return {'arm': arm.name, 'joints': arm.chain.n, 'ticks': len(t),
            'p50_ms': 1e3 * float(np.median(t)), 'p99_ms': 1e3 * float(np.percentile(t, 99)),
            'max_ms': 1e3 * float(t.max()),
            'over_period_pct': 100.0 * float(np.mean(t > scenes.PERIOD)),
            'late_p99_ms': 1e3 * float(np.percentile(late, 99)),
            'late_max_ms': 1e3 * float(late.max()),
            'slowest_1pct_parts': ' '.join(f'{n} {100 * v:.0f}%' for n, v in zip(names, share)
                                           if v >= 0.05),
            'max_tick_part': names[int(np.argmax(worst))],
            'answers': result['answered']}


def rows(args) -> List[dict]:
    """Drive every arm asked (module docstring)."""
    out = []
    for k, arm in enumerate(scenes.arms(args.arms, args.corpus)):
        rng = np.random.default_rng([args.seed, k])
        task = Task(args.task) if args.task else None
        out.append(row(arm, drive(arm, args.seconds, args.obstacles, rng,
                                  args.worker == 'thread', args.backend, task)))
    return out


def add_parser(subparsers):
    """Register the ``ticks`` subcommand."""
    p = subparsers.add_parser('ticks', help="one tick's cost per arm (p50, p99, max) and which "
                                            'part took the time')
    p.add_argument('--arms', nargs='*', default=sorted(BUNDLED), choices=sorted(BUNDLED),
                   help='bundled arms (default: all four)')
    p.add_argument('--corpus', action='store_true',
                   help="also every chain of the corpus of others' descriptions")
    p.add_argument('--seconds', type=float, default=20.0, help='real time per arm (20)')
    p.add_argument('--obstacles', type=int, default=20, help='seeded obstacles (20)')
    p.add_argument('--worker', choices=['thread', 'immediate'], default='thread',
                   help="thread: as the node runs (default); immediate: the worker's answers "
                        'inside the tick, as before issue 50')
    p.add_argument('--backend', choices=['auto', 'numpy'], default='auto',
                   help='auto: compiled kernels (numba); numpy: their sources run by CPython, '
                        'as a node runs while its first compile goes on, or without numba')
    p.add_argument('--task', choices=TASK_NAMES, default='',
                   help="what of a target counts (default: the node's: pose, or position for "
                        'fewer than 6 joints)')
    p.add_argument('--two-arms', action='store_true',
                   help='two end effectors on one torso instead (ik_node.bench.group_ticks: '
                        'iiwa14_dual, Baxter, TIAGo dual, PR2, G1)')
    p.add_argument('--dir', default=None, help='folder of the corpus, for --two-arms '
                   "(default: the source tree's test/urdf_corpus/external)")
    p.set_defaults(func=run)


def run(args):
    """Run the benchmark and print a table, or one JSON object with --json."""
    if args.two_arms:
        from ik_node.bench import group_ticks
        return group_ticks.run(args, _load())
    started = time.perf_counter()
    table = rows(args)
    report = {'benchmark': 'ticks', 'seed': args.seed, 'machine': machine_info(),
              'load_average': _load(), 'seconds_per_arm': args.seconds,
              'obstacles': args.obstacles, 'worker': args.worker, 'backend': args.backend,
              'task': args.task,
              'wall_s': time.perf_counter() - started, 'rows': table}
    if args.json:
        print_json(report)
        return 0
    task = f', task {args.task}' if args.task else ''
    print_title('ticks', f'seed {args.seed}, worker {args.worker}, backend {args.backend}{task}',
                report['machine'])
    print(f'{args.seconds:g} s of real time per arm at 100 Hz, {args.obstacles} obstacles, '
          f'collision on; targets every {PHASE_S:g} s in turn with 20 Hz streams; load '
          f'average {report["load_average"]}')
    keys = ['arm', 'joints', 'ticks', 'p50_ms', 'p99_ms', 'max_ms', 'over_period_pct',
            'late_p99_ms', 'late_max_ms', 'slowest_1pct_parts', 'max_tick_part', 'answers']
    print_table(keys, [[cell(r[k]) for k in keys] for r in table])
    return 0


def _load() -> str:
    try:
        with open('/proc/loadavg', encoding='ascii') as handle:
            return ' '.join(handle.read().split()[:3])
    except OSError:
        return 'unknown'
