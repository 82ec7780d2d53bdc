# SPDX-License-Identifier: Apache-2.0

"""``ik_bench arrival --two-arms``: two arms held by the margin, and whether they get round.

Issue 52's recovery. The bundled iiwa14_dual (config/iiwa14_dual.yaml: two
iiwa14 on a torso lift ten times dearer, 10 mm margin, its floor) and, per
scene, a plate across the left hand's way (:func:`plate_scene`: the hand
sent 0.2-0.4 m in a random direction, orientation kept; a 12 x 12 x 2 cm
plate halfway, across the way; the arms start clear of it and the target's
nearest stacked solution keeps 3 cm). The motion session runs on simulated
time at 100 Hz; the worker answers each question when as much simulated
time has passed as the answer took (bench_workers.LaggedWorker), as the node's
worker thread would. Per scene: arrived (both hands within 0.1 mm and
1 mrad of their targets, at rest) within ``--timeout``, the time to
arrive, the questions answered (a free solution and a path), the farthest
the right hand (which only holds) left its pose, the lowest distance of
any checked pair at the commands, and each tick's wall-clock cost.
``--planner none``: a worker whose planner finds nothing (the local steps,
the rest and the free solution only), to show what the path adds.
"""

import time
from typing import List, Optional, Tuple

from ik_node.bench.bench_workers import LaggedWorker, NoPlanner
from ik_node.bench.common import cell, machine_info, print_json, print_table, print_title
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.collision.planner import JointPlanner
from ik_node.core.collision.shapes import checked_shape, Shape
from ik_node.core.ik.stacked import EndEffector, StackedIK
from ik_node.core.model.frames import UnionFrames
from ik_node.core.motion.arrival import arrived
from ik_node.core.motion.config import TrackerConfig
from ik_node.core.motion.group import GroupTracker
from ik_node.core.motion.session import MotionSession
from ik_node.core.poses import pose_error
from ik_node.description.geometry import collision_model
from ik_node.description.urdf import bundled_urdf, chain_from_urdf_string, link_frames
import numpy as np

PERIOD = 0.01
MARGIN_M = 0.01
TORSO_WEIGHT = 0.1
START = [0.15] + [0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0] * 2   # config/iiwa14_dual.yaml's
FLOOR = checked_shape('halfspace', (), np.eye(4), source='bench')
# A scene is drawn again up to this many times until it is valid (plate_scene).
DRAWS = 60


class TwoArms:
    """The bundled two-arm robot: chains, stacked solver, collision model (built once)."""

    def __init__(self):
        """Load urdf/iiwa14_dual.urdf and build its union's collision model at the start."""
        with open(bundled_urdf('iiwa14_dual.urdf'), encoding='utf-8') as handle:
            xml = handle.read()
        self.chains = [chain_from_urdf_string(xml, 'base', tip)
                       for tip in ('left_tool0', 'right_tool0')]
        self.q0 = np.array(START)
        self.stacked = self.solver()
        union = self.stacked.union
        frames = UnionFrames([link_frames(xml, c) for c in self.chains], union.columns)
        self.model = collision_model(xml, union, frames, home=self.q0)[0]

    def solver(self) -> StackedIK:
        """Return a StackedIK of both hands, the torso TORSO_WEIGHT (compiled kernels)."""
        stacked = StackedIK([EndEffector('left', self.chains[0]),
                             EndEffector('right', self.chains[1])],
                            joint_weights={'torso_lift_joint': TORSO_WEIGHT}, backend='numba')
        stacked.warm_up()
        return stacked


def box(centre, size) -> Shape:
    """Return a box obstacle (sizes m) at ``centre`` (3,), base frame, axes along the base's."""
    pose = np.eye(4)
    pose[:3, 3] = centre
    return checked_shape('box', tuple(size), pose, source='bench')


def plate_scene(robot: TwoArms, rng: np.random.Generator) -> Tuple[np.ndarray, Shape]:
    """Return (the left hand's target (4, 4), the plate) of a valid scene (module docstring).

    Raises:
        RuntimeError: no valid scene in DRAWS draws.

    """
    left, right = robot.stacked.forward(robot.q0)
    checked = robot.model.copy()
    for _ in range(DRAWS):
        way = rng.normal(size=3)
        way *= rng.uniform(0.2, 0.4) / np.linalg.norm(way)
        size = [0.12, 0.12, 0.12]
        size[int(np.argmax(np.abs(way)))] = 0.02
        plate = box(left[:3, 3] + 0.5 * way, size)
        checked.set_obstacles({'plate': (plate,), 'floor': (FLOOR,)})
        if checked.distances(robot.q0, 0.02).lowest < 0.02:
            continue
        target = left.copy()
        target[:3, 3] += way
        result = robot.stacked.solve([target, right], q_reference=robot.q0)
        if result.success and checked.distances(result.q, 0.03).lowest >= 0.03:
            return target, plate
    raise RuntimeError(f'no valid plate scene in {DRAWS} draws')


