# SPDX-License-Identifier: Apache-2.0

"""``ik_bench collision``: what the collision constraint costs per tick, and the margin it keeps.

A bundled arm at its home among 0, 5 or 20 seeded random obstacles (boxes,
spheres, a wall; none within 4 cm of the arm at home) is driven through a
sequence of targets (reachable ones, one inside an obstacle, one into its
own base) by the tracker and the 250 Hz jerk-limited command stream, once
with the collision guard and once without. Per tick: the limiting step's
time with and without the guard (median and 99th percentile) and the lowest
distance over every committed point sampled at 1 kHz (the margin it keeps);
the work per guarded step, which no load changes: distance queries (each a
configuration posed) and coal queries, mean and 99th percentile;
per run, the searches for a free IK solution (how many, the longest:
ik_node.core.collision.free). A last pair of columns compares the model's
distance query (bounding spheres, then coal's narrow phase for the
near pairs) with coal's own broad phase (a DynamicAABBTree manager re-posed
and asked for the closest pair) on the same configurations, then with
python-fcl (every checked pair's exact distance, and known answers).

``--node``: the rate ik_node keeps over DDS (joint_states, 100 Hz asked) on
the iiwa14 standing on its floor, with collision checking off, then on with
0 and 20 seeded obstacles sent over ``~/obstacles`` (boxes and spheres as
markers), while a target near the start is sent every 0.5 s.

``--self-motion``: the Jacobian solver's answer freed from an obstacle along
its self-motion (ik_node.core.collision.free), against restarts from other
joints: the iiwa14 at seeded poses, a ball at the answer's elbow; how many
each frees, the self-motion's time, and whose answer is nearer the reference.
"""

import argparse
import math
import time as _time

from ik_node.bench.collision_fcl import known_answers, library_columns, library_comparison
from ik_node.bench.common import cell, machine_info, print_json, print_table, print_title
from ik_node.bench.ik import BUNDLED
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.collision.shapes import checked_shape
from ik_node.core.ik.factory import make_solver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.stream import CommandStream, controller_lead
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.motion.worker import World
from ik_node.description.urdf import bundled_file, bundled_urdf
import numpy as np

HOME = {
    'iiwa14': [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0],
    'ur5e': [0.3, -1.2, 1.5, -1.9, -1.57, 0.2],
    'panda': [0.0, -0.785398, 0.0, -2.356194, 0.0, 1.570796, 0.785398],
    'xarm7': [0.0, -0.247, 0.0, 0.909, 0.0, 1.156, 0.0],
}
PERIOD = 0.004     # the node's grid, s
HARDWARE = 0.001   # the controller's rate, s
MARGIN = 0.01
CLEARANCE = MARGIN + 0.03   # obstacles keep this from the arm at home, m


def arm_and_model(arm):
    """Return (chain, collision model) of a bundled arm."""
    from ik_node.description.geometry import collision_model
    file, base, tip = BUNDLED[arm]
    path = bundled_urdf(file)
    with open(path, encoding='utf-8') as handle:
        xml = handle.read()
    chain = Chain.from_urdf_string(xml, base, tip)
    model, _ = collision_model(xml, chain, home=HOME[arm])
    return chain, model


