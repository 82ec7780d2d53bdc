# SPDX-License-Identifier: Apache-2.0

"""A client of a viser server speaking its browser client's wire protocol, for tests.

From viser 1.1.1 (viser/infra/_infra.py, _messages.py): the websocket's
subprotocol is ``viser-v<version>`` (another version is refused); the
browser sends each message as a msgpack map with its class name in
``type`` (a gizmo: ``TransformControlsDragStartMessage``, ``...UpdateMessage``
with ``wxyz`` and ``position``, ``...DragEndMessage``; ``owner`` '' is the
server's scene); the server sends windows of messages: 8 bytes of the
msgpack's size, 8 of its zstd-compressed size, the compressed msgpack
(``{'messages': [...]}``), then raw binary buffers (numpy arrays, left as
placeholders here): ik_bench viewer's ``decode_window``, which both use.
"""

import time

from ik_node.bench.viewer import decode_window
import msgspec
from websockets.sync.client import connect


class ViserClient:
    """One browser's connection to a viser server on localhost."""

    def __init__(self, port: int, version: str):
        """Connect as a browser of viser ``version`` does."""
        self.ws = connect(f'ws://localhost:{port}', subprotocols=[f'viser-v{version}'],
                          max_size=None)
        self.messages = []

    def receive(self, seconds: float):
        """Take the server's messages for ``seconds``; return the ones received now."""
        new = []
        end = time.monotonic() + seconds
        while time.monotonic() < end:
            try:
                frame = self.ws.recv(timeout=max(0.01, end - time.monotonic()))
            except TimeoutError:
                break
            if isinstance(frame, bytes):
                new += decode_window(frame)
        self.messages += new
        return new

    def newest(self, kind: str, name: str):
        """Return the newest message of type ``kind`` for scene node ``name`` (None: none)."""
        for message in reversed(self.messages):
            if message.get('type') == kind and message.get('name') == name:
                return message
        return None

    def send(self, kind: str, **fields) -> None:
        """Send one message of type ``kind`` as the browser client does."""
        self.ws.send(msgspec.msgpack.encode(dict(fields, type=kind, owner='')))

    def drag(self, name: str, poses, gap_s: float = 0.03) -> None:
        """Drag gizmo ``name`` through poses ((wxyz, position) pairs): start, updates, end."""
        self.send('TransformControlsDragStartMessage', name=name)
        for wxyz, position in poses:
            self.send('TransformControlsUpdateMessage', name=name, wxyz=[float(v) for v in wxyz],
                      position=[float(v) for v in position])
            self.receive(gap_s)
        self.send('TransformControlsDragEndMessage', name=name)

    def close(self) -> None:
        """Close the connection (as a closed browser tab does)."""
        self.ws.close()
