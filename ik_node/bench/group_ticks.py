# SPDX-License-Identifier: Apache-2.0

"""``ik_bench ticks --two-arms``: one tick's cost with two end effectors on one torso.

Issue 52: the node's motion session with end_effectors (GroupTracker: a
stacked step of both hands per tick, the union's limiting step, the jerk
stage), joint_states output at 100 Hz, in real time (each tick started on
its period's instant, as ticks.py does). Robots: the bundled iiwa14_dual
(collision on: both arms, the torso, the pedestal and a floor), Baxter and
TIAGo dual of the corpus (collision on, their <collision> primitives, TIAGo
on a floor; the meshes of others' packages are not here; no SRDF: Baxter's
shoulder and elbow cylinders sit 2 mm apart, inside the margin, and may
only part) and the PR2 and the G1 humanoid
(no collision: their geometry is meshes not here); the joints shared by both
arms weigh TORSO_WEIGHT; the recovery's questions are answered by a
ThreadWorker, as in the node. Targets: a pair of hand
poses at random joints near the start, a 20 Hz stream of pairs (each hand
on a circle around such a pose) and, with the pair held, an elbow pole per
arm (POLE_OFFSET_M out to its side and down: the elbows turn while the
hands hold), then a stream about where the hands are with such a pole per
elbow set at its start (``turning``: the elbows turn while the hands
move), in turn for PHASE_S each. Reported: the tick's wall-clock time
(p50, p99, max; the share over one period), how late ticks started, the
collision pairs checked, the arm's verdict at the end of each pair's phase
(GroupTracker.arrival: arrived, still moving, blocked by the margin with no
path around, unreachable), and in the poles' phases the tick's p99 and max,
the verdict at their end and how far the hands left their place (those
arrived when the poles came); in the turning phases the tick's p99 and max.
"""

import math
import time
from typing import List

from ik_node.bench.common import cell, machine_info, print_json, print_table, print_title, \
    real_time_ticks
from ik_node.bench.corpus import corpus_path
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.ik.stacked import EndEffector, JointUnion, StackedIK
from ik_node.core.model.frames import UnionFrames
from ik_node.core.motion.config import TrackerConfig
from ik_node.core.motion.group import GroupTracker
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.worker import ThreadWorker
from ik_node.core.warm import compile_collision_kernels
from ik_node.description.urdf import bundled_urdf, chain_from_urdf_string, link_frames
import numpy as np

PERIOD = 0.01
PHASE_S = 3.0
STREAM_HZ = 20.0
STREAM_RADIUS_M = 0.05
STREAM_TURN_S = 2.0
# The phases in turn: a 20 Hz stream, a pair of targets, then elbow poles with the pair held,
# then a 20 Hz stream with elbow poles (the elbows turn while the hands move).
PHASES = ('stream', 'pair', 'poles', 'turning')
# Each elbow's pole: this far to its own side (y) and down from where the elbow is, m.
POLE_OFFSET_M = (0.4, 0.3)
SPREAD_RAD = 0.4       # targets at joints within this of the start (rad, or m scaled)
MARGIN_M = 0.01
# The joints shared by both arms (a torso, a waist) are this much as dear to move (the
# bundled iiwa14_dual's config sets the same).
TORSO_WEIGHT = 0.1
# (name, file or None for bundled, base, left tip, right tip, collision: 'floor' (the
# base link on the ground), 'self' (no floor: Baxter's base is on its pedestal) or '',
# start)
ROBOTS = (
    ('iiwa14_dual', None, 'base', 'left_tool0', 'right_tool0', 'floor',
     [0.15] + [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0] * 2),
    ('baxter', 'baxter', 'base', 'left_gripper', 'right_gripper', 'self', None),
    ('tiago_dual', 'tiago_dual', 'base_footprint', 'hand_left_tool_link',
     'hand_right_tool_link', 'floor', None),
    ('pr2', 'pr2', 'base_footprint', 'l_gripper_tool_frame', 'r_gripper_tool_frame', '', None),
    ('g1_29dof_rev_1_0', 'g1_29dof_rev_1_0', 'pelvis', 'left_rubber_hand', 'right_rubber_hand',
     '', None),
)