def random_obstacles(model, q0, rng, count, clearance=CLEARANCE):
    """Return ``count`` seeded obstacles (name -> shapes, base frame) clear of the arm at q0.

    A wall (a half-space 0.3-0.8 m from the base, facing it) may come
    first; then boxes and spheres within 0.8 m, 0.03-0.25 m in size, at
    random orientations. Each is kept only when no pair with it is closer
    than ``clearance`` at q0. The model is left with the obstacles set.
    """
    out = {}
    tries = 0
    while len(out) < count and tries < 50 * (count + 1):
        tries += 1
        kind = rng.choice(['box', 'sphere', 'box', 'halfspace'] if not out else ['box', 'sphere'])
        pose = np.eye(4)
        if kind == 'halfspace':
            angle = rng.uniform(0, 2 * math.pi)
            normal = np.array([-math.cos(angle), -math.sin(angle), 0.0])
            pose[:3, 2] = normal
            pose[:3, 0] = np.cross([0.0, 0.0, 1.0], normal)
            pose[:3, 1] = np.cross(normal, pose[:3, 0])
            pose[:3, 3] = -normal * rng.uniform(0.3, 0.8)
            size: tuple = ()
        else:
            pose[:3, 3] = rng.uniform([-0.8, -0.8, 0.0], [0.8, 0.8, 1.0])
            axis = rng.normal(size=3)
            k = axis / np.linalg.norm(axis)
            angle = rng.uniform(0, math.pi)
            kx = np.array([[0, -k[2], k[1]], [k[2], 0, -k[0]], [-k[1], k[0], 0]])
            pose[:3, :3] = np.eye(3) + math.sin(angle) * kx + (1 - math.cos(angle)) * kx @ kx
            size = tuple(rng.uniform(0.03, 0.25, 3 if kind == 'box' else 1))
        name = f'o{len(out)}'
        trial = dict(out, **{name: (checked_shape(kind, size, pose, source=name),)})
        model.set_obstacles(trial)
        near = model.distances(np.asarray(q0, dtype=float), clearance)
        if not any(model.pair_names(int(p))[1] == name for p in near.pairs):
            out = trial
    model.set_obstacles(out)
    return out


def timed(function, times):
    """Return ``function`` wrapped to append each call's wall-clock time (s) to ``times``."""
    def wrapper(*args, **kwargs):
        start = _time.perf_counter()
        out = function(*args, **kwargs)
        times.append(_time.perf_counter() - start)
        return out
    return wrapper


def fastest(runs):
    """Return each step's shortest time (s) over ``runs``, lists of the same steps' times.

    The drives are deterministic (the same steps, each judging the same
    configurations), so a step's fastest run is its own work with the least
    of what else the machine did meanwhile.
    """
    if len({len(r) for r in runs}) != 1:
        raise RuntimeError('the repeated drives took different numbers of steps')
    return np.min(np.stack([np.asarray(r) for r in runs]), axis=0)


def counted(tracker, model, work):
    """Count each step's distance queries and coal queries into ``work`` [(queries, exact)].

    The model's ``distances`` is wrapped on the instance only while a step
    of ``tracker`` runs (the bench's own 1 kHz samples are not counted).
    Counts do not depend on the machine's speed or load, where times do;
    the wrappers add about a microsecond to each step timed around them.
    """
    original, step = model.distances, tracker.stepper.step
    current = [0, 0]

    def distances(*args, **kwargs):
        out = original(*args, **kwargs)
        current[0] += 1
        current[1] += int(out.exact.sum())
        return out

    def counted_step(*args, **kwargs):
        current[:] = [0, 0]
        model.distances = distances
        try:
            return step(*args, **kwargs)
        finally:
            del model.distances   # the class's method again
            work.append(tuple(current))
    tracker.stepper.step = counted_step


