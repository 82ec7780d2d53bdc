# SPDX-License-Identifier: Apache-2.0

"""``ik_bench ik``: success rate and solve time of ik_node's IK on URDF arms.

Joint vectors are drawn uniformly within limits (seeded), targets computed by
forward kinematics, and each target solved from the mid-limits seed and from
a random seed: by JacobianIK, and by the solver the node's ``solver: auto``
picks where that is a closed form (the seed is then its reference). A solve
counts as a success when the chain's forward kinematics (pinned to an
independent FK by the tests) puts the tip within
1e-5 m and 1e-4 rad of the target, with every joint within its limits; the
peers' answers are judged the same way.
"""

import importlib.util
import os
import time

from ik_node.bench.common import (format_duration, machine_info, print_json, print_table)
from ik_node.core import rotations as rot
from ik_node.core.ik.factory import make_solver
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.core.model.chain import Chain
from ik_node.core.poses import pose_error
from ik_node.description.urdf import bundled_urdf
import numpy as np

SUCCESS_POSITION_M = 1e-5
SUCCESS_ORIENTATION_RAD = 1e-4

BUNDLED = {
    'iiwa14': ('iiwa14.urdf', 'iiwa_link_0', 'tool0'),
    'ur5e': ('ur5e.urdf', 'base_link', 'tool0'),
    'panda': ('panda.urdf', 'panda_link0', 'tool0'),
    'xarm7': ('xarm7.urdf', 'link_base', 'tool0'),
}


def _random_q(chain, rng):
    lo = np.where(np.isfinite(chain.lower), chain.lower, -np.pi)
    hi = np.where(np.isfinite(chain.upper), chain.upper, np.pi)
    return rng.uniform(lo, hi)


def run_solver(chain, solve, targets, seeds):
    """Solve every target from its seed with ``solve(T, seed) -> (q, seconds, its, restarts)``."""
    times, iterations, restarts, answers, ok = [], [], [], [], 0
    for target, seed in zip(targets, seeds):  # timed back to back, checked afterwards
        q, seconds, its, rs = solve(target, seed)
        times.append(seconds)
        iterations.append(its)
        restarts.append(rs)
        answers.append(q)
    for target, q in zip(targets, answers):
        if q is None or not chain.within_limits(q):
            continue
        pos, ang = pose_error(target, chain.forward(q))
        ok += pos < SUCCESS_POSITION_M and ang < SUCCESS_ORIENTATION_RAD
    t = np.array(times)
    return {
        'n': len(targets), 'success_rate': ok / len(targets),
        'median_s': float(np.median(t)), 'p95_s': float(np.percentile(t, 95)),
        'max_s': float(np.max(t)),
        'iterations_median': float(np.median(iterations)),
        'iterations_p95': float(np.percentile(iterations, 95)),
        'restarts_mean': float(np.mean(restarts)), 'restarts_max': int(np.max(restarts)),
    }


def _ours(chain, backend, timeout_s=None):
    solver = JacobianIK(chain, backend=backend, timeout_s=timeout_s)
    solver.solve(chain.forward(chain.mid_limits()), chain.mid_limits())  # compile / warm up
    return solver.backend, _seeded(solver)


def _seeded(solver):
    """``solve(T, seed) -> (q, seconds, iterations, restarts)`` of an ik_node solver."""
    def solve(target, seed):
        res = solver.solve(target, seed)
        return res.q, res.elapsed_s, res.iterations, res.restarts
    return solve


def _auto(chain, backend):
    """(label, solve) of make_solver('auto') when it is a closed form, else None."""
    solver = make_solver(chain, 'auto', backend=backend)
    if isinstance(solver, JacobianIK):
        return None
    solver.warm_up(chain.mid_limits())  # every path compiled before the timing
    return f'auto: {type(solver).__name__} ({solver.backend})', _seeded(solver)


def _peers(urdf_path, chain):
    """Yield (name, solve) for the optional peer solvers that are installed."""
    if importlib.util.find_spec('pytracik') is not None:  # pragma: no cover - optional
        import pytracik
        from trac_ik.trac_ik import TracIK
        tracik = TracIK(base_link_name=chain.base_link, tip_link_name=chain.tip_link,
                        urdf_path=urdf_path, timeout=0.005, epsilon=1e-5, solver_type='Speed')

        def solve_tracik(target, seed):
            # The C++ entry point, with the quaternion computed outside the
            # timing (the Python wrapper spends ~30 us on an eigendecomposition).
            x, y, z = target[:3, 3]
            qx, qy, qz, qw = rot.matrix_to_quaternion(target[:3, :3])
            start = time.perf_counter()
            r = pytracik.ik(tracik._ik_solver, np.asarray(seed, dtype=float), x, y, z,
                            qx, qy, qz, qw)
            elapsed = time.perf_counter() - start
            return (np.asarray(r[1:]) if r[0] >= 0 else None), elapsed, 0, 0
        yield 'TRAC-IK (pytracik, Speed, 5 ms)', solve_tracik
    if importlib.util.find_spec('roboticstoolbox') is not None:  # pragma: no cover
        import roboticstoolbox as rtb
        robot = rtb.Robot.URDF(os.path.abspath(urdf_path))

        def solve_rtb(target, seed):
            start = time.perf_counter()
            sol = robot.ik_LM(target, q0=seed, end=chain.tip_link, start=chain.base_link,
                              ilimit=30, slimit=100, tol=1e-10, joint_limits=True)
            elapsed = time.perf_counter() - start
            return (np.asarray(sol.q) if sol.success else None), elapsed, \
                int(sol.iterations), int(sol.searches)
        yield 'Robotics Toolbox ik_LM (C++)', solve_rtb


