# SPDX-License-Identifier: Apache-2.0
"""Running a node until it is told to stop: signals counted, the executor spun in slices.

The node handles SIGINT and SIGTERM itself (rclpy's handlers would tear the
context down under a running callback): the first asks for a stop, which
the node may take time to finish (a braking tail); a second exits at once.
"""

import gc
import signal

from rclpy.executors import ExternalShutdownException, SingleThreadedExecutor


class StopRequest:
    """SIGINT / SIGTERM as a request: the first asks for a stop, a second for an immediate exit."""

    def __init__(self):
        """No signal yet."""
        self.count = 0

    def __call__(self, signum, frame):
        """Count a signal (installed with signal.signal; the spin loop reads the count)."""
        self.count += 1

    def install(self):
        """Handle SIGINT and SIGTERM here (rclpy's own handlers are off)."""
        signal.signal(signal.SIGINT, self)
        signal.signal(signal.SIGTERM, self)


def spin_until(executor, done, on_error=None) -> None:
    """Spin in short slices (so a signal is seen within 0.1 s) until ``done()`` holds.

    Also ends when the executor's context is shut down. ``on_error``: called
    with an exception one slice raised (not ExternalShutdownException), which
    is then passed over; None: the exception ends the loop.
    """
    while executor.context.ok() and not done():
        try:
            executor.spin_once(timeout_sec=0.1)
        except ExternalShutdownException:
            raise
        except Exception as exc:  # noqa: B902 - the caller decides
            if on_error is None:
                raise
            on_error(exc)


def run(node, stop: StopRequest) -> int:
    """Spin ``node`` until a stop is requested, then until its stop is done; return 0.

    ``node`` has ``begin_stop() -> deadline`` and ``stop_done(deadline) -> bool``
    (IKNode): after the first signal it keeps spinning until its stop is done
    (a braking tail played), or a second signal.
    """
    executor = SingleThreadedExecutor()
    try:
        executor.add_node(node)
        gc.freeze()
        spin_until(executor, lambda: stop.count > 0)
        deadline = node.begin_stop()
        spin_until(executor, lambda: stop.count > 1 or node.stop_done(deadline))
    finally:
        executor.shutdown(timeout_sec=1.0)
    return 0


def serve(node, stop: StopRequest, on_error=None) -> None:
    """Spin ``node`` until a stop is requested or rclpy is shut down; the executor shut down after.

    For the helper processes (the viewer, the bench's relay): a signal only
    counts (``stop``), so no KeyboardInterrupt lands inside rclpy's own code
    (one inside a Task's constructor left a half-built Task whose finaliser
    raised: seen in the viewer's tests).

    Args:
        node: the rclpy node to spin.
        stop: an installed StopRequest.
        on_error: called with an exception one spin slice raised, which is
            then passed over; None: the exception ends the loop.

    """
    executor = SingleThreadedExecutor(context=node.context)
    try:
        executor.add_node(node)
        spin_until(executor, lambda: stop.count > 0, on_error)
    except ExternalShutdownException:
        pass
    finally:
        executor.shutdown(timeout_sec=1.0)
