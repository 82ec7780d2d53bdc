# SPDX-License-Identifier: Apache-2.0

"""ik_node as a subprocess with a client node on the same private ROS domain.

Shared by the README's main job (``ik_demo``) and ``ik_bench node``.
"""

import os
import random
import signal
import subprocess
import sys
import time
from typing import Optional, Tuple

from ik_node.core.warm import die_with_parent
import rclpy
from rclpy.context import Context
from rclpy.executors import SingleThreadedExecutor


# The benchmarks' domains, "first-last" (default 120-230): parallel runs on one
# machine (pytest workers) take disjoint ranges so that they never share one.
DOMAINS_VARIABLE = 'IK_NODE_BENCH_DOMAINS'


def free_domain(first: Optional[int] = None, last: Optional[int] = None,
                probe_s: float = 1.0) -> int:
    """Return a ROS_DOMAIN_ID in [first, last] on which no other ROS node is seen.

    Without ``first`` and ``last``: 120-230, or IK_NODE_BENCH_DOMAINS="first-last"
    from the environment.

    Domains are tried in random order; on each, a probe node listens for
    ``probe_s`` seconds (existing participants answer a newcomer's
    announcement at once; about 0.15 s on an idle 2-core VM, longer under
    load). Two benchmarks that picked the same domain at random talked to
    each other's nodes: this avoids it. A node that has not been discovered
    within ``probe_s`` is missed, so this lowers the chance of a shared
    domain rather than excluding it.

    Raises:
        RuntimeError: ten domains tried, all busy.

    """
    first, last = _domain_range(first, last)
    candidates = list(range(first, last + 1))
    random.SystemRandom().shuffle(candidates)
    for domain in candidates[:10]:
        context = Context()
        rclpy.init(context=context, domain_id=domain)
        try:
            probe = rclpy.create_node('ik_domain_probe', context=context)
            end = time.monotonic() + probe_s
            busy = False
            while not busy and time.monotonic() < end:
                time.sleep(0.05)
                busy = len(probe.get_node_names()) > 1
            probe.destroy_node()
        finally:
            rclpy.shutdown(context=context)
        if not busy:
            return domain
    raise RuntimeError(f'no free ROS domain among ten tried in {first}-{last}')


def _domain_range(first: Optional[int], last: Optional[int]) -> Tuple[int, int]:
    """Return (first, last): the arguments, else IK_NODE_BENCH_DOMAINS, else 120-230."""
    if first is not None and last is not None:
        return first, last
    text = os.environ.get(DOMAINS_VARIABLE)
    if not text:
        return 120, 230
    try:
        low, high = (int(v) for v in text.split('-'))
    except ValueError:
        raise RuntimeError(f'{DOMAINS_VARIABLE}={text!r}: expected "first-last"') from None
    if not 0 <= low <= high <= 232:
        raise RuntimeError(f'{DOMAINS_VARIABLE}={text!r}: expected 0 <= first <= last <= 232')
    return low, high


class NodeProcess:
    """Start ``python -m ik_node.ros.entry --ros-args ...`` and a client node.

    Args:
        ros_args: arguments after ``--ros-args`` (parameters, log level).
        domain: ROS_DOMAIN_ID of both processes.
        client_name: name of the client node.

    """

    def __init__(self, ros_args, domain: int, client_name: str, env=None):
        """Start the node process and create the client on ``domain``.

        ``env``: the node's environment (default this process's), with
        ROS_DOMAIN_ID set. The node gets SIGTERM (a clean stop) when this
        process dies without :meth:`close` (killed): it never runs on alone.
        """
        self.domain = domain
        self.proc = subprocess.Popen(
            [sys.executable, '-m', 'ik_node.ros.entry', '--ros-args', *ros_args],
            env=dict(os.environ if env is None else env, ROS_DOMAIN_ID=str(domain)),
            preexec_fn=die_with_parent())
        try:
            self.context = Context()
            rclpy.init(context=self.context, domain_id=domain)
            self.node = rclpy.create_node(client_name, context=self.context)
            self.executor = SingleThreadedExecutor(context=self.context)
            self.executor.add_node(self.node)
        except BaseException:
            self._stop_node(10.0)
            raise

    def spin(self, seconds: float, step_s: float = 0.005) -> None:
        """Process client callbacks for ``seconds``."""
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            self.executor.spin_once(timeout_sec=step_s)

    def wait_for(self, predicate, timeout_s: float, what: str, step_s: float = 0.01) -> None:
        """Process client callbacks until ``predicate()`` holds.

        Raises:
            RuntimeError: the node process exited first.
            TimeoutError: not within ``timeout_s`` seconds (``what`` names it).

        """
        end = time.monotonic() + timeout_s
        while not predicate():
            if self.proc.poll() is not None:
                raise RuntimeError(f'ik_node exited with code {self.proc.returncode} ({what})')
            if time.monotonic() > end:
                raise TimeoutError(f'{what}: not within {timeout_s} s')
            self.executor.spin_once(timeout_sec=step_s)

    def _stop_node(self, timeout_s: float) -> int:
        """Stop the node with SIGINT (killed after timeout_s); its exit code."""
        if self.proc.poll() is None:
            self.proc.send_signal(signal.SIGINT)
        try:
            return self.proc.wait(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            self.proc.kill()
            return self.proc.wait()

    def close(self, timeout_s: float = 10.0) -> int:
        """Stop the node with SIGINT (killed after timeout_s), the client too; exit code."""
        code = self._stop_node(timeout_s)
        self.executor.shutdown(timeout_sec=1.0)
        self.node.destroy_node()
        rclpy.shutdown(context=self.context)
        return code