def run(args):
    """Run the benchmark on the given URDF or on every bundled arm."""
    if args.urdf:
        arms = {os.path.basename(args.urdf): (args.urdf, args.base, args.tip)}
    else:
        arms = {name: (bundled_urdf(f), b, t) for name, (f, b, t) in BUNDLED.items()
                if name in args.arms}
    report = {'benchmark': 'ik', 'n': args.n, 'seed': args.seed, 'machine': machine_info(),
              'success_position_m': SUCCESS_POSITION_M,
              'success_orientation_rad': SUCCESS_ORIENTATION_RAD, 'results': []}
    missing = []
    for name, (path, base, tip) in arms.items():
        chain = Chain.from_urdf_file(path, base, tip)
        rng = np.random.default_rng(args.seed)
        targets = [chain.forward(_random_q(chain, rng)) for _ in range(args.n)]
        seeds = {'mid-limits': [chain.mid_limits()] * args.n,
                 'random': [_random_q(chain, rng) for _ in range(args.n)]}
        solvers = [_ours(chain, b, args.timeout) for b in args.backend]
        if 'auto' in args.solver:
            solvers += [row for row in (_auto(chain, b) for b in args.backend) if row]
        if args.compare:
            found = list(_peers(path, chain))
            if not found:
                missing = ['pytracik', 'roboticstoolbox-python']
            solvers += found
        for label, solve in solvers:
            for mode in args.seed_mode:
                row = run_solver(chain, solve, targets, seeds[mode])
                row.update({'arm': name, 'dof': chain.n, 'solver': label, 'seed_mode': mode})
                report['results'].append(row)
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f'ik_bench ik  (n={args.n} per row, seed {args.seed}; success: < 1e-5 m and < 1e-4 '
          f"rad by independent FK, within limits; {info['cpu']}, {info['cores']} cores; "
          f"commit {info['commit']})")
    rows = [(r['arm'], r['dof'], _label(r['solver']), r['seed_mode'],
             f"{100 * r['success_rate']:.2f} %",
             format_duration(r['median_s']), format_duration(r['p95_s']),
             format_duration(r['max_s']), f"{r['iterations_median']:.0f}",
             f"{r['restarts_mean']:.2f}") for r in report['results']]
    print_table(['arm', 'DoF', 'solver', 'seed', 'success', 'median', 'p95', 'max',
                 'iterations (median)', 'restarts (mean)'], rows)
    if missing:
        print(f"--compare: none of {', '.join(missing)} is installed; peers not run.")
    return 0


def _label(solver):
    """Table label of a solver row: ik_node's own rows say so."""
    if solver in ('numba', 'numpy'):
        return f'ik_node JacobianIK {solver}'
    return f'ik_node {solver}' if solver.startswith('auto:') else solver


def add_parser(subparsers):
    """Register the ``ik`` subcommand."""
    p = subparsers.add_parser('ik', help="ik_node's IK success rate and time on URDF arms")
    p.add_argument('--urdf', help='URDF file (default: the bundled arms of --arms)')
    p.add_argument('--arms', nargs='+', choices=sorted(BUNDLED), default=sorted(BUNDLED),
                   help='bundled arms to run (default all)')
    p.add_argument('--base', help='base link (with --urdf)')
    p.add_argument('--tip', help='tip link (with --urdf)')
    p.add_argument('-n', type=int, default=10_000, help='targets per arm (default 10000)')
    p.add_argument('--seed-mode', nargs='+', choices=['mid-limits', 'random'],
                   default=['mid-limits', 'random'], help='where each solve starts')
    p.add_argument('--backend', nargs='+', choices=['numba', 'numpy'], default=['numba'],
                   help='JacobianIK backends to run (default numba)')
    p.add_argument('--solver', nargs='+', choices=['jacobian', 'auto'],
                   default=['jacobian', 'auto'],
                   help="ik_node's rows: JacobianIK always; 'auto' adds the node's closed-form "
                        'solver where the arm has one (default both)')
    p.add_argument('--timeout', type=float, default=None, metavar='SECONDS',
                   help="JacobianIK's timeout_s per solve (default: the solver's own, "
                        'which depends on the backend)')
    p.add_argument('--compare', action='store_true',
                   help='also run TRAC-IK (pytracik) / Robotics Toolbox where installed')
    p.set_defaults(func=_checked)


def _checked(args):
    if args.urdf and not (args.base and args.tip):
        raise SystemExit('ik_bench ik: --urdf needs --base and --tip')
    if args.n < 1:
        raise SystemExit('ik_bench ik: -n must be at least 1')
    if args.timeout is not None and not args.timeout > 0:
        raise SystemExit('ik_bench ik: --timeout must be a positive number of seconds')
    return run(args)
