# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""Ctrl-C at any instant: exit code 0 and no traceback, with one SIGINT or two.

``ros2 launch`` on Ctrl-C: the terminal sends SIGINT to the whole process
group, then launch sends its own SIGINT to each process (upstream launch,
``ExecuteLocal``: SIGINT on shutdown, SIGTERM after ``sigterm_timeout``).
Standalone (``ros2 run``): one SIGINT. Each run here starts the node on the
iiwa14 drifting toward a posture (it moves with no client), waits until the
node's own handler is installed, then signals at a random instant of its
start-up (rclpy, the model, the compiled kernels), its motion or its
teardown. Before that handler (the interpreter and the package importing,
~0.15 s on this machine) a SIGINT ends it as any Python program: see the
README, "Stopping".
"""

from concurrent.futures import ThreadPoolExecutor
import os
import random
import signal
import subprocess
import sys
import time

import pytest
from ros_helpers import unique_domain_id
from test_node import model_params

RUNS = 200
PARALLEL = 4
SEED = 20261124


def handles(pid: int, signum: int) -> bool:
    """Whether process ``pid`` has a handler for ``signum`` (its SigCgt mask in /proc)."""
    try:
        with open(f'/proc/{pid}/status') as status:
            for line in status:
                if line.startswith('SigCgt:'):
                    return bool(int(line.split()[1], 16) >> (signum - 1) & 1)
    except OSError:
        pass
    return False


def one_run(plan):
    """Start the node, signal it as ``plan`` says; return (exit code, stderr, plan)."""
    first_s, second_s = plan
    params = dict(model_params('iiwa14'), initial_positions='[0.0, 0.5, 0.0, -1.2, 0.0, 0.9, 0.0]',
                  posture='[0.6, 0.9, 0.3, -0.6, 0.4, 0.3, 0.5]', posture_rate=1.0)
    cmd = [sys.executable, '-m', 'ik_node.ros.entry', '--ros-args']
    for key, value in params.items():
        cmd += ['-p', f'{key}:={value}']
    env = dict(os.environ, ROS_DOMAIN_ID=str(unique_domain_id()))
    proc = subprocess.Popen(cmd, env=env, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE,
                            text=True)
    try:
        # SIGTERM: Python leaves it to the system; the node's entry catches it
        # (with SIGINT) in its first lines.
        end = time.monotonic() + 120.0
        while not handles(proc.pid, signal.SIGTERM) and proc.poll() is None and \
                time.monotonic() < end:
            time.sleep(0.001)
        time.sleep(first_s)
        proc.send_signal(signal.SIGINT)
        if second_s is not None:
            time.sleep(second_s)
            if proc.poll() is None:
                proc.send_signal(signal.SIGINT)
        _, err = proc.communicate(timeout=60.0)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    return proc.returncode, err, plan


def plans():
    """Return RUNS schedules: first SIGINT after the handler, s; the second after it or None.

    The first instant covers start-up (~1 s: rclpy, the model, loading the
    kernels) and motion; a second SIGINT comes at once (launch right after
    the terminal) or later, during the stop and the teardown.
    """
    rng = random.Random(SEED)
    out = []
    for _ in range(RUNS):
        first = rng.uniform(0.0, 3.0)
        kind = rng.random()
        second = None if kind < 0.4 else rng.uniform(0.0, 0.05) if kind < 0.7 else \
            rng.uniform(0.0, 1.0)
        out.append((first, second))
    return out


@pytest.mark.integration
@pytest.mark.slow
def test_sigint_at_random_instants_exits_0_without_a_traceback():
    with ThreadPoolExecutor(PARALLEL) as pool:
        results = list(pool.map(one_run, plans()))
    bad = [(code, plan, err[-600:]) for code, err, plan in results
           if code != 0 or 'Traceback' in err]
    assert not bad, f'{len(bad)} of {RUNS} runs: {bad[:3]}'
