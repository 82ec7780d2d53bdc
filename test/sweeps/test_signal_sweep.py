# SPDX-License-Identifier: Apache-2.0

"""Ctrl-C at 200 random instants of start-up, motion and teardown, a new seed each run.

The sweep of test/system/test_signals.py (which hits each phase a few times
per CI run): scripts/sweep.sh runs it. The seed is printed, and
IK_NODE_SIGNAL_SEED replays a failing one.
"""

from concurrent.futures import ThreadPoolExecutor
import os
import random

from signals import bad_runs, one_run

RUNS = 200
PARALLEL = 4


def plans(seed):
    """Return RUNS schedules: first SIGINT after the handler, s; the second after it or None.

    The first instant covers start-up (~1 s: rclpy, the model, loading the
    kernels) and motion; a second SIGINT comes at once (launch right after
    the terminal) or later, during the stop and the teardown.
    """
    rng = random.Random(seed)
    out = []
    for _ in range(RUNS):
        first = rng.uniform(0.0, 3.0)
        kind = rng.random()
        second = None if kind < 0.4 else rng.uniform(0.0, 0.05) if kind < 0.7 else \
            rng.uniform(0.0, 1.0)
        out.append((first, second))
    return out


def test_sigint_at_random_instants_exits_0_without_a_traceback():
    seed = int(os.environ.get('IK_NODE_SIGNAL_SEED') or random.SystemRandom().randrange(2**32))
    print(f'signal sweep seed {seed} (IK_NODE_SIGNAL_SEED={seed} replays it)')
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one_run, plans(seed)))
    bad = bad_runs(results)
    assert not bad, f'seed {seed}: {len(bad)} of {RUNS} runs: {bad[:3]}'
