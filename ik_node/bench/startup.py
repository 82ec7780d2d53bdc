# SPDX-License-Identifier: Apache-2.0

"""``ik_bench startup``: from starting the node to its first joint_states, cold and warm.

Cold: an empty numba cache (a new ``XDG_CACHE_HOME``), as on the first
start of a fresh install; warm: the next starts, on that cache. For each
start: seconds from spawning ``python -m ik_node.ros.entry`` (iiwa14) to
its first joint_states, and to the first diagnostics reporting the numba
backend (the kernels compiled in a child process and loaded). Also the
load of a description with 1,000 fixed links in a row (parse, chain, link
frames), which was quadratic.
"""

import os
import tempfile
import time

from diagnostic_msgs.msg import DiagnosticArray
from ik_node.bench.common import machine_info, print_json, print_measures, print_title
from ik_node.bench.session import iiwa_arguments
from ik_node.description.urdf import bundled_urdf, chain_from_urdf_string, link_frames
from ik_node.ros.process import free_domain, NodeProcess
import numpy as np
from sensor_msgs.msg import JointState

BASE, TIP = 'iiwa_link_0', 'tool0'


def one_start(cache_home: str, domain: int, timeout_s: float) -> dict:
    """Start the node with numba's cache under ``cache_home``; return its start-up times, s."""
    env = {k: v for k, v in os.environ.items() if k != 'NUMBA_CACHE_DIR'}
    env['XDG_CACHE_HOME'] = cache_home
    seen = {}
    start = time.monotonic()
    proc = NodeProcess(iiwa_arguments({}), domain, 'ik_startup_client', env=env)

    def on_state(msg):
        seen.setdefault('joint_states', time.monotonic() - start)

    def on_diagnostics(msg):
        for status in msg.status:
            if any(kv.key == 'backend' and kv.value == 'numba' for kv in status.values):
                seen.setdefault('numba', time.monotonic() - start)

    proc.node.create_subscription(JointState, 'joint_states', on_state, 10)
    proc.node.create_subscription(DiagnosticArray, '/diagnostics', on_diagnostics, 10)
    try:
        proc.wait_for(lambda: 'numba' in seen and 'joint_states' in seen, timeout_s,
                      'first joint_states and the numba backend')
    finally:
        code = proc.close()
    return {'first_joint_states_s': seen['joint_states'], 'numba_backend_s': seen['numba'],
            'exit_code': code}


def many_links(count: int) -> str:
    """Return the iiwa14's URDF with ``count`` fixed links in a row under its tool."""
    with open(bundled_urdf('iiwa14.urdf'), encoding='utf-8') as handle:
        text = handle.read()
    links = ''.join(
        f'<link name="extra_{i}"/><joint name="extra_joint_{i}" type="fixed">'
        f'<parent link="{TIP if i == 0 else f"extra_{i - 1}"}"/><child link="extra_{i}"/>'
        '<origin xyz="0 0 0.001" rpy="0 0 0"/></joint>' for i in range(count))
    return text.replace('</robot>', links + '</robot>')


def model_load_s(text: str, repeats: int = 5) -> float:
    """Median seconds to build the chain and every link's frame from URDF ``text``."""
    times = []
    for _ in range(repeats):
        start = time.perf_counter()
        link_frames(text, chain_from_urdf_string(text, BASE, TIP))
        times.append(time.perf_counter() - start)
    return float(np.median(times))


def run(args):
    """Start cold once, then warm ``--runs`` times; print a table (or JSON)."""
    domain = free_domain()
    report = {'benchmark': 'startup', 'machine': machine_info(), 'runs': args.runs}
    with tempfile.TemporaryDirectory(prefix='ik_bench_startup_') as cache_home:
        cold = one_start(cache_home, domain, args.timeout)
        warm = [one_start(cache_home, domain, args.timeout) for _ in range(args.runs)]
    text = many_links(1000)
    report.update({
        'cold_first_joint_states_s': cold['first_joint_states_s'],
        'cold_numba_backend_s': cold['numba_backend_s'],
        'warm_first_joint_states_median_s': float(np.median(
            [w['first_joint_states_s'] for w in warm])),
        'warm_first_joint_states_max_s': max(w['first_joint_states_s'] for w in warm),
        'warm_numba_backend_median_s': float(np.median([w['numba_backend_s'] for w in warm])),
        'exit_codes': sorted({cold['exit_code'], *(w['exit_code'] for w in warm)}),
        'model_1000_links_bytes': len(text.encode()),
        'model_1000_links_load_s': model_load_s(text),
    })
    report['ok'] = report['exit_codes'] == [0]
    if args.json:
        print_json(report)
    else:
        print_title('startup', f'iiwa14, 1 cold + {args.runs} warm starts', report['machine'])
        print_measures([(k, v) for k, v in report.items()
                        if k not in ('benchmark', 'machine', 'runs', 'ok')])
    return 0 if report['ok'] else 1


def add_parser(subparsers):
    """Register the ``startup`` subcommand."""
    p = subparsers.add_parser('startup', help='seconds to the first joint_states, cold and warm '
                              'numba cache; a 1,000-link model load')
    p.add_argument('--runs', type=int, default=5, help='warm starts')
    p.add_argument('--timeout', type=float, default=600.0, help='bound of each start, s')
    p.set_defaults(func=run)
