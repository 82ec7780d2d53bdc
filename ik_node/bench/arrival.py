# SPDX-License-Identifier: Apache-2.0
"""``ik_bench arrival``: whether the arm gets where it is sent, how soon, and by what way.

Per bundled arm and obstacle count: a seeded scene (obstacles clear of the
start), then free targets one after the other, each from wherever the arm
is: a configuration within ``--spread`` rad of the start that keeps
TARGET_CLEARANCE from everything, kept only when a free joint path from
the arm's configuration to it exists (the bench's own check: a plan with
PROOF_S, so every target counted can be reached). The node's motion
session runs on simulated time at 100 Hz; the worker answers each question
when as much simulated time has passed as the answer took (its wall-clock
time), as a thread beside the ticks would. Per target: arrived (the tip
within 0.1 mm and 1 mrad of the target, at rest) within ``--timeout``
seconds, the time to arrive, the tip's path over the straight distance,
the largest joint travel, the verdict of the misses; per row the lowest
distance of any checked pair at the commands (every 10 ms).
``--planner none`` runs without the global planner (the local step and the
straight way only), to show what the planner adds.
"""

import math
import os
import time
from typing import List

from ik_node.bench import scenes
from ik_node.bench.bench_workers import LaggedWorker, NoPlanner
from ik_node.bench.common import cell, machine_info, print_json, print_table, print_title
from ik_node.bench.ik import BUNDLED
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.collision.planner import JointPlanner
from ik_node.core.motion.arrival import arrived
from ik_node.core.poses import pose_error
import numpy as np

PROOF_S = 5.0        # the bench's own plan that proves a target reachable in free space, s
TICK = scenes.PERIOD


def reachable_targets(arm: scenes.Arm, count: int, spread: float, rng: np.random.Generator,
                      planner: JointPlanner, guard: CollisionGuard) -> List[np.ndarray]:
    """Return up to ``count`` free configurations, each connected to the one before (a plan)."""
    out, here = [], arm.q0
    for _ in range(4 * count):
        if len(out) >= count:
            break
        found = scenes.free_target(arm, rng, spread)
        if found is None:
            continue
        path, _ = planner.plan(guard, here, found[0], lambda: None)
        if path is not None:
            out.append(found[0])
            here = found[0]
    return out


def drive(arm: scenes.Arm, targets: List[np.ndarray], planner, timeout_s: float) -> dict:
    """Send the targets in turn; return per target arrival, time, path ratio, travel, verdict."""
    clock = [0.0]
    worker = LaggedWorker(planner, lambda: clock[0])
    session = scenes.session(arm, worker)
    tracker = session.tracker
    chain = arm.chain
    rows, lowest = [], math.inf
    for q_goal in targets:
        target = chain.forward(q_goal)
        start_tip = chain.forward(tracker.q)[:3, 3]
        start_q = tracker.q.copy()
        session.target(clock[0], target)
        sent, length, travel, last_tip = clock[0], 0.0, np.zeros(chain.n), start_tip
        took = None
        while clock[0] - sent < timeout_s:
            clock[0] += TICK
            session.tick(clock[0])
            q, v, _ = session.plan.sample(clock[0])
            tip = chain.forward(q)
            length += float(np.linalg.norm(tip[:3, 3] - last_tip))
            last_tip = tip[:3, 3]
            travel = np.maximum(travel, np.abs(q - start_q))
            lowest = min(lowest, float(arm.model.distances(q, 0.05).lowest))
            if arrived(*pose_error(target, tip)) and not np.any(v) and session.plan.at_rest():
                took = clock[0] - sent
                break
        straight = float(np.linalg.norm(target[:3, 3] - start_tip))
        verdict = tracker.arrival()
        rows.append({'arrived': took is not None, 'time_s': took,
                     'path_ratio': length / straight if straight > 0.05 else None,
                     'travel_rad': float(travel.max()),
                     'verdict': '' if took is not None else
                     f'{verdict.verdict.value}: {verdict.reason}'})
    return {'targets': rows, 'lowest_m': lowest, 'plans': worker.engine.answered}


