# SPDX-License-Identifier: Apache-2.0

"""The ik_node executable: SIGINT / SIGTERM handled from its first instant.

Importing the node (rclpy, the message packages, the compiled kernels)
takes about a second; a Ctrl-C in that time raised KeyboardInterrupt inside
an import: a traceback and exit code -2. Here a signal before the node runs
stops it before it starts, exit code 0, and one while it tears down is
ignored. Run as the ``ik_node``
console script or ``python -m ik_node.ros.entry``.
"""

import signal
import sys


def main(args=None):
    """Import and run ik_node.ros.node.main; a signal during start-up or teardown exits 0.

    A signal while the modules import is only counted (an exception raised
    inside an import surfaces as an ImportError with a traceback); the node's
    main then stops at once. After it returns, further signals are ignored:
    at interpreter exit Python resets a Python-level handler to the default
    action, and a second Ctrl-C while the middleware tore down killed the
    process (exit code -2).
    """
    early = []
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda signum, frame: early.append(signum))
    from ik_node.ros import node   # the slow part
    stop = node.StopRequest()
    stop.install()
    stop.count += len(early)
    code = node.main(args, stop=stop, own_process=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, signal.SIG_IGN)
    return code


if __name__ == '__main__':
    sys.exit(main())
