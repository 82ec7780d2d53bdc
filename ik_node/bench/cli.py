# SPDX-License-Identifier: Apache-2.0

"""``ik_bench``: seeded benchmarks of ik_node; prints tables or, with --json, JSON."""

import argparse
import os
import sys

from ik_node.bench import analytic, arrival, collision, controllers, corpus, events, feedback, \
    flood, fuzz, handles, ik, node, rotations, seed000, shutdown, smoothing, soak, startup, \
    tasks, teleop, ticks, viewer


def build_parser():
    """Build the argument parser with one subcommand per benchmark."""
    parser = argparse.ArgumentParser(
        prog='ik_bench', description='Seeded benchmarks of ik_node (medians and p95).')
    parent = argparse.ArgumentParser(add_help=False)
    parent.add_argument('--json', action='store_true', help='print one JSON object')
    parent.add_argument('--seed', type=int, default=0, help='random seed (default 0)')
    sub = parser.add_subparsers(dest='benchmark', required=True, metavar='BENCHMARK',
                                parser_class=_with_parent(parent))
    rotations.add_parser(sub)
    ik.add_parser(sub)
    seed000.add_parser(sub)
    analytic.add_parser(sub)
    smoothing.add_parser(sub)
    node.add_parser(sub)
    fuzz.add_parser(sub)
    flood.add_parser(sub)
    soak.add_parser(sub)
    shutdown.add_parser(sub)
    startup.add_parser(sub)
    teleop.add_parser(sub)
    controllers.add_parser(sub)
    corpus.add_parser(sub)
    feedback.add_parser(sub)
    events.add_parser(sub)
    collision.add_parser(sub)
    handles.add_parser(sub)
    viewer.add_parser(sub)
    ticks.add_parser(sub)
    arrival.add_parser(sub)
    tasks.add_parser(sub)
    return parser


def _with_parent(parent):
    """Return an ArgumentParser class whose instances inherit the common options."""
    class SubParser(argparse.ArgumentParser):

        def __init__(self, **kwargs):
            kwargs.setdefault('parents', [parent])
            super().__init__(**kwargs)
    return SubParser


def main(argv=None):
    """Entry point of the ``ik_bench`` console script."""
    args = build_parser().parse_args(argv)
    return args.func(args)


def console_main():
    """Run :func:`main` as a command; after OMPL's plans, end without finalizing.

    OMPL's bindings (nanobind) print a page of 'leaked type/function' lines
    when the interpreter finalizes after a plan; the benchmark's output is
    complete and flushed, so the process ends there instead.
    """
    code = main()
    if 'ompl' in sys.modules:
        sys.stdout.flush()
        sys.stderr.flush()
        os._exit(code or 0)
    return code


if __name__ == '__main__':
    sys.exit(console_main())