def drive(chain, model, q0, rng, guarded, obstacles, seconds_per_target=3.0, work=None):
    """Drive the arm through four targets; return (step times s, free-search times s, lowest m).

    ``work``: a list to append each step's (distance queries, coal queries) to.
    """
    solver = make_solver(chain, 'auto')
    solver.warm_up(q0)   # as the node does before its first tick
    tracker = MotionTracker(chain, solver, TrackerConfig(), q0, 0.0)
    guard = CollisionGuard(model, MARGIN) if guarded else None
    tracker.guard = guard
    stream = CommandStream(tracker, PERIOD, controller_lead(PERIOD, 0.03), 500.0, budget_s=0.03)
    step_times, search_times = [], []
    if work is not None:
        counted(tracker, model, work)
    tracker.stepper.step = timed(tracker.stepper.step, step_times)   # the limiting step
    if guard is not None:
        free = tracker.goals.worker.engine.free_for(World.of(guard))   # the worker's search
        free._search = timed(free._search, search_times)
    targets = [chain.forward(np.clip(q0 + rng.uniform(-0.8, 0.8, chain.n), chain.lower,
                                     chain.upper)) for _ in range(2)]
    inside = chain.forward(q0)
    if obstacles:
        inside[:3, 3] = next(iter(obstacles.values()))[0].pose[:3, 3]
    into_base = chain.forward(q0)
    into_base[:3, 3] = [0.05, 0.0, 0.15]
    now, lowest, checked = 0.0, math.inf, 0.0
    for target in targets + [inside, into_base]:
        tracker.add_target(now, target)
        end = now + seconds_per_target
        while now < end:
            now += PERIOD
            stream.advance(now)
            while checked + HARDWARE <= now + 1e-12:
                checked += HARDWARE
                q, _, _ = stream.sample(checked)
                if int(round(checked / HARDWARE)) % 4 == 0 or lowest < MARGIN + 0.02:
                    lowest = min(lowest, model.distances(q, MARGIN + 0.02).lowest)
    return np.array(step_times), np.array(search_times), lowest


def broad_phase_comparison(model, rng, chain, samples=200):
    """Return per-query times (s) of the model's distances and of coal's broad phase, medians."""
    import coal
    lower = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    upper = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    qs = [rng.uniform(lower, upper) for _ in range(samples)]
    ours = []
    for q in qs:
        start = _time.perf_counter()
        model.distances(q, MARGIN)
        ours.append(_time.perf_counter() - start)
    manager = coal.DynamicAABBTreeCollisionManager()
    objects = [coal.CollisionObject(g) for g in model._geoms]
    for obj in objects:
        manager.registerObject(obj)
    world = [coal.CollisionObject(g, tf) for g, tf in zip(model._world_geoms, model._world_tf)]
    for obj in world:
        manager.registerObject(obj)
    manager.setup()
    theirs = []
    for q in qs:
        start = _time.perf_counter()
        rot, pos = model.shape_poses(q)
        for s, obj in enumerate(objects):
            obj.setTransform(coal.Transform3s(rot[s], pos[s]))
            obj.computeAABB()
        manager.update()
        callback = coal.DistanceCallBackDefault()
        manager.distance(callback)
        theirs.append(_time.perf_counter() - start)
    return float(np.median(ours)), float(np.median(theirs))


NODE_SECONDS = 20.0


def node_rate(count, checking, seed):
    """Run ik_node (iiwa14, joint_states at 100 Hz) with ``count`` obstacles; return its rate row.

    Joint states per second over NODE_SECONDS (median and lowest of the
    1-s windows), the gaps between their stamps (p50, p99, largest), the
    holds /diagnostics counted (None: collision off), the targets sent.
    """
    from ik_node.bench.session import MonitoredNode, Q_START
    from ik_node.ros.collision import shape_marker
    from ik_node.ros.demo import FLOOR_FILE
    from ik_node.ros.process import free_domain
    from visualization_msgs.msg import MarkerArray
    params = {'collision_checking': 'true' if checking else 'false', 'max_linear_speed': 0.4}
    if checking:
        params['obstacles_file'] = bundled_file(FLOOR_FILE)
    node = MonitoredNode(free_domain(), params, 'ik_bench_collision_rate')
    try:
        rng = np.random.default_rng(seed)
        if count:
            _, model = arm_and_model('iiwa14')
            markers = []
            while len(markers) < count:   # boxes and spheres (a wall has no marker type)
                shapes = random_obstacles(model, Q_START, rng, count)
                for _, (shape,) in sorted(shapes.items()):
                    if shape.kind in ('box', 'sphere') and len(markers) < count:
                        m = shape_marker(shape)
                        m.ns, m.id = 'bench', len(markers)
                        m.header.frame_id = 'iiwa_link_0'
                        markers.append(m)
            model.set_obstacles({})
            pub = node.node.create_publisher(MarkerArray, '/ik_node/obstacles', 10)
            node.wait_for(lambda: pub.get_subscription_count() > 0, 10.0, 'obstacles')
            pub.publish(MarkerArray(markers=markers))
        node.watch(1.0)
        first = len(node.stamps)
        sent = 0
        end = _time.monotonic() + NODE_SECONDS
        while _time.monotonic() < end:
            node.send_pose(node.pose_near_start(rng))
            sent += 1
            node.watch(0.5)
        stamps = np.array(node.stamps[first:])
        holds = node.count('collision_holds') if checking else None
    finally:
        node.close()
    gaps = np.diff(stamps)
    windows = np.histogram(stamps, bins=np.arange(stamps[0], stamps[-1], 1.0))[0]
    return {'collision': 'on' if checking else 'off', 'obstacles': count,
            'states_per_s_p50': float(np.median(windows)), 'states_per_s_min': int(windows.min()),
            'gap_p50_ms': 1e3 * float(np.median(gaps)),
            'gap_p99_ms': 1e3 * float(np.percentile(gaps, 99)),
            'gap_max_ms': 1e3 * float(gaps.max()), 'holds': holds, 'targets': sent}