class TimedWorker(LaggedWorker):
    """A LaggedWorker that adds up the wall-clock time of its answers (s: ``spent``)."""

    def __init__(self, planner, now):
        """As LaggedWorker; nothing spent yet."""
        super().__init__(planner, now)
        self.spent = 0.0

    def ask(self, question) -> None:
        """Answer (LaggedWorker.ask), timed."""
        started = time.perf_counter()
        super().ask(question)
        self.spent += time.perf_counter() - started


def run_scene(robot: TwoArms, target, plate: Shape, planner, timeout: float) -> dict:
    """Drive one scene on simulated time; return what module docstring lists.

    A tick's cost leaves out the answer the worker gave inside it (the node's
    worker thread answers beside the ticks).
    """
    clock = {'now': 0.0}
    worker = TimedWorker(planner, lambda: clock['now'])
    tracker = GroupTracker(robot.solver(), TrackerConfig(max_linear_speed=0.4,
                                                         max_angular_speed=1.0),
                           robot.q0, 0.0, worker=worker)
    world = robot.model.copy()
    world.set_obstacles({'plate': (plate,), 'floor': (FLOOR,)})
    tracker.guard = CollisionGuard(world.copy(), MARGIN_M)
    session = MotionSession(tracker, PERIOD, 2 * PERIOD, 500.0)
    left, right = robot.stacked.forward(robot.q0)
    session.target_of('left', 0.0, target)
    ticks: List[float] = []
    lowest, drift, took = np.inf, 0.0, None
    while clock['now'] < timeout:
        clock['now'] += PERIOD
        started, spent = time.perf_counter(), worker.spent
        session.tick(clock['now'])
        ticks.append(time.perf_counter() - started - (worker.spent - spent))
        q = session.q
        lowest = min(lowest, float(world.distances(q, MARGIN_M + 0.05).lowest))
        tips = robot.stacked.forward(q)
        drift = max(drift, pose_error(tips[1], right)[0])
        if not np.any(tracker.v) and arrived(*pose_error(tips[0], target)) and \
                arrived(*pose_error(tips[1], right)):
            took = clock['now']
            break
    return {'arrived': took is not None, 'time_s': took, 'answers': worker.engine.answered,
            'right_moved_m': drift, 'lowest_m': lowest, 'ticks': ticks,
            'note': tracker.recovery.no_path}


def rows(args) -> List[dict]:
    """Return one row per planner: the scenes' outcomes and the ticks' costs."""
    robot = TwoArms()
    rng = np.random.default_rng(args.seed)
    scenes = [plate_scene(robot, rng) for _ in range(args.scenes)]
    # The process's first ticks load every kernel the session calls (a node loads
    # them before its first tick: warm.compile_kernels): not timed.
    run_scene(robot, *scenes[0], JointPlanner('own'), 0.3)
    out = []
    for name in args.planner:
        planner = NoPlanner() if name == 'none' else JointPlanner(name)
        runs = [run_scene(robot, target, plate, planner, args.timeout)
                for target, plate in scenes]
        ticks = np.array([t for r in runs for t in r['ticks']]) * 1e3
        times = [r['time_s'] for r in runs if r['arrived']]
        out.append({
            'planner': planner.name, 'scenes': len(runs),
            'arrived': f"{sum(r['arrived'] for r in runs)}/{len(runs)}",
            'with_a_plan': sum(r['arrived'] and r['answers'] > 0 for r in runs),
            'time_p50_s': float(np.median(times)) if times else None,
            'time_max_s': max(times) if times else None,
            'right_moved_max_mm': 1e3 * max(r['right_moved_m'] for r in runs),
            'lowest_mm': 1e3 * min(r['lowest_m'] for r in runs),
            'tick_p50_ms': float(np.percentile(ticks, 50)),
            'tick_p99_ms': float(np.percentile(ticks, 99)),
            'tick_max_ms': float(ticks.max()),
        })
    return out


def run(args, load: Optional[str] = None):
    """Print the table (or JSON)."""
    started = time.perf_counter()
    table = rows(args)
    report = {'benchmark': 'arrival --two-arms', 'seed': args.seed, 'machine': machine_info(),
              'load_average': load, 'scenes': args.scenes, 'timeout_s': args.timeout,
              'wall_s': time.perf_counter() - started, 'rows': table}
    if args.json:
        print_json(report)
        return 0
    print_title('arrival --two-arms', f'seed {args.seed}', report['machine'])
    print(f"iiwa14_dual, {args.scenes} plates across the left hand's way, simulated 100 Hz, "
          f'worker answers after their compute time, {args.timeout:g} s per scene; '
          f"load average {load}; a tick's cost leaves out the answers (a thread's in the node)")
    keys = list(table[0])
    print_table(keys, [[cell(r[k]) for k in keys] for r in table])
    return 0
