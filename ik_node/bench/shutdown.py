# SPDX-License-Identifier: Apache-2.0

"""``ik_bench shutdown``: stop the node while it moves, then restart it on the same domain.

For each run and each signal (SIGINT, SIGTERM): the node (iiwa14) is sent a
target and signalled 0.3 s later, mid-motion. Measured: the time from the
signal to the process's exit and its exit code; the Fast DDS files the run
left in /dev/shm (node and client both closed: new files no live process
uses); then a new node on the same
ROS domain: the time until it publishes joint_states and has matched the
client's target publisher, and whether it then reaches a target.
"""

import os
import signal
import time

from ik_node.bench.common import cell, machine_info, print_json, print_table, print_title
from ik_node.bench.session import MonitoredNode
from ik_node.ros.process import free_domain
import numpy as np

SIGNALS = {'SIGINT': signal.SIGINT, 'SIGTERM': signal.SIGTERM}


def _shm_files() -> set:
    try:
        return set(os.listdir('/dev/shm'))
    except OSError:
        return set()


def _shm_in_use() -> set:
    """Names of the /dev/shm files some live process maps or holds open (from /proc).

    Other processes on the machine (parallel test workers, another ROS graph)
    create and remove shared-memory files while a run is measured: a new file
    is left behind by the stopped node only when no live process uses it.
    """
    used = set()
    for pid in filter(str.isdigit, os.listdir('/proc')):
        try:
            with open(f'/proc/{pid}/maps') as maps:
                used.update(line.split('/dev/shm/', 1)[1].split()[0]
                            for line in maps if '/dev/shm/' in line)
            for fd in os.listdir(f'/proc/{pid}/fd'):
                target = os.readlink(f'/proc/{pid}/fd/{fd}')
                if target.startswith('/dev/shm/'):
                    used.add(target[len('/dev/shm/'):].split()[0])
        except OSError:
            continue
    return used


def stop_once(sig: int, domain: int, rng: np.random.Generator) -> dict:
    """Signal a moving node; restart on ``domain``; return the measurements of this run."""
    before = _shm_files()
    mon = MonitoredNode(domain, {}, 'ik_shutdown_client')
    try:
        mon.send_pose(mon.pose_near_start(rng))
        mon.spin(0.3)
        start = time.monotonic()
        mon.proc.send_signal(sig)
        code = mon.proc.wait(timeout=10.0)
        stop_s = time.monotonic() - start
    finally:
        mon.close()
    left = sorted(_shm_files() - before - _shm_in_use())
    start = time.monotonic()
    again = MonitoredNode(domain, {}, 'ik_shutdown_client')
    try:
        ready_s = time.monotonic() - start
        goal = again.pose_near_start(rng)
        again.send_pose(goal)
        reached = again.reaches(goal, 30.0) is not None
    finally:
        again_code = again.close()
    return {'exit_code': code, 'stop_s': stop_s, 'shm_files_left': left,
            'restart_ready_s': ready_s, 'restart_reached': reached,
            'restart_exit_code': again_code}


def run(args):
    """Stop and restart ``--runs`` times per signal; print a table (or JSON)."""
    rng = np.random.default_rng(args.seed)
    domain = free_domain()
    report = {'benchmark': 'shutdown', 'machine': machine_info(), 'runs': args.runs}
    ok = True
    for name, sig in SIGNALS.items():
        runs = [stop_once(sig, domain, rng) for _ in range(args.runs)]
        stops = np.array([r['stop_s'] for r in runs])
        summary = {
            'exit_codes': sorted({r['exit_code'] for r in runs}),
            'stop_median_s': float(np.median(stops)), 'stop_max_s': float(stops.max()),
            'shm_files_left': sum(len(r['shm_files_left']) for r in runs),
            'restart_ready_median_s': float(np.median([r['restart_ready_s'] for r in runs])),
            'restarts_reaching_a_target': sum(r['restart_reached'] for r in runs),
        }
        report[name] = summary
        ok &= (summary['exit_codes'] == [0] and summary['stop_max_s'] <= 1.0
               and summary['shm_files_left'] == 0
               and summary['restarts_reaching_a_target'] == args.runs
               and all(r['restart_exit_code'] == 0 for r in runs))
    report['ok'] = bool(ok)
    if args.json:
        print_json(report)
    else:
        print_title('shutdown', f'{args.runs} runs per signal', report['machine'])
        keys = list(report['SIGINT'])
        print_table(['signal', *keys],
                    [[name, *(cell(v) for v in report[name].values())] for name in SIGNALS])
        print(f"ok: {report['ok']}")
    return 0 if ok else 1


def add_parser(subparsers):
    """Register the ``shutdown`` subcommand."""
    p = subparsers.add_parser('shutdown', help='stop the moving node by signal, restart it')
    p.add_argument('--runs', type=int, default=5, help='runs per signal')
    p.set_defaults(func=run)
