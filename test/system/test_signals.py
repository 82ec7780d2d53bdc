# SPDX-License-Identifier: Apache-2.0

"""Ctrl-C at any instant: exit code 0 and no traceback, with one SIGINT or two.

``ros2 launch`` on Ctrl-C: the terminal sends SIGINT to the whole process
group, then launch sends its own SIGINT to each process (upstream launch,
``ExecuteLocal``: SIGINT on shutdown, SIGTERM after ``sigterm_timeout``).
Standalone (``ros2 run``): one SIGINT. Each run here starts the node on the
iiwa14 drifting toward a posture (it moves with no client), waits until the
node's own handler is installed (helpers/signals.py), then signals in one
phase of its life: while the modules import (rclpy, numpy: a signal there
used to surface as an ImportError with a traceback), while the model loads
and the kernels load or compile, while it moves, and while it tears down
after a first signal. Before that handler (the interpreter starting, a few
tens of ms: the package root imports nothing) a SIGINT ends it as any Python
program: see the README, "Stopping".

Each phase is hit by a few runs at instants spread over it (STRATA), with one
SIGINT or two (launch right after the terminal, or later). The same runs at
200 random instants (test/sweeps/test_signal_sweep.py, a new seed each time)
sweep what falls between.
"""

from concurrent.futures import ThreadPoolExecutor

import pytest
from signals import bad_runs, one_run

PARALLEL = 4
# Phase -> first SIGINT after the handler, s (spread over the phase on this
# machine, idle: imports ~0.5 s, model and kernels to ~1.2 s, then motion).
STRATA = {'importing': (0.0, 0.05, 0.15, 0.3), 'model and kernels': (0.6, 0.9, 1.2),
          'moving': (1.8, 2.5)}
# Second SIGINT: none, at once (launch after the terminal), during the stop.
SECONDS = (None, 0.01, 0.4)


def plans():
    """Every phase's instants with each second signal: 27 schedules."""
    return [(first, second) for instants in STRATA.values() for first in instants
            for second in SECONDS]


@pytest.mark.integration
@pytest.mark.slow
def test_sigint_in_every_phase_exits_0_without_a_traceback():
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one_run, plans()))
    bad = bad_runs(results)
    assert not bad, f'{len(bad)} of {len(results)} runs: {bad[:3]}'
