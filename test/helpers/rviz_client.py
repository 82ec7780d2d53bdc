# SPDX-License-Identifier: Apache-2.0

"""A client of interactive markers that behaves as RViz's does, for tests over DDS.

Its rules are those of ros-visualization/interactive_markers' C++
``InteractiveMarkerClient`` (rolling, src/interactive_marker_client.cpp),
which rviz_default_plugins' InteractiveMarkers display runs, and of RViz's
``InteractiveMarker::publishFeedback``
(rviz_default_plugins/displays/interactive_markers/interactive_marker.cpp):

- connect: a ``get_interactive_markers`` client, a feedback publisher and an
  update subscription, both QoS(100) (reliable, volatile);
- IDLE -> INITIALIZE once the service is ready: one request, sent again
  when no answer came within a second (request_timeout);
- an update of type KEEP_ALIVE is ignored; an update whose ``seq_num`` is
  not one more than the last one taken resets the client (back to IDLE: the
  markers are forgotten and asked for again); updates are queued;
- INITIALIZE -> RUNNING on the answer: the queued updates numbered at or
  below its ``sequence_number`` are dropped, its markers are taken, then
  the rest of the queue is applied in order (markers replaced whole, poses
  and headers set, names erased);
- feedback carries the client's id; a marker whose header stamp is zero is
  locked to its frame and its feedback is in that frame (stamp zero), any
  other's is in the fixed frame.

TF is not modelled: every frame is taken as known (the node's markers are in
its base frame, and the tests use the base frame as the fixed frame).
"""

import rclpy
from rclpy.qos import QoSProfile
from visualization_msgs.msg import InteractiveMarkerFeedback, InteractiveMarkerUpdate
from visualization_msgs.srv import GetInteractiveMarkers

IDLE, INITIALIZE, RUNNING = 'idle', 'initialize', 'running'
REQUEST_TIMEOUT_S = 1.0


class RvizLikeClient:
    """Interactive markers as RViz's display sees them (module docstring).

    Args:
        node: a client rclpy node (spun by the test).
        namespace: the server's namespace, e.g. '/ik_node/target_marker'.
        fixed_frame: RViz's fixed frame.
        client_id: the id RViz sends (its display's name).

    Attributes:
        markers: name -> InteractiveMarker as the client holds it.
        state: IDLE, INITIALIZE or RUNNING.
        resets: how often an out-of-order update reset the client.
        updates: every update received (for the tests' own checks).

    """

    def __init__(self, node, namespace: str, fixed_frame: str,
                 client_id: str = '/rviz2/InteractiveMarkers'):
        """Connect (module docstring)."""
        self.node, self.fixed_frame, self.client_id = node, fixed_frame, client_id
        self.markers = {}
        self.state = IDLE
        self.resets = 0
        self.updates = []
        self._queue = []
        self._first_update = True
        self._last_seq = 0
        self._answer = None
        self._request_time = None
        self._service = node.create_client(GetInteractiveMarkers,
                                           f'{namespace}/get_interactive_markers')
        self.feedback_pub = node.create_publisher(InteractiveMarkerFeedback,
                                                  f'{namespace}/feedback', QoSProfile(depth=100))
        node.create_subscription(InteractiveMarkerUpdate, f'{namespace}/update',
                                 self._on_update, QoSProfile(depth=100))

    # -- the client's cycle (InteractiveMarkerClient::update) ---------------------------------

    def update(self) -> None:
        """Advance the state machine once (RViz calls this every frame)."""
        ready = self._service.service_is_ready()
        if self.state == IDLE:
            if ready:
                self._request()
                self.state = INITIALIZE
        elif self.state == INITIALIZE:
            if not ready:
                self._reset()
            elif self._answer is None:
                now = self.node.get_clock().now().nanoseconds * 1e-9
                if now - self._request_time > REQUEST_TIMEOUT_S:
                    self._request()
            else:
                self._initialize()
        elif self.state == RUNNING:
            if not ready:
                self._reset()
                return
            while self._queue:
                self._apply(self._queue.pop(0))

    def _request(self) -> None:
        self._request_time = self.node.get_clock().now().nanoseconds * 1e-9
        future = self._service.call_async(GetInteractiveMarkers.Request())
        future.add_done_callback(self._on_answer)

    def _on_answer(self, future) -> None:
        if self.state == INITIALIZE and future.result() is not None:
            self._answer = future.result()

    def _initialize(self) -> None:
        seq = self._answer.sequence_number
        self._queue = [u for u in self._queue if u.seq_num > seq]
        self.markers = {m.name: m for m in self._answer.markers}
        self.state = RUNNING

    def _on_update(self, msg: InteractiveMarkerUpdate) -> None:
        self.updates.append(msg)
        if msg.type == InteractiveMarkerUpdate.KEEP_ALIVE:
            return
        if not self._first_update and msg.seq_num != self._last_seq + 1:
            self._reset()
            self.resets += 1
            return
        self._first_update = False
        self._last_seq = msg.seq_num
        self._queue.append(msg)

    def _reset(self) -> None:
        self.state = IDLE
        self._first_update = True
        self._answer = None
        self._queue = []
        self.markers = {}

    def _apply(self, msg: InteractiveMarkerUpdate) -> None:
        for marker in msg.markers:
            self.markers[marker.name] = marker
        for pose in msg.poses:
            if pose.name in self.markers:
                self.markers[pose.name].pose = pose.pose
                self.markers[pose.name].header = pose.header
        for name in msg.erases:
            self.markers.pop(name, None)

    # -- what the user does ---------------------------------------------------------------------

    def feedback(self, name: str, event: int, pose=None, control: str = '',
                 menu_entry_id: int = 0) -> InteractiveMarkerFeedback:
        """Publish feedback on marker ``name`` as RViz does; return the message.

        ``pose``: the marker's pose in its frame (a locked marker) or in the
        fixed frame; None: the pose the client holds.
        """
        marker = self.markers.get(name)
        msg = InteractiveMarkerFeedback(client_id=self.client_id, marker_name=name,
                                        control_name=control, event_type=event,
                                        menu_entry_id=menu_entry_id)
        locked = marker is not None and marker.header.stamp.sec == 0 \
            and marker.header.stamp.nanosec == 0
        msg.header.frame_id = marker.header.frame_id if locked else self.fixed_frame
        msg.pose = pose if pose is not None else (marker.pose if marker else msg.pose)
        self.feedback_pub.publish(msg)
        return msg

    def drag(self, name: str, poses, spin, gap_s: float = 0.02) -> None:
        """Drag ``name`` through ``poses``: MOUSE_DOWN, POSE_UPDATEs (spun between), MOUSE_UP."""
        self.feedback(name, InteractiveMarkerFeedback.MOUSE_DOWN, control='move_rotate_3d')
        for pose in poses:
            self.feedback(name, InteractiveMarkerFeedback.POSE_UPDATE, pose, 'move_rotate_3d')
            spin(gap_s)
        self.feedback(name, InteractiveMarkerFeedback.MOUSE_UP, poses[-1], 'move_rotate_3d')


def spin_client(executor, client: RvizLikeClient, seconds: float) -> None:
    """Spin ``executor`` for ``seconds``, running the client's cycle as RViz's frames do."""
    import time
    end = time.monotonic() + seconds
    while time.monotonic() < end and rclpy.ok(context=executor.context):
        executor.spin_once(timeout_sec=0.01)
        client.update()