def session_of(robot, directory, backend: str, worker):
    """Return (session, solver, collision pairs) of one robot (module docstring).

    ``worker`` answers the recovery's questions (a ThreadWorker, as the node's).
    """
    name, file, base, left, right, collide, start = robot
    path = bundled_urdf('iiwa14_dual.urdf') if file is None else corpus_path(file, directory)
    with open(path, encoding='utf-8') as handle:
        xml = handle.read()
    chains = [chain_from_urdf_string(xml, base, tip) for tip in (left, right)]
    shared = JointUnion(chains).shared()
    stacked = StackedIK([EndEffector('left', chains[0]), EndEffector('right', chains[1])],
                        joint_weights=dict.fromkeys(shared, TORSO_WEIGHT), backend=backend,
                        timeout_s=TrackerConfig().ik_timeout)
    union = stacked.union
    q0 = union.mid_limits() if start is None else np.array(start, dtype=float)
    stacked.warm_up()
    tracker = GroupTracker(stacked, TrackerConfig(), q0, 0.0, backend=backend, worker=worker)
    pairs = 0
    if collide:
        from ik_node.core.collision.shapes import checked_shape
        from ik_node.description.geometry import collision_model
        frames = UnionFrames([link_frames(xml, c) for c in chains], union.columns)
        model, _ = collision_model(xml, union, frames, home=q0, backend=backend)
        if collide == 'floor':
            model.set_obstacles({'floor': (checked_shape('halfspace', (), np.eye(4)),)})
        tracker.guard = CollisionGuard(model, MARGIN_M)
        pairs = len(model.pairs)
        if backend != 'numpy':   # load the compiled kernels now, as a node does at start-up
            compile_collision_kernels(chains[0], q0[union.columns[0]])
    return MotionSession(tracker, PERIOD, 2 * PERIOD, 500.0), stacked, pairs


def free_pair(session, stacked, rng):
    """Return the hands' poses at random joints near the start, clear of the margin."""
    tracker = session.tracker
    union = stacked.union
    for _ in range(50):
        q = np.clip(tracker.q0 + rng.uniform(-SPREAD_RAD, SPREAD_RAD, union.n),
                    union.lower, union.upper)
        guard = tracker.guard
        if guard is None or guard.model.distances(q, 2 * MARGIN_M).pairs.size == 0:
            return stacked.forward(q)
    return stacked.forward(tracker.q0)


def elbow_poles(stacked, q) -> list:
    """Return a pole per elbow: POLE_OFFSET_M from it, each to its own side (y), and down."""
    return [None if e is None else e + np.array([0.0, side * POLE_OFFSET_M[0], -POLE_OFFSET_M[1]])
            for e, side in zip(stacked.elbow_points(q), (1.0, -1.0))]


def drive(robot, seconds: float, rng, directory, backend: str) -> dict:
    """Run one robot's session in real time; return its tick times, lateness, arrivals."""
    worker = ThreadWorker()
    try:
        return drive_with(robot, seconds, rng, directory, backend, worker)
    finally:
        worker.stop()


