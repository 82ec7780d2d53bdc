# SPDX-License-Identifier: Apache-2.0

"""The helper processes' spin loop (ik_node.ros.spin.serve): a signal stops it between callbacks.

The viewer once printed a finaliser's traceback on SIGINT: rclpy's handler
raised KeyboardInterrupt inside the constructor of an executor Task, and the
half-built Task's ``__del__`` failed. ``serve`` with a StopRequest only
counts the signal; these tests send real signals to this process.
"""

import contextlib
import os
import signal

from ik_node.ros.spin import serve, StopRequest
import pytest
from ros_helpers import unique_domain_id


@contextlib.contextmanager
def node_with_stop():
    """Yield (node, stop): a node in a context of its own, SIGINT / SIGTERM counted by ``stop``.

    The signal handlers, the node and the context are restored or shut down on the way out.
    """
    import rclpy
    from rclpy.context import Context
    from rclpy.signals import SignalHandlerOptions
    saved = {sig: signal.getsignal(sig) for sig in (signal.SIGINT, signal.SIGTERM)}
    context = Context()
    rclpy.init(context=context, domain_id=unique_domain_id(),
               signal_handler_options=SignalHandlerOptions.NO)
    try:
        node = rclpy.create_node('spin_test', context=context)
        stop = StopRequest()
        stop.install()
        try:
            yield node, stop
        finally:
            node.destroy_node()
    finally:
        for sig, handler in saved.items():
            signal.signal(sig, handler)
        rclpy.try_shutdown(context=context)


def test_a_sigint_sent_inside_a_callback_stops_serve_after_it_and_raises_nothing():
    with node_with_stop() as (node, stop):
        ticks = []

        def tick():
            ticks.append('start')
            if ticks.count('start') == 3:
                os.kill(os.getpid(), signal.SIGINT)
            ticks.append('end')   # the callback runs to its end: nothing was raised in it

        node.create_timer(0.01, tick)
        serve(node, stop)
        assert stop.count == 1
        assert ticks == ['start', 'end'] * 3   # no callback after the one that was signalled


def test_a_sigterm_stops_serve_too():
    with node_with_stop() as (node, stop):
        node.create_timer(0.01, lambda: os.kill(os.getpid(), signal.SIGTERM))
        serve(node, stop)
        assert stop.count >= 1


def test_an_error_in_a_callback_goes_to_on_error_and_serve_goes_on():
    with node_with_stop() as (node, stop):
        seen = []

        def tick():
            if len(seen) < 2:
                raise ValueError(f'bad message {len(seen)}')
            stop.count += 1

        node.create_timer(0.01, tick)
        serve(node, stop, on_error=lambda exc: seen.append(str(exc)))
        assert seen == ['bad message 0', 'bad message 1']
        assert stop.count == 1


def test_without_on_error_an_error_ends_serve_and_reaches_the_caller():
    with node_with_stop() as (node, stop):
        def tick():
            raise ValueError('bad message')

        node.create_timer(0.01, tick)
        with pytest.raises(ValueError, match='bad message'):
            serve(node, stop)
        assert stop.count == 0


def test_a_shut_down_context_ends_serve():
    import rclpy
    with node_with_stop() as (node, stop):
        node.create_timer(0.01, lambda: rclpy.try_shutdown(context=node.context))
        serve(node, stop)
        assert not node.context.ok()
        assert stop.count == 0