def run_node(args):
    """``--node``: the node's rate without collision, then with 0 and 20 obstacles."""
    rows = [node_rate(0, False, args.seed), node_rate(0, True, args.seed),
            node_rate(20, True, args.seed)]
    report = {'benchmark': 'collision --node', 'seed': args.seed, 'machine': machine_info(),
              'seconds': NODE_SECONDS, 'rows': rows}
    if args.json:
        print_json(report)
        return 0
    print_title('collision --node', f'seed {args.seed}', report['machine'])
    print(f'ik_node on the iiwa14, joint_states at 100 Hz, {NODE_SECONDS:.0f} s, a target near '
          'the start every 0.5 s; the floor and the obstacles when collision is on')
    keys = ['collision', 'obstacles', 'states_per_s_p50', 'states_per_s_min', 'gap_p50_ms',
            'gap_p99_ms', 'gap_max_ms', 'holds', 'targets']
    print_table(keys, [[cell(r[k]) for k in keys] for r in rows])
    return 0


def at_least_one(text: str) -> int:
    """Parse a count of runs: an integer of at least 1 (argparse type)."""
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError(f'must be at least 1, not {value}')
    return value


def add_parser(subparsers):
    """Register the ``collision`` subcommand."""
    p = subparsers.add_parser('collision', help='cost per tick of the collision constraint, '
                                                'and the margin it keeps')
    p.add_argument('--arms', nargs='+', default=['iiwa14'], choices=sorted(BUNDLED))
    p.add_argument('--counts', nargs='+', type=int, default=[0, 5, 20],
                   help='obstacle counts (0 5 20)')
    p.add_argument('--runs', type=int, default=3, help='seeded scenes per row (3)')
    p.add_argument('--repeat', type=at_least_one, default=1,
                   help='drive each scene this many times and time each step by its fastest '
                        'run: the work of the step without what else the machine did (1)')
    p.add_argument('--node', action='store_true',
                   help='measure instead the rate ik_node keeps over DDS with 0 and 20 obstacles')
    p.add_argument('--self-motion', action='store_true',
                   help='measure instead how the Jacobian answer is freed along its self-motion')
    p.set_defaults(func=run)


SELF_MOTION_POSES = 30


def ball_at_the_elbow(chain, q, radius):
    """Return {'ball': shapes}: a sphere whose surface passes through the iiwa14's elbow at q.

    On the outer side (away from the shoulder-wrist line), so that another
    swivel clears it. Shoulder, elbow, wrist: the frames of joints 2, 4, 6.
    """
    frames, _, _ = chain.frames(list(q))
    s, e, w = (np.array(frames[j][9:12]) for j in (1, 3, 5))
    axis = (w - s) / np.linalg.norm(w - s)
    out = (e - s) - ((e - s) @ axis) * axis
    pose = np.eye(4)
    pose[:3, 3] = e + radius * out / np.linalg.norm(out)
    return {'ball': (checked_shape('sphere', (radius,), pose, source='ball'),)}