def drive_with(robot, seconds: float, rng, directory, backend: str, worker) -> dict:
    """Run :func:`drive` with ``worker`` answering the recovery's questions."""
    session, stacked, pairs = session_of(robot, directory, backend, worker)
    ticks, late, ends, pole_ticks, pole_ends, drift = [], [], [], [], [], [0.0]
    turning_ticks = []
    phase, phase_end, centre, sent, held = 'poles', 0.0, None, -math.inf, None
    for now in real_time_ticks(PERIOD, seconds, late):
        if now >= phase_end:
            if phase == 'pair':   # a phase of one pair ends: where are the hands?
                ends.append(session.arrival(now).state)
            elif phase == 'poles' and centre is not None:
                pole_ends.append(session.arrival(now).state)
            phase, phase_end = PHASES[(PHASES.index(phase) + 1) % len(PHASES)], now + PHASE_S
            for name in ('left', 'right'):
                session.pole_of(name, None)
            if phase == 'turning':   # the hands circle where they are
                centre = stacked.forward(session.q)
            elif phase != 'poles':
                centre = free_pair(session, stacked, rng)
            if phase == 'pair':
                for name, pose in zip(('left', 'right'), centre):
                    session.target_of(name, now, pose)
            if phase in ('poles', 'turning'):   # the elbows turn: hands held, or streamed
                for name, pole in zip(('left', 'right'), elbow_poles(stacked, session.q)):
                    session.pole_of(name, pole)
            if phase == 'poles':
                arrived = session.arrival(now).state == 'arrived'
                held = stacked.forward(session.q) if arrived else None
        streaming = phase in ('stream', 'turning')
        if streaming and now - sent >= 1.0 / STREAM_HZ:
            sent = now
            angle = 2.0 * math.pi * now / STREAM_TURN_S
            for name, pose in zip(('left', 'right'), centre):
                moved = pose.copy()
                moved[:3, 3] += STREAM_RADIUS_M * (math.cos(angle) * pose[:3, 0]
                                                   + math.sin(angle) * pose[:3, 1])
                session.target_of(name, now, moved)
        tick_start = time.perf_counter()
        session.tick(now)
        cost = time.perf_counter() - tick_start
        ticks.append(cost)
        if phase == 'turning':
            turning_ticks.append(cost)
        if phase == 'poles':
            pole_ticks.append(cost)
            if held is not None:   # how far the hands leave their place while the elbows turn
                drift.append(max(float(np.linalg.norm(a[:3, 3] - b[:3, 3]))
                                 for a, b in zip(held, stacked.forward(session.q))))
    return {'ticks': np.array(ticks), 'late': np.array(late), 'ends': ends,
            'pairs': pairs, 'joints': stacked.union.n, 'pole_ticks': np.array(pole_ticks),
            'pole_ends': pole_ends, 'drift': max(drift),
            'turning_ticks': np.array(turning_ticks)}


def rows(args) -> List[dict]:
    """Drive every robot (module docstring); one row each (times in ms)."""
    out = []
    for k, robot in enumerate(ROBOTS):
        result = drive(robot, args.seconds, np.random.default_rng([args.seed, k]), args.dir,
                       args.backend)
        t, late, turning = result['ticks'], result['late'], result['turning_ticks']
        out.append({'robot': robot[0], 'joints': result['joints'],
                    'collision_pairs': result['pairs'], 'ticks': len(t),
                    'p50_ms': 1e3 * float(np.median(t)),
                    'p99_ms': 1e3 * float(np.percentile(t, 99)),
                    'max_ms': 1e3 * float(t.max()),
                    'over_period_pct': 100.0 * float(np.mean(t > PERIOD)),
                    'late_p99_ms': 1e3 * float(np.percentile(late, 99)),
                    'pairs_at_phase_end': ends_of(result['ends']),
                    'poles_p99_ms': 1e3 * float(np.percentile(result['pole_ticks'], 99)),
                    'poles_max_ms': 1e3 * float(result['pole_ticks'].max()),
                    'poles_at_phase_end': ends_of(result['pole_ends']),
                    'hands_drift_mm': 1e3 * result['drift'],
                    'turning_p99_ms': 1e3 * float(np.percentile(turning, 99)),
                    'turning_max_ms': 1e3 * float(turning.max())})
    return out


def ends_of(states: List[str]) -> str:
    """Return how many phases ended in each arrival state ('arrived 3 moving 1')."""
    return ' '.join(f'{state} {states.count(state)}'
                    for state in ('arrived', 'holding', 'moving', 'blocked', 'unreachable')
                    if state in states)


def run(args, load: str):
    """Print the table (or JSON)."""
    started = time.perf_counter()
    table = rows(args)
    report = {'benchmark': 'ticks --two-arms', 'seed': args.seed, 'machine': machine_info(),
              'load_average': load, 'seconds_per_robot': args.seconds,
              'backend': args.backend, 'wall_s': time.perf_counter() - started, 'rows': table}
    if args.json:
        print_json(report)
        return 0
    print_title('ticks --two-arms', f'seed {args.seed}, backend {args.backend}',
                report['machine'])
    print(f'{args.seconds:g} s of real time per robot at 100 Hz, two hands: a pair of targets '
          f'every {PHASE_S:g} s in turn with 20 Hz streams; load average {load}')
    keys = list(table[0])
    print_table(keys, [[cell(r[k]) for k in keys] for r in table])
    return 0
