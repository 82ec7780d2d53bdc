# SPDX-License-Identifier: Apache-2.0

"""Shared pytest configuration: the tiers, markers and hypothesis profiles.

The tiers are the folders of test/ (README, "Tests"):

* unit/: the core and the URDF reader as plain Python, no ROS, no subprocess
  (the fast tier, a few minutes: ``bash scripts/test.sh --fast``);
* simulation/: closed loops on simulated clocks and servos, plain Python;
* ros/: the ROS layer in this process (messages, IKNode over DDS in-process);
* system/: the node as a process over DDS (stand-ins, signals, benches);
* package/: linters, typing, packaging, the README and the launch file;
* sweeps/: the long runs (hundreds of signals, floods, fuzz batches), only
  with IK_NODE_SWEEPS=1 (``bash scripts/sweep.sh``), never in a CI run.

helpers/ holds what tests share; tests import helpers, never each other.
"""

import os
import sys

from hypothesis import Phase, settings

# The shared helpers (test/helpers): tests import them, never each other.
sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), 'helpers'))

# Seeded and reproducible: the same examples on every run and in CI.
# No 'explain' phase: it traces every line (sys.settrace), which slows the
# first numba compilation inside a test by ~30x.
settings.register_profile('ik_node', derandomize=True, deadline=None, print_blob=True,
                          phases=[Phase.explicit, Phase.reuse, Phase.generate, Phase.target,
                                  Phase.shrink])
# scripts/sweep.sh: fresh examples (a new seed each run, printed on failure),
# twice the default count where a test does not set its own.
settings.register_profile('sweep', parent=settings.get_profile('ik_node'), derandomize=False,
                          max_examples=200)
settings.load_profile('sweep' if os.environ.get('IK_NODE_SWEEPS') == '1' else 'ik_node')


def _examples_independent_of_what_ran_before():
    """Keep hypothesis from drawing constants out of the project's loaded modules.

    Since 6.131 hypothesis mixes into its draws the literals of every local
    module in sys.modules at the time of the draw. Which ones are loaded
    depends on the tests that ran before in the same process (imports inside
    tests, pytest-xdist's share of them), so the "derandomized" examples of a
    test changed between CI runs and between a CI run and the test run alone:
    issue 30's slowest test drew an out-of-reach trajectory after
    ik_node.bench.teleop was loaded, and took 3 s alone, 170-380 s in CI.
    Here the pool stays empty: each test's examples depend on it and the
    hypothesis version only. The sweeps (fresh seeds) keep the constants.
    An older hypothesis (Ubuntu's 6.98) has no such pool: nothing to do.
    """
    try:
        from hypothesis.internal.conjecture import providers
        empty = providers.Constants()
    except (ImportError, AttributeError):
        return
    if hasattr(providers, '_get_local_constants'):
        providers._get_local_constants = lambda: empty


if os.environ.get('IK_NODE_SWEEPS') != '1':
    _examples_independent_of_what_ran_before()

HERE = os.path.dirname(os.path.abspath(__file__))
# Tier folder -> the markers its tests get (select with -m).
TIERS = {'unit': ('unit',), 'simulation': ('simulation',), 'ros': ('ros', 'integration'),
         'system': ('system', 'integration'), 'package': ('package',),
         'sweeps': ('sweep', 'integration')}
# The long runs are collected only by scripts/sweep.sh.
collect_ignore = [] if os.environ.get('IK_NODE_SWEEPS') == '1' else ['sweeps']


def pytest_configure(config):
    """Register the tiers and markers; give a pytest-xdist worker its own bench domains.

    The benchmarks pick a ROS domain nobody is seen on (ik_node.ros.process.
    free_domain, 120-230); two workers probing at the same instant could pick
    the same one. Each worker gets a range of its own (up to four workers).
    """
    worker = os.environ.get('PYTEST_XDIST_WORKER', '')
    if worker.startswith('gw') and worker[2:].isdigit():
        low = 120 + 27 * (int(worker[2:]) % 4)
        os.environ['IK_NODE_BENCH_DOMAINS'] = f'{low}-{low + 26}'
    for tier in ('unit', 'simulation', 'ros', 'system', 'package', 'sweep'):
        config.addinivalue_line('markers', f'{tier}: a test of test/{tier}* (set by folder)')
    config.addinivalue_line('markers', 'integration: runs ROS nodes (test/ros, test/system)')
    config.addinivalue_line('markers', 'wallclock: asserts over real time (DDS between '
                                       "processes, a node's timers): the nightly sweep reruns "
                                       'them beside CPU hogs')
    config.addinivalue_line('markers', 'alone: needs the machine to itself (it counts what '
                                       'all processes leave, or judges a run by its timing): '
                                       'scripts/test.sh runs these after the rest, alone')
    config.addinivalue_line('markers', 'smoke: run by colcon test in CI: start-up refusals '
                                       'and the node reaching targets, from the install space')
    config.addinivalue_line('markers', 'slow: takes more than a few seconds (long property '
                                       'tests, builds, soak and flood runs)')
    config.addinivalue_line('markers', 'timely: asserts what needs the node on time (a forward '
                                       "controller's braking tail; every message within "
                                       'command_latency_budget); skipped with '
                                       'IK_NODE_BUSY_MACHINE=1')
    for marker in ('linter', 'flake8', 'pep257', 'xmllint'):
        config.addinivalue_line('markers', f'{marker}: ament {marker} check')


def pytest_collection_modifyitems(config, items):
    """Mark each test with its tier; skip 'timely' ones where a sweep keeps the machine busy.

    IK_NODE_BUSY_MACHINE=1 (scripts/sweep.sh's loaded pass):

    forward_position_controller holds the last array it got: when the node
    stalls (a CPU starved by other processes), the arm stops as hard as its
    servo can and no node can prevent it; joint_trajectory_controller refuses
    a message that arrives after its end, i.e. later than the configured
    command_latency_budget. Every other guarantee is asserted on a busy
    machine too.
    """
    import pytest
    for item in items:
        tier = os.path.relpath(str(item.path), HERE).split(os.sep)[0]
        for marker in TIERS.get(tier, ()):
            item.add_marker(getattr(pytest.mark, marker))
    if os.environ.get('IK_NODE_BUSY_MACHINE') != '1':
        return
    skip = pytest.mark.skip(reason='needs the node on time: on a busy machine a forward '
                                   'controller holds while the node stalls, and messages '
                                   'arrive later than command_latency_budget')
    for item in items:
        if 'timely' in item.keywords:
            item.add_marker(skip)
