# SPDX-License-Identifier: Apache-2.0

"""Helpers for tests that use DDS: one ROS domain per test, bounded waits, checks."""

import contextlib
import fcntl
import os
import tempfile
import threading
import time

# Fast DDS derives its UDP ports from the domain id; ids 0..101 are safe on
# every platform. Domain 0 is left to the user's own ROS graph; the benches'
# free_domain() probes 120-230.
_FIRST_DOMAIN = 1
_DOMAIN_COUNT = 100
# A test process holds at most this many domains (then reuses its own in turn),
# so that a dozen test processes on one machine (CI's four workers beside a
# developer's runs) all find free ones: at 20 each, six exhausted the 100.
_MOST_HELD = 8
# A process that holds none waits this long for one to be released, s.
_WAIT_FOR_FREE_S = 120.0
_LOCK_DIR = os.environ.get('IK_TEST_DOMAIN_LOCKS') or \
    os.path.join(tempfile.gettempdir(), 'ik_node_test_domains')   # a test sets its own
_held = []      # (domain, open lock file) this process holds until it exits
_next_own = [0]


def _claim_free_domain():
    """Lock and return a domain no process holds, None when none is free or enough are held."""
    start = os.getpid() % _DOMAIN_COUNT
    taken = {domain for domain, _ in _held}
    for k in range(_DOMAIN_COUNT if len(_held) < _MOST_HELD else 0):
        domain = _FIRST_DOMAIN + (start + len(_held) + k) % _DOMAIN_COUNT
        if domain in taken:
            continue
        handle = open(os.path.join(_LOCK_DIR, f'{domain}.lock'), 'w')
        try:
            fcntl.flock(handle, fcntl.LOCK_EX | fcntl.LOCK_NB)
        except OSError:
            handle.close()
            continue
        _held.append((domain, handle))
        return domain
    return None


def unique_domain_id():
    """Return a ROS_DOMAIN_ID that no other process using these helpers holds.

    Each domain is claimed with an exclusive lock on a file in the temp
    directory, held until this process exits (the OS releases it even after
    a crash), so two test runs on one machine never share a domain. A new id
    is taken per call while free ones remain and this process holds fewer
    than _MOST_HELD; then this process's own ids are reused in turn (their
    earlier users have stopped by then). A process holding none waits for
    one (bounded: RuntimeError after _WAIT_FOR_FREE_S).
    """
    os.makedirs(_LOCK_DIR, exist_ok=True)
    deadline = time.monotonic() + _WAIT_FOR_FREE_S
    while True:
        domain = _claim_free_domain()
        if domain is not None:
            return domain
        if _held:
            break
        if time.monotonic() > deadline:
            raise RuntimeError(f'every ROS domain {_FIRST_DOMAIN}-'
                               f'{_FIRST_DOMAIN + _DOMAIN_COUNT - 1} was held by other test '
                               f'runs for {_WAIT_FOR_FREE_S:g} s (locks in {_LOCK_DIR})')
        time.sleep(0.5)
    domain = _held[_next_own[0] % len(_held)][0]
    _next_own[0] += 1
    return domain


class OutputDrain:
    """Read a subprocess's output on a thread, so that a chatty process never blocks.

    A pipe holds ~64 KiB; a node that logs more into a pipe nobody reads
    stops in the middle of a write. ``text()`` returns what was read so far.
    """

    def __init__(self, stream):
        """Start reading ``stream`` (text mode) until it closes."""
        self._lines = []
        self._thread = threading.Thread(target=self._read, args=(stream,), daemon=True)
        self._thread.start()

    def _read(self, stream):
        for line in stream:
            self._lines.append(line)

    def so_far(self):
        """Return what was read until now (the process may still run)."""
        return ''.join(self._lines)

    def text(self, timeout_s=5.0):
        """Return everything read; after the process exited, wait (bounded) for the end."""
        self._thread.join(timeout_s)
        return ''.join(self._lines)


