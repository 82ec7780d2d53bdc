# SPDX-License-Identifier: Apache-2.0

"""Ctrl-C as ros2 launch and a terminal send it: one run of the node, signalled on a schedule.

``ros2 launch`` on Ctrl-C: the terminal sends SIGINT to the whole process
group, then launch sends its own SIGINT to each process (upstream launch,
``ExecuteLocal``: SIGINT on shutdown, SIGTERM after ``sigterm_timeout``).
Standalone (``ros2 run``): one SIGINT. Each run starts the node on the
iiwa14 drifting toward a posture (it moves with no client), waits until the
node's own handler is installed, then signals.
"""

import os
import signal
import subprocess
import sys
import time

from node_process import model_params
from ros_helpers import unique_domain_id


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


def bad_runs(results):
    """Return (exit code, plan, end of stderr) of the runs that failed: non-zero or a traceback."""
    return [(code, plan, err[-600:]) for code, err, plan in results
            if code != 0 or 'Traceback' in err]
