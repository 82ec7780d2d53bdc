# SPDX-License-Identifier: Apache-2.0

"""Timing and reporting helpers shared by the ik_bench subcommands."""

import json
import os
import platform
import subprocess
import sys
import time

import numpy as np


def machine_info():
    """Describe the machine, interpreter and commit a benchmark ran on."""
    cpu = platform.processor() or platform.machine()
    try:
        with open('/proc/cpuinfo', encoding='utf-8') as cpuinfo:
            for line in cpuinfo:
                if line.startswith('model name'):
                    cpu = line.split(':', 1)[1].strip()
                    break
    except OSError:
        pass
    return {
        'cpu': cpu,
        'cores': os.cpu_count(),
        'python': platform.python_version(),
        'numpy': np.__version__,
        'commit': git_commit(),
    }


def git_commit():
    """Return the short commit of the source tree, or 'unknown' outside git."""
    here = os.path.dirname(os.path.abspath(__file__))
    try:
        out = subprocess.run(['git', 'rev-parse', '--short', 'HEAD'], cwd=here,
                             capture_output=True, text=True, timeout=5)
    except (OSError, subprocess.TimeoutExpired):
        return 'unknown'
    return out.stdout.strip() if out.returncode == 0 else 'unknown'


def time_per_call(fn, calls_per_block, blocks):
    """Time ``fn()`` in ``blocks`` blocks of ``calls_per_block`` calls each.

    Returns:
        (blocks,) array of seconds per call, one entry per block.

    """
    fn()  # warm up caches and lazy imports
    samples = np.empty(blocks)
    for b in range(blocks):
        start = time.perf_counter_ns()
        for _ in range(calls_per_block):
            fn()
        samples[b] = (time.perf_counter_ns() - start) * 1e-9 / calls_per_block
    return samples


def summarize(seconds):
    """Return median and 95th percentile of an array of durations, in seconds."""
    return {'median_s': float(np.median(seconds)), 'p95_s': float(np.percentile(seconds, 95))}


def format_duration(seconds):
    """Format a duration with a unit that keeps three significant digits."""
    if seconds < 1e-6:
        return f'{seconds * 1e9:.3g} ns'
    if seconds < 1e-3:
        return f'{seconds * 1e6:.3g} µs'
    if seconds < 1.0:
        return f'{seconds * 1e3:.3g} ms'
    return f'{seconds:.3g} s'


def print_table(headers, rows, out=None):
    """Print a Markdown table (pasteable into the README) to ``out`` (stdout)."""
    out = sys.stdout if out is None else out
    widths = [max(len(str(h)), *(len(str(r[i])) for r in rows)) for i, h in enumerate(headers)]
    line = '| ' + ' | '.join(str(h).ljust(w) for h, w in zip(headers, widths)) + ' |'
    print(line, file=out)
    print('|' + '|'.join('-' * (w + 2) for w in widths) + '|', file=out)
    for row in rows:
        print('| ' + ' | '.join(str(c).ljust(w) for c, w in zip(row, widths)) + ' |', file=out)


def print_json(obj, out=None):
    """Print one JSON object on one line to ``out`` (stdout)."""
    out = sys.stdout if out is None else out
    print(json.dumps(obj, sort_keys=True), file=out)


def print_title(benchmark, detail, machine, out=None):
    """Print the line above a report's tables: what ran, on which CPU, at which commit."""
    out = sys.stdout if out is None else out
    print(f"ik_bench {benchmark}  ({detail}; {machine['cpu']}; commit {machine['commit']})",
          file=out)


def cell(value):
    """Format a table cell: floats to 4 significant digits, None as '-'."""
    if isinstance(value, float):
        return f'{value:.4g}'
    return '-' if value is None else value


def print_measures(items, out=None):
    """Print (name, value) pairs as a Markdown table of formatted cells."""
    print_table(['measure', 'value'], [(k, cell(v)) for k, v in items], out)


def real_time_ticks(period: float, seconds: float, late: list):
    """Yield the clock (s from the start) at each tick of ``period`` for ``seconds``, in real time.

    Each tick is started on its period's instant (a sleep until then); how
    late it started (s) is appended to ``late``, the last one's too (the tick
    that ends the run, not yielded).
    """
    started = time.perf_counter()
    k = 0
    while True:
        due = started + k * period
        k += 1
        wait = due - time.perf_counter()
        if wait > 0.0:
            time.sleep(wait)
        now = time.perf_counter() - started
        late.append(max(0.0, now - (due - started)))
        if now >= seconds:
            return
        yield now
