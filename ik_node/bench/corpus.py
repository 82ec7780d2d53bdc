# SPDX-License-Identifier: Apache-2.0

"""``ik_bench corpus``: robot descriptions written by others, as the node meets them.

The descriptions of test/urdf_corpus/external (unmodified URDF from the PyPI
package example-robot-data and ROS-Industrial's kuka_experimental; its README
there names each source and licence)
on the base/tip pairs a user of each robot would ask for (``CORPUS``, which
test/ros/test_corpus.py runs too). Per pair: the joints, the solver chosen and
why, the links usable as target frames, the median time to load the model
(parse, chain, link frames, solver), the seconds from starting the node
process to its first joint_states, and how many random reachable targets
(tip poses of random joints within 0.4 rad of a random start, inside the
limits) the solver reaches from that start within its budget.
"""

import os
import re
import time
from typing import List, Optional

from ik_node.bench.common import machine_info, print_json, print_table, print_title
from ik_node.core.ik.factory import make_solver
from ik_node.description.urdf import chain_from_urdf_string, link_frames
import numpy as np

# (file, base_link, tip_link): every chain a user of that robot would ask for.
CORPUS = [
    ('panda_hand', 'panda_link0', 'panda_hand'),
    ('panda_hand', 'panda_link0', 'panda_link8'),
    ('pr2', 'base_footprint', 'r_gripper_tool_frame'),        # torso (prismatic) + arm
    ('pr2', 'torso_lift_link', 'l_gripper_tool_frame'),       # two continuous joints
    ('pr2', 'torso_lift_link', 'r_gripper_l_finger_tip_link'),  # a mimic in the chain
    ('baxter', 'base', 'left_gripper'),
    ('baxter', 'base', 'right_gripper'),
    ('tiago_dual', 'base_footprint', 'hand_left_tool_link'),
    ('tiago_dual', 'torso_lift_link', 'hand_right_tool_link'),
    ('ur5_gripper', 'world', 'tool0'),
    ('ur5_gripper', 'base_link', 'ee_link'),
    ('kinova', 'base', 'j2s6s200_end_effector'),
    ('xarm7', 'world', 'link_eef'),
    ('xarm7', 'link_base', 'link7'),
    ('kuka_iiwa14_r820', 'base_link', 'tool0'),   # joints A2, A4 off by 0.436 mm: near-SRS
    ('so101_new_calib', 'base_link', 'gripper_frame_link'),   # a 5-DoF hobby arm
    ('g1_29dof_rev_1_0', 'pelvis', 'left_rubber_hand'),   # a humanoid: a 3-joint waist + arm
    ('g1_29dof_rev_1_0', 'torso_link', 'right_rubber_hand'),
]
# A target counts as reached within these (m, rad).
REACHED = (1e-4, 1e-3)


def corpus_dir() -> str:
    """Return the corpus folder: the source tree's test/urdf_corpus/external, else the cwd's.

    (An installed ik_node has no test folder: run from the checkout, or pass --dir.)
    """
    root = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    for base in (root, os.getcwd()):
        folder = os.path.join(base, 'test', 'urdf_corpus', 'external')
        if os.path.isdir(folder):
            return folder
    raise FileNotFoundError('ik_bench corpus: no test/urdf_corpus/external in the source tree '
                            'or the current directory: run it from the checkout, or pass --dir')


def corpus_path(name: str, folder: Optional[str] = None) -> str:
    """Return the path of one description of the corpus."""
    return os.path.join(folder or corpus_dir(), f'{name}.urdf')


def load(text: str, base: str, tip: str):
    """Load what the node loads at start-up: (chain, link frames, solver)."""
    chain = chain_from_urdf_string(text, base, tip)
    frames = link_frames(text, chain)
    return chain, frames, make_solver(chain, 'auto', backend='numpy')