def row(arm: scenes.Arm, count: int, planner_name: str, result: dict) -> dict:
    """Summarise one drive."""
    t = result['targets']
    times = [r['time_s'] for r in t if r['arrived']]
    ratios = [r['path_ratio'] for r in t if r['arrived'] and r['path_ratio'] is not None]
    misses = [r['verdict'] for r in t if not r['arrived']]
    return {'arm': arm.name, 'obstacles': count, 'planner': planner_name, 'targets': len(t),
            'arrived_pct': 100.0 * len(times) / max(1, len(t)),
            'time_p50_s': float(np.median(times)) if times else math.nan,
            'time_max_s': max(times) if times else math.nan,
            'path_ratio_p50': float(np.median(ratios)) if ratios else math.nan,
            'path_ratio_max': max(ratios) if ratios else math.nan,
            'travel_max_rad': max(r['travel_rad'] for r in t) if t else math.nan,
            'lowest_mm': 1e3 * result['lowest_m'], 'misses': misses}


def rows(args) -> List[dict]:
    """Run every arm and obstacle count asked (module docstring)."""
    out = []
    for k, name in enumerate(args.arms):
        arm = scenes.bundled(name)
        for count in args.counts:
            rng = np.random.default_rng([args.seed, k, count])
            scenes.scene(arm, count, rng)
            proof = JointPlanner('own', time_limit_s=PROOF_S, seed=args.seed)
            guard = CollisionGuard(arm.model, scenes.MARGIN)
            targets = reachable_targets(arm, args.targets, args.spread, rng, proof, guard)
            for planner_name in args.planner:
                planner = NoPlanner() if planner_name == 'none' else \
                    JointPlanner(planner_name, seed=args.seed)
                result = drive(arm, targets, planner, args.timeout)
                out.append(row(arm, count, planner.name, result))
        arm.model.set_obstacles({})
    return out


def add_parser(subparsers):
    """Register the ``arrival`` subcommand."""
    p = subparsers.add_parser('arrival', help='share of free targets reached among obstacles, '
                                              'time to arrive, tip path over the straight one')
    p.add_argument('--arms', nargs='+', default=sorted(BUNDLED), choices=sorted(BUNDLED))
    p.add_argument('--counts', nargs='+', type=int, default=[0, 5, 20],
                   help='obstacle counts (0 5 20)')
    p.add_argument('--targets', type=int, default=12, help='targets per row (12)')
    p.add_argument('--spread', type=float, default=1.0,
                   help='targets within this many rad of the start per joint (1.0)')
    p.add_argument('--timeout', type=float, default=15.0, help='simulated s per target (15)')
    p.add_argument('--planner', nargs='+', default=['auto', 'none'],
                   choices=['auto', 'ompl', 'own', 'none'],
                   help="the worker's planner; 'none': without one (default: auto none)")
    p.add_argument('--two-arms', action='store_true',
                   help='two arms held by the margin instead (ik_node.bench.group_arrival: '
                        "iiwa14_dual, a plate across the left hand's way per scene)")
    p.add_argument('--scenes', type=int, default=20, help='scenes for --two-arms (20)')
    p.set_defaults(func=run)


def run(args):
    """Run the benchmark and print tables, or one JSON object with --json."""
    if args.two_arms:
        from ik_node.bench import group_arrival
        return group_arrival.run(args, ' '.join(f'{x:.2f}' for x in os.getloadavg()))
    started = time.perf_counter()
    table = rows(args)
    report = {'benchmark': 'arrival', 'seed': args.seed, 'machine': machine_info(),
              'targets': args.targets, 'spread_rad': args.spread, 'timeout_s': args.timeout,
              'wall_s': time.perf_counter() - started, 'rows': table}
    if args.json:
        print_json(report)
        return 0
    print_title('arrival', f'seed {args.seed}', report['machine'])
    print(f'{args.targets} free targets per row (2 cm clear, within {args.spread:g} rad of the '
          f'start, each proven reachable by a free plan), one after the other; simulated '
          f'100 Hz, worker answers after their compute time; {args.timeout:g} s per target')
    keys = ['arm', 'obstacles', 'planner', 'targets', 'arrived_pct', 'time_p50_s', 'time_max_s',
            'path_ratio_p50', 'path_ratio_max', 'travel_max_rad', 'lowest_mm']
    print_table(keys, [[cell(r[k]) for k in keys] for r in table])
    for r in table:
        for miss in r['misses']:
            print(f"  missed ({r['arm']}, {r['obstacles']} obstacles, {r['planner']}): {miss}")
    return 0
