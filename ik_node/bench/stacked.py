# SPDX-License-Identifier: Apache-2.0

"""``ik_bench tasks --two-arms``: two arms on a torso solved at once, against one arm at a time.

Issue 52: robots written by others with two 7-DoF arms on a torso
(test/urdf_corpus/external): PR2 and TIAGo dual (a prismatic torso), the
Unitree G1 humanoid (a waist of three revolute joints). Pairs of targets at
the tip poses of random joints inside the limits (the torso anywhere in its
range), solved from mid-limits:

- ``stacked``: StackedIK, both arms and the torso at once;
- ``stacked, torso weight 0.01``: the torso's joints 100 times dearer to move;
- ``two 7-DoF solves``: JacobianIK on each arm from the torso link, the torso
  where the seed has it (what two one-arm solvers can do).

Per row: the share of pairs with both poses met (1e-6 m and rad), the solve
time (median, p95; the two solves summed), and how far the torso moved from
the seed (median of its joints' largest change: mm for a prismatic torso,
mrad for a waist).
"""

import time
from typing import List

from ik_node.bench.corpus import corpus_path
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.core.ik.stacked import EndEffector, StackedIK
from ik_node.description.urdf import chain_from_urdf_string
import numpy as np

# (file, base, torso link, left tip, right tip)
ROBOTS = (('pr2', 'base_footprint', 'torso_lift_link', 'l_gripper_tool_frame',
           'r_gripper_tool_frame'),
          ('tiago_dual', 'base_footprint', 'torso_lift_link', 'hand_left_tool_link',
           'hand_right_tool_link'),
          ('g1_29dof_rev_1_0', 'pelvis', 'torso_link', 'left_rubber_hand', 'right_rubber_hand'))


def rows(args) -> List[dict]:
    """One row per robot and way of solving (module docstring)."""
    out = []
    for name, base, torso, left, right in ROBOTS:
        with open(corpus_path(name, args.dir), encoding='utf-8') as handle:
            xml = handle.read()
        chains = [chain_from_urdf_string(xml, base, tip) for tip in (left, right)]
        arms = [chain_from_urdf_string(xml, torso, tip) for tip in (left, right)]
        lift = chain_from_urdf_string(xml, base, torso)
        both = StackedIK([EndEffector('left', chains[0]), EndEffector('right', chains[1])],
                         backend=args.backend)
        union = both.union
        torso_joints = union.shared()
        light = StackedIK([EndEffector('left', chains[0]), EndEffector('right', chains[1])],
                          joint_weights=dict.fromkeys(torso_joints, 0.01), backend=args.backend)
        rng = np.random.default_rng(args.seed)
        lo = np.where(np.isfinite(union.lower), union.lower, -np.pi)
        hi = np.where(np.isfinite(union.upper), union.upper, np.pi)
        pad = 0.1 * (hi - lo)
        pairs = [both.forward(rng.uniform(lo + pad, hi - pad)) for _ in range(args.n)]
        seed = union.mid_limits()
        t = [union.names.index(j) for j in torso_joints]
        label = f'{name} (2 x 7 + {len(t)})'
        for way, solver in (('stacked', both), ('stacked, torso weight 0.01', light)):
            solver.solve(pairs[0], seed)   # the first call loads the kernels
            met, seconds, moved = 0, [], []
            for pair in pairs:
                started = time.perf_counter()
                result = solver.solve(pair, seed)
                seconds.append(time.perf_counter() - started)
                met += bool(result.success)
                moved.append(float(np.max(np.abs(result.q[t] - seed[t]))))
            out.append(_row(label, way, met, len(pairs), seconds, moved))
        out.append(_two_solves(label, arms, lift, union, pairs, seed, args.backend))
    return out


def _two_solves(label, arms, lift, union, pairs, seed, backend) -> dict:
    """Solve each arm apart from the torso link, the torso held at the seed's."""
    solvers = [JacobianIK(arm, backend=backend) for arm in arms]
    torso_pose = lift.forward(seed[[union.names.index(n) for n in lift.joint_names]])
    inverse = np.linalg.inv(torso_pose)
    starts = [seed[[union.names.index(n) for n in arm.joint_names]] for arm in arms]
    for solver, start in zip(solvers, starts):
        solver.solve(solver.chain.forward(start), start)   # the kernels load
    met, seconds = 0, []
    for pair in pairs:
        started = time.perf_counter()
        ok = all(solver.solve(inverse @ target, start).success
                 for solver, target, start in zip(solvers, pair, starts))
        seconds.append(time.perf_counter() - started)
        met += ok
    return _row(label, 'two 7-DoF solves, torso held', met, len(pairs), seconds,
                [0.0] * len(pairs))


def _row(label: str, way: str, met: int, count: int, seconds, moved) -> dict:
    return {'robot': label, 'solver': way, 'both_met_pct': 100.0 * met / count,
            'solve_ms_median': 1e3 * float(np.median(seconds)),
            'solve_ms_p95': 1e3 * float(np.percentile(seconds, 95)),
            'torso_moved_median_x1e3': 1e3 * float(np.median(moved))}