def self_motion_comparison(seed, count=SELF_MOTION_POSES):
    """Free the Jacobian answer along its self-motion, and by restarts from elsewhere.

    The iiwa14 with the Jacobian solver: ``count`` seeded poses within 0.6
    rad of its home, each with a 3-9 cm ball at the elbow of the answer.
    Returns the cases, how many each way freed, the self-motion's time (median,
    largest, ms) and how often its answer was nearer the reference.
    """
    from ik_node.core.collision.free import closest_pair, FreeSolutions
    chain, model = arm_and_model('iiwa14')
    solver = make_solver(chain, 'jacobian')
    home = np.array(HOME['iiwa14'])
    solver.warm_up(home)
    rng = np.random.default_rng(seed)
    cases, walked, restarted, nearer, times = 0, 0, 0, 0, []
    for _ in range(count):
        q0 = np.clip(home + rng.uniform(-0.6, 0.6, chain.n), chain.lower, chain.upper)
        pose = chain.forward(q0)
        answer = solver.solve(pose, q0)
        radius = float(rng.uniform(0.03, 0.09))
        if not answer.success:
            continue
        model.set_obstacles(ball_at_the_elbow(chain, answer.q, radius))
        guard = CollisionGuard(model, MARGIN)
        if closest_pair(guard, answer.q) is None:
            continue   # the answer keeps the margin already: nothing to free
        free = FreeSolutions(guard, budget_s=1.0)
        cases += 1
        start = _time.perf_counter()
        along = free.along_self_motion(solver, pose, answer.q, None)
        times.append(_time.perf_counter() - start)
        other = free.restarted(solver, pose, q0, None, _time.perf_counter())
        walked += along is not None
        restarted += other is not None
        if along is not None and other is not None:
            nearer += np.linalg.norm(along - q0) < np.linalg.norm(other - q0)
    model.set_obstacles({})
    return {'cases': cases, 'freed_by_self_motion': walked, 'freed_by_restarts': restarted,
            'self_motion_nearer': nearer,
            'self_motion_p50_ms': 1e3 * float(np.median(times)) if times else None,
            'self_motion_max_ms': 1e3 * max(times, default=0.0)}


def run_self_motion(args):
    """Print self_motion_comparison's result (a table, or JSON)."""
    result = self_motion_comparison(args.seed)
    report = {'benchmark': 'collision --self-motion', 'seed': args.seed,
              'machine': machine_info(), **result}
    if args.json:
        print_json(report)
        return 0
    print_title('collision --self-motion', f'seed {args.seed}', report['machine'])
    print(f'the iiwa14, Jacobian solver: {SELF_MOTION_POSES} seeded poses, a 3-9 cm ball at the '
          f"answer's elbow; restarts given 1 s")
    keys = list(result)
    print_table(keys, [[cell(result[k]) for k in keys]])
    return 0