def wait_until(predicate, timeout_s, spin_once=None, period_s=0.01):
    """Poll ``predicate`` (spinning ``spin_once`` between polls) for at most timeout_s.

    Returns:
        True as soon as the predicate holds, False when the time is up.

    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if predicate():
            return True
        if spin_once is not None:
            spin_once(period_s)
        else:
            time.sleep(period_s)
    return bool(predicate())


def stamp_ns(msg):
    """Header stamp of a message in integer nanoseconds (float seconds round to ~0.2 us)."""
    return msg.header.stamp.sec * 1_000_000_000 + msg.header.stamp.nanosec


def check_joint_stream(chain, messages, accel=None):
    """Assert what the node promises of its joint_states, from the messages alone.

    Every position finite and within the limits; between consecutive messages
    (header stamps) the position change within the speed limits for the time
    between them; the reported velocity that change over that time; with
    ``accel`` ((n,) or scalar, rad/s^2), the velocity change within it.
    """
    import numpy as np
    q = np.array([m.position for m in messages])
    v = np.array([m.velocity for m in messages])
    t = np.array([stamp_ns(m) for m in messages], dtype=np.int64)
    assert np.all(np.isfinite(q)) and np.all(np.isfinite(v))
    assert all(chain.within_limits(row) for row in q)
    assert np.all(np.abs(v) <= chain.velocity * (1 + 1e-9) + 1e-9)
    dt = np.diff(t) * 1e-9
    assert np.all(dt >= 0.0), 'stamps go backwards'
    moving = dt > 0.0
    assert np.all(np.diff(q, axis=0)[~moving] == 0.0), 'a change of position in no time'
    steps, dt = np.abs(np.diff(q, axis=0))[moving], dt[moving][:, None]
    rounding = 1e-9 + 4e-16 / dt  # stamps are exact; positions round to ~eps
    assert np.all(steps <= chain.velocity * dt * (1 + 1e-6) + rounding), \
        float(np.max(steps / (chain.velocity * dt)))
    if accel is not None:
        change = np.abs(np.diff(v, axis=0))[moving]
        ratio = change / (np.asarray(accel) * dt)
        assert np.all(change <= np.asarray(accel) * dt * (1 + 1e-6) + rounding), \
            where_worst(ratio, t[1:][moving], dt[:, 0], v[1:][moving], v[:-1][moving])


def where_worst(ratio, stamps_ns, dt, after, before):
    """Describe the worst message pair of a check: ratio, stamp, gap, joint, both values."""
    import numpy as np
    k, j = np.unravel_index(int(np.argmax(ratio)), ratio.shape)
    return (f'{float(ratio[k, j]):.4f} x the limit at the message stamped {int(stamps_ns[k])} '
            f'ns ({k + 1} of the moving ones), {dt[k] * 1e3:.3f} ms after the one before; '
            f'joint {j}: {float(before[k, j])!r} -> {float(after[k, j])!r}')


@contextlib.contextmanager
def client_node(domain: int, name: str):
    """Yield (node, executor): an rclpy node on ``domain`` in a context of its own.

    The executor, the node and the context are shut down on the way out,
    whatever happened.
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    context = Context()
    rclpy.init(context=context, domain_id=domain)
    try:
        node = rclpy.create_node(name, context=context)
        executor = SingleThreadedExecutor(context=context)
        executor.add_node(node)
        try:
            yield node, executor
        finally:
            executor.shutdown(timeout_sec=1.0)
            node.destroy_node()
    finally:
        rclpy.shutdown(context=context)


@contextlib.contextmanager
def in_process_ik_node(params, numpy_backend=False):
    """Run IKNode in this process on its own domain, with a client node beside it.

    Args:
        params: the node's parameters, name -> value.
        numpy_backend: run on the numpy reference (no compile child is
            started; the numba twins are pinned to it by test_jit_ik).

    Yields (node, client, spin_once) where spin_once(seconds) runs their one
    executor once.
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.executors import SingleThreadedExecutor
    from rclpy.parameter import Parameter
    from ik_node.core import supply as solvers
    from ik_node.ros.node import IKNode
    status = solvers.compiled_status
    if numpy_backend:
        solvers.compiled_status = lambda: ('numpy', 'this test runs on the reference')
    context = Context()
    rclpy.init(context=context, domain_id=unique_domain_id())
    try:
        node = IKNode(context=context, parameter_overrides=[
            Parameter(key, value=value) for key, value in params.items()])
    except BaseException:
        rclpy.try_shutdown(context=context)
        raise
    finally:
        solvers.compiled_status = status
    client = rclpy.create_node('test_client', context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    executor.add_node(client)
    try:
        yield node, client, lambda seconds: executor.spin_once(timeout_sec=seconds)
    finally:
        executor.shutdown(timeout_sec=1.0)
        client.destroy_node()
        node.destroy_node()
        rclpy.try_shutdown(context=context)  # a test may have shut it down already