def reached(chain, solver, rng, targets: int) -> int:
    """Count random reachable targets the solver reaches from a nearby start (chain FK)."""
    lo = np.where(np.isfinite(chain.lower), chain.lower, -np.pi)
    hi = np.where(np.isfinite(chain.upper), chain.upper, np.pi)
    count = 0
    for _ in range(targets):
        start = rng.uniform(lo + 0.2 * (hi - lo), hi - 0.2 * (hi - lo))
        goal = np.clip(start + rng.uniform(-0.4, 0.4, chain.n), lo, hi)
        target = chain.forward(goal)
        result = solver.solve(target, start)
        if result.success and result.position_error <= REACHED[0] and \
                result.orientation_error <= REACHED[1]:
            count += 1
    return count


def node_start_s(path: str, base: str, tip: str, timeout_s: float) -> Optional[float]:
    """Seconds from starting an ik_node process on the description to its first joint_states."""
    from ik_node.ros.process import free_domain, NodeProcess
    from sensor_msgs.msg import JointState
    seen = {}
    start = time.monotonic()
    proc = NodeProcess(['-p', f'urdf_path:={path}', '-p', f'base_link:={base}', '-p',
                        f'tip_link:={tip}', '--log-level', 'error'], free_domain(),
                       'ik_corpus_client')
    proc.node.create_subscription(
        JointState, 'joint_states', lambda msg: seen.setdefault('first', time.monotonic() - start),
        10)
    try:
        proc.wait_for(lambda: 'first' in seen, timeout_s, 'the first joint_states')
    finally:
        proc.close()
    return seen.get('first')


def rows(args) -> List[dict]:
    """Measure every pair of the corpus (module docstring)."""
    out = []
    rng = np.random.default_rng(args.seed)
    for name, base, tip in CORPUS:
        path = corpus_path(name, args.dir)
        with open(path, encoding='utf-8') as handle:
            text = handle.read()
        times = []
        for _ in range(args.repeats):
            begin = time.perf_counter()
            chain, frames, solver = load(text, base, tip)
            times.append(time.perf_counter() - begin)
        row = {'robot': name, 'chain': f'{base} -> {tip}', 'joints': chain.n,
               'mimics': len(chain.mimics), 'solver': solver.name,
               'why': _short(solver.model_note),
               'target_frames': f'{len(frames.names())} of '
                                f'{len(frames.names()) + len(frames.refused())}',
               'load_ms_median': 1e3 * float(np.median(times)),
               'reached': f'{reached(chain, solver, rng, args.targets)} / {args.targets}'}
        if not args.no_node:
            row['node_start_s'] = node_start_s(path, base, tip, args.timeout)
        out.append(row)
    return out


def run(args):
    """Print the corpus table (or JSON)."""
    table = rows(args)
    report = {'benchmark': 'corpus', 'machine': machine_info(), 'targets': args.targets,
              'rows': table}
    if args.json:
        print_json(report)
        return 0
    print_title('corpus', f'{len(table)} base/tip pairs of {len({r["robot"] for r in table})} '
                'descriptions by others; solver on the numpy backend', report['machine'])
    columns = ['robot', 'chain', 'joints', 'mimics', 'solver', 'why', 'target_frames',
               'load_ms_median', 'reached'] + ([] if args.no_node else ['node_start_s'])
    print_table(columns, [[_fmt(r[c]) for c in columns] for r in table])
    return 0


def _short(note: str) -> str:
    """Return the first reason of a solver's model note, in a few words."""
    note = note.removeprefix('not solved in closed form: ').split(';')[0]
    return re.sub(r' \((tolerance|the wrist point)[^)]*\)|: closed form in q7', '', note)


def _fmt(value):
    return f'{value:.3g}' if isinstance(value, float) else str(value)


def add_parser(subparsers):
    """Register the ``corpus`` subcommand."""
    p = subparsers.add_parser('corpus', help='robot descriptions by others: chains, solvers, '
                              'target frames, load and start-up times, targets reached')
    p.add_argument('--dir', default=None, help='folder of the descriptions (default: the '
                   "source tree's test/urdf_corpus/external)")
    p.add_argument('--targets', type=int, default=50, help='random targets per pair')
    p.add_argument('--repeats', type=int, default=5, help='model loads per pair (median)')
    p.add_argument('--no-node', action='store_true', help='skip the node start-up times')
    p.add_argument('--timeout', type=float, default=120.0, help='bound of each node start, s')
    p.set_defaults(func=run)