def run(args):
    """Run the benchmark and print tables, or one JSON object with --json."""
    if args.node:
        return run_node(args)
    if args.self_motion:
        return run_self_motion(args)
    rng = np.random.default_rng(args.seed)
    rows, started = [], _time.perf_counter()
    for arm in args.arms:
        chain, model = arm_and_model(arm)
        q0 = np.array(HOME[arm])
        for count in args.counts:
            plain, guarded, searches, lowest, work = [], [], [], math.inf, []
            first = []
            for _ in range(args.runs):
                scene = int(rng.integers(2 ** 31))
                obstacles = random_obstacles(model, q0, np.random.default_rng(scene), count)
                plain.append(fastest([drive(chain, model, q0, np.random.default_rng(scene),
                                            False, obstacles)[0]
                                      for _ in range(args.repeat)]))
                steps, searched, low = drive(chain, model, q0, np.random.default_rng(scene),
                                             True, obstacles, work=work)
                first.append(steps)
                guarded.append(fastest([steps] + [
                    drive(chain, model, q0, np.random.default_rng(scene), True, obstacles)[0]
                    for _ in range(args.repeat - 1)]))
                searches.extend(searched)
                lowest = min(lowest, low)
            ours, theirs = broad_phase_comparison(model, rng, chain)
            libraries = library_comparison(model, rng, chain)
            p, g = np.concatenate(plain), np.concatenate(guarded)
            rows.append({'arm': arm, 'obstacles': count, 'pairs': len(model.pairs),
                         'step_p50_ms': 1e3 * float(np.median(p)),
                         'step_p99_ms': 1e3 * float(np.percentile(p, 99)),
                         'guarded_p50_ms': 1e3 * float(np.median(g)),
                         'guarded_p99_ms': 1e3 * float(np.percentile(g, 99)),
                         'constraint_p50_ms': 1e3 * float(np.median(g) - np.median(p)),
                         'guarded_p99_one_run_ms': 1e3 * float(np.percentile(
                             np.concatenate(first), 99)),
                         'lowest_distance_m': lowest,
                         'queries_mean_p99': '%.1f / %d' % (np.mean([w[0] for w in work]),
                                                            np.percentile([w[0] for w in work],
                                                                          99)),
                         'coal_mean_p99': '%.1f / %d' % (np.mean([w[1] for w in work]),
                                                         np.percentile([w[1] for w in work], 99)),
                         'free_searches': len(searches),
                         'free_search_max_ms': 1e3 * max(searches, default=0.0),
                         'query_ours_ms': 1e3 * ours, 'query_coal_broadphase_ms': 1e3 * theirs,
                         **library_columns(libraries)})
            model.set_obstacles({})
    report = {'benchmark': 'collision', 'seed': args.seed, 'machine': machine_info(),
              'known_answers': known_answers(),
              'margin_m': MARGIN, 'period_s': PERIOD, 'runs': args.runs, 'repeat': args.repeat,
              'wall_s': _time.perf_counter() - started, 'rows': rows}
    if args.json:
        print_json(report)
        return 0
    print_title('collision', f'seed {args.seed}', report['machine'])
    print(f'{args.runs} seeded scenes per row, 4 targets each (two reachable, one inside an '
          f'obstacle, one into the base), 250 Hz steps, margin {MARGIN} m; the limiting step '
          f'timed without and with the guard'
          + (f' (each step: its fastest of {args.repeat} runs; guarded_p99_one_run_ms: the '
             f'first run alone)' if args.repeat > 1 else '')
          + '; lowest distance over 1 kHz samples')
    keys = ['arm', 'obstacles', 'pairs', 'step_p50_ms', 'step_p99_ms', 'guarded_p50_ms',
            'guarded_p99_ms'] + (['guarded_p99_one_run_ms'] if args.repeat > 1 else []) + [
            'constraint_p50_ms', 'queries_mean_p99', 'coal_mean_p99',
            'lowest_distance_m', 'free_searches', 'free_search_max_ms', 'query_ours_ms',
            'query_coal_broadphase_ms']
    print_table(keys, [[cell(r[k]) for k in keys] for r in rows])
    print("every checked pair's exact distance at 100 random configurations, the same shapes "
          "(meshes: the same hulls), each library's default GJK: median per configuration")
    keys = ['arm', 'obstacles', 'pairs', 'all_pairs_coal_ms', 'all_pairs_fcl_ms',
            'fcl_over_coal', 'max_difference_m', 'pairs_compared']
    print_table(keys, [[cell(r.get(k, '-')) for k in keys] for r in rows])
    print('known answers: two solids 2 m apart on the z axis (a cube 2.5 m above a half-space)')
    keys = ['case', 'exact_m', 'coal_m', 'python_fcl_m']
    print_table(keys, [[cell(v) for v in row] for row in report['known_answers']])
    return 0
