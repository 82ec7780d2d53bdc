# SPDX-License-Identifier: Apache-2.0

"""``ik_bench tasks``: what each task meets on an arm with fewer than six joints.

Issue 52: on a 5-DoF hobby arm (the SO-101 of the corpus, written by others)
a target "this position, tool pointing down" asks for six things of five
joints. Two sets of targets at the tip positions of random joints inside
the limits: ``tool down`` (the tool axis, the tip frame's z along the
gripper, pointing straight down, a random turn about it: position and axis
rarely both reachable) and ``own axis`` (the tip's own pose there, turned
about its tool axis by a random angle: position and axis reachable, the
full pose not). Each is solved from mid-limits by JacobianIK
with each goal: ``pose`` (all six: the position traded for an orientation
the arm cannot reach), ``position`` (the orientation free) and ``axis`` (the
position and the tool axis, the turn free). Per goal: the share met (its
own rows within 1e-6 m and 1e-6 rad: ``success``), the position error and
the angle of the tool axis from the target's at the answer (median, p95),
and the solve time (median, p95).
"""

import time
from typing import List

from ik_node.bench import stacked
from ik_node.bench.common import machine_info, print_json, print_table, print_title
from ik_node.bench.corpus import corpus_path
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.description.urdf import chain_from_urdf_string
import numpy as np

ARM = ('so101_new_calib', 'base_link', 'gripper_frame_link')
GOALS = ('pose', 'position', 'axis')


def tool_down(rng: np.random.Generator) -> np.ndarray:
    """Return a rotation (3, 3) whose z points down, turned by a random angle about it."""
    turn = rng.uniform(-np.pi, np.pi)
    c, s = np.cos(turn), np.sin(turn)
    return np.array([[c, -s, 0.0], [s, c, 0.0], [0.0, 0.0, 1.0]]) @ np.diag([1.0, -1.0, -1.0])


def targets(chain, rng: np.random.Generator, count: int, kind: str = 'tool down'
            ) -> List[np.ndarray]:
    """Return ``count`` poses (4, 4) at positions the tip reaches, of one kind (module doc)."""
    out = []
    pad = 0.1 * (chain.upper - chain.lower)
    for _ in range(count):
        target = chain.forward(rng.uniform(chain.lower + pad, chain.upper - pad))
        turn = tool_down(rng)
        if kind == 'tool down':
            target[:3, :3] = turn
        else:   # its own axis, turned about it
            target[:3, :3] = target[:3, :3] @ np.diag([1.0, -1.0, -1.0]) @ turn
        out.append(target)
    return out


def rows(args) -> List[dict]:
    """Solve every target with every goal; one row per goal (module docstring)."""
    name, base, tip = ARM
    with open(corpus_path(name, args.dir), encoding='utf-8') as handle:
        chain = chain_from_urdf_string(handle.read(), base, tip)
    out = []
    for kind in ('tool down', 'own axis'):
        out += _rows_of(chain, kind, targets(chain, np.random.default_rng(args.seed), args.n,
                                             kind), args.backend)
    return out


def _rows_of(chain, kind: str, goals: List[np.ndarray], backend: str) -> List[dict]:
    """Return one row per goal for the targets ``goals`` (4, 4) of one kind."""
    name = ARM[0]
    down = [g[:3, 2] for g in goals]   # the axis each target asks for
    out = []
    for goal in GOALS:
        solver = JacobianIK(chain, goal=goal, backend=backend)
        solver.solve(goals[0], chain.mid_limits())   # the first call loads the kernels
        met, position, tilt, seconds = 0, [], [], []
        for target, axis in zip(goals, down):
            started = time.perf_counter()
            result = solver.solve(target, chain.mid_limits())
            seconds.append(time.perf_counter() - started)
            met += bool(result.success)
            reached = chain.forward(result.q)
            position.append(float(np.linalg.norm(reached[:3, 3] - target[:3, 3])))
            tilt.append(float(np.arccos(np.clip(reached[:3, 2] @ axis, -1.0, 1.0))))
        out.append({'arm': f'{name} ({chain.n} joints)', 'targets': kind, 'goal': goal,
                    'met_pct': 100.0 * met / len(goals),
                    'position_mm_median': 1e3 * float(np.median(position)),
                    'position_mm_p95': 1e3 * float(np.percentile(position, 95)),
                    'axis_deg_median': float(np.degrees(np.median(tilt))),
                    'axis_deg_p95': float(np.degrees(np.percentile(tilt, 95))),
                    'solve_ms_median': 1e3 * float(np.median(seconds)),
                    'solve_ms_p95': 1e3 * float(np.percentile(seconds, 95))})
    return out


def run(args):
    """Print the table (or JSON)."""
    table = stacked.rows(args) if args.two_arms else rows(args)
    report = {'benchmark': 'tasks', 'machine': machine_info(), 'targets': args.n,
              'backend': args.backend, 'two_arms': args.two_arms, 'rows': table}
    if args.json:
        print_json(report)
        return 0
    what = ('pairs of targets for two arms on a torso' if args.two_arms else
            'targets of each kind at reachable positions')
    print_title('tasks', f'{args.n} {what}, solved from mid-limits ({args.backend})',
                report['machine'])
    columns = list(table[0])
    print_table(columns, [[f'{r[c]:.3g}' if isinstance(r[c], float) else str(r[c])
                           for c in columns] for r in table])
    return 0


def add_parser(subparsers):
    """Register the ``tasks`` subcommand."""
    p = subparsers.add_parser('tasks', help='what each task (pose, position, axis) meets on '
                              'the 5-DoF SO-101')
    p.add_argument('-n', type=int, default=1000, help='targets (default 1000)')
    p.add_argument('--backend', choices=('numba', 'numpy'), default='numba',
                   help="JacobianIK's backend (default numba)")
    p.add_argument('--two-arms', action='store_true', help='two arms on a torso (PR2, TIAGo '
                   'dual): stacked against two one-arm solves (ik_node.bench.stacked)')
    p.add_argument('--dir', default=None, help='folder of the corpus (default: the source '
                   "tree's test/urdf_corpus/external)")
    p.set_defaults(func=run)
