# SPDX-License-Identifier: Apache-2.0

"""``ik_bench viewer``: ik_viewer beside a moving arm: the frames a browser gets, the CPU.

The node (a separate process, iiwa14) tracks a 50 Hz stream of targets on a
10 cm circle; ik_viewer (another process) draws it; one browser connection
(a websocket client speaking viser's protocol, no rendering) counts the
windows of link poses it receives per second: the frame rate a browser is
fed (a browser renders at most that many distinct poses; its own frame rate
is its GPU's). The CPU of both processes (user + system, /proc) is taken
over the same seconds, and over as many with the arm at rest and no
browser: the viewer's cost beside the node.
"""

import os
import subprocess
import sys
import time

from ik_node.bench.common import machine_info, print_json, print_table
from ik_node.bench.handles import HandleHarness
from ik_node.bench.session import cpu_seconds
from ik_node.core.warm import die_with_parent
import numpy as np

LINK = '/robot/iiwa_link_4'


def decode_window(frame: bytes):
    """Return the messages (dicts with 'type') of one viser server frame.

    viser 1.1.1's wire format (viser/infra/_infra.py): 8 bytes of the
    msgpack's size, 8 of its zstd-compressed size, the compressed msgpack
    (``{'messages': [...]}``), then raw binary buffers (left as placeholders).
    """
    import msgspec
    import zstandard
    size = int.from_bytes(frame[0:8], 'little')
    packed = int.from_bytes(frame[8:16], 'little')
    inner = zstandard.ZstdDecompressor().decompress(frame[16:16 + packed],
                                                    max_output_size=size)
    return msgspec.msgpack.decode(inner)['messages']


def _windows(ws, seconds):
    """Count the server windows that pose LINK in ``seconds``; return (count, messages)."""
    count, total = 0, 0
    end = time.monotonic() + seconds
    while time.monotonic() < end:
        try:
            frame = ws.recv(timeout=max(0.01, end - time.monotonic()))
        except TimeoutError:
            break
        if not isinstance(frame, bytes):
            continue
        messages = decode_window(frame)
        total += len(messages)
        count += any(m.get('name') == LINK and m.get('type') == 'SetPositionMessage'
                     for m in messages)
    return count, total


def run(args):
    """Measure and print (or one JSON object)."""
    import viser
    from websockets.sync.client import connect
    h = HandleHarness({'publish_rate': 100.0})
    port = 18000 + os.getpid() % 1000
    viewer = subprocess.Popen([sys.executable, '-m', 'ik_node.ros.viewer', '--port', str(port)],
                              env=dict(os.environ, ROS_DOMAIN_ID=str(h.domain)),
                              stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
                              preexec_fn=die_with_parent())
    try:
        h.spin(8.0)   # the viewer starts and draws the model
        node0, view0, t0 = cpu_seconds(h.proc.pid), cpu_seconds(viewer.pid), time.perf_counter()
        h.spin(args.seconds)
        rest = time.perf_counter() - t0
        rest_node = (cpu_seconds(h.proc.pid) - node0) / rest
        rest_viewer = (cpu_seconds(viewer.pid) - view0) / rest
        ws = connect(f'ws://localhost:{port}', subprotocols=[f'viser-v{viser.__version__}'],
                     max_size=None)
        _windows(ws, 2.0)   # the scene as it stands
        centre = h.chain.forward(np.array(h.received[-1][2]))
        node0, view0, t0 = cpu_seconds(h.proc.pid), cpu_seconds(viewer.pid), time.perf_counter()
        frames = messages = 0
        sent = 0
        while time.perf_counter() - t0 < args.seconds:
            pose = centre.copy()
            angle = 2 * np.pi * 0.5 * (time.perf_counter() - t0)
            pose[1, 3] += 0.1 * np.sin(angle)
            pose[2, 3] += 0.1 * (np.cos(angle) - 1.0)
            h.send(pose)
            sent += 1
            f, m = _windows(ws, 0.02)
            frames, messages = frames + f, messages + m
            h.spin(0.0)
        moving = time.perf_counter() - t0
        report = {
            'benchmark': 'viewer', 'machine': machine_info(), 'seconds': args.seconds,
            'load': os.getloadavg()[0], 'targets_sent': sent,
            'frames_per_s': frames / moving, 'messages_per_s': messages / moving,
            'cpu_node_moving': (cpu_seconds(h.proc.pid) - node0) / moving,
            'cpu_viewer_moving': (cpu_seconds(viewer.pid) - view0) / moving,
            'cpu_node_rest': rest_node, 'cpu_viewer_rest': rest_viewer}
        ws.close()
    finally:
        viewer.terminate()
        try:
            viewer.wait(timeout=10)
        except subprocess.TimeoutExpired:
            viewer.kill()
        h.close()
    if args.json:
        print_json(report)
        return 0
    info = report['machine']
    print(f"ik_bench viewer  (iiwa14; {info['cpu']}, {info['cores']} cores, load "
          f"{report['load']:.2f}; commit {info['commit']})")

    def pct(v):
        return f'{100 * v:.1f} % of a core'
    print_table(['', 'arm at rest, no browser', 'arm moving, one browser'], [
        ('link poses to the browser', '', f"{report['frames_per_s']:.1f} per s"),
        ('viewer messages', '', f"{report['messages_per_s']:.0f} per s"),
        ('ik_viewer CPU', pct(report['cpu_viewer_rest']), pct(report['cpu_viewer_moving'])),
        ('ik_node CPU', pct(report['cpu_node_rest']), pct(report['cpu_node_moving']))])
    return 0


def add_parser(subparsers):
    """Register the ``viewer`` subcommand."""
    p = subparsers.add_parser('viewer', help='ik_viewer beside a moving arm: frames, CPU')
    p.add_argument('--seconds', type=float, default=10.0, help='seconds at rest and moving')
    p.set_defaults(func=run)
