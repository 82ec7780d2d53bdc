# SPDX-License-Identifier: Apache-2.0

"""An interactive marker server speaking the protocol of RViz's InteractiveMarkers display.

The protocol is that of ros-visualization/interactive_markers (rolling: the
Python ``InteractiveMarkerServer`` and the C++ ``InteractiveMarkerClient``
that rviz_default_plugins uses), written here because that package has no
PyPI wheel: a node that runs where only the wheels are must serve its
handles all the same. In the namespace ``ns``:

- service ``ns/get_interactive_markers`` (visualization_msgs/GetInteractiveMarkers):
  every marker and the sequence number of the last update sent;
- topic ``ns/update`` (visualization_msgs/InteractiveMarkerUpdate, reliable,
  keep last 100): type UPDATE, ``seq_num`` one more than the last, with full
  markers, pose updates and erases; the client drops KEEP_ALIVE, drops
  updates whose number is at or below the service's, and starts over (asks
  the service again) on a gap;
- topic ``ns/feedback`` (visualization_msgs/InteractiveMarkerFeedback):
  what the client's user does (handed to ``on_feedback``).

Like upstream, changes are collected (:meth:`put`, :meth:`move`,
:meth:`erase`) and go out in one numbered message (:meth:`publish`).
"""

from typing import Callable, Dict

from geometry_msgs.msg import Pose
from rclpy.qos import QoSProfile
from visualization_msgs.msg import InteractiveMarker, InteractiveMarkerFeedback, \
    InteractiveMarkerPose, InteractiveMarkerUpdate
from visualization_msgs.srv import GetInteractiveMarkers

# Upstream's depths (interactive_marker_server.py): updates keep 100; the
# feedback keeps 10 here, not 1, so that a MOUSE_UP is not lost behind a
# burst of pose updates (the handles coalesce those anyway).
UPDATE_DEPTH = 100
FEEDBACK_DEPTH = 10


class MarkerServer:
    """Interactive markers served to RViz-like clients (module docstring).

    Args:
        node: the rclpy node that owns the interfaces.
        namespace: the markers' namespace (``~/target_marker``: the node's).
        on_feedback: called with each InteractiveMarkerFeedback and its
            message info (the node's guarded callback).

    """

    def __init__(self, node, namespace: str,
                 on_feedback: Callable[[InteractiveMarkerFeedback, object], None]):
        """Create the service, the update publisher and the feedback subscription."""
        self.seq_num = 0
        self.markers: Dict[str, InteractiveMarker] = {}
        self._full: Dict[str, InteractiveMarker] = {}
        self._poses: Dict[str, InteractiveMarkerPose] = {}
        self._erased: Dict[str, None] = {}
        self._node = node
        self._service = node.create_service(GetInteractiveMarkers,
                                            f'{namespace}/get_interactive_markers',
                                            self._answer)
        self._updates = node.create_publisher(InteractiveMarkerUpdate, f'{namespace}/update',
                                              QoSProfile(depth=UPDATE_DEPTH))
        self._feedback = node.create_subscription(InteractiveMarkerFeedback,
                                                  f'{namespace}/feedback', on_feedback,
                                                  QoSProfile(depth=FEEDBACK_DEPTH))

    def put(self, marker: InteractiveMarker) -> None:
        """Add or replace a marker (sent whole with the next publish)."""
        self._erased.pop(marker.name, None)
        self._poses.pop(marker.name, None)
        self._full[marker.name] = marker
        self.markers[marker.name] = marker

    def move(self, name: str, pose: Pose) -> bool:
        """Set a marker's pose (its frame kept); False when there is no such marker."""
        marker = self.markers.get(name)
        if marker is None:
            return False
        marker.pose = pose
        if name not in self._full:
            self._poses[name] = InteractiveMarkerPose(header=marker.header, pose=pose,
                                                      name=name)
        return True

    def erase(self, name: str) -> None:
        """Remove a marker (the erase goes out with the next publish)."""
        if self.markers.pop(name, None) is not None:
            self._full.pop(name, None)
            self._poses.pop(name, None)
            self._erased[name] = None

    @property
    def pending(self) -> bool:
        """True when changes wait for :meth:`publish`."""
        return bool(self._full or self._poses or self._erased)

    def publish(self) -> None:
        """Send the changes collected since the last publish as one numbered UPDATE."""
        if not self.pending:
            return
        self.seq_num += 1
        update = InteractiveMarkerUpdate(type=InteractiveMarkerUpdate.UPDATE,
                                         seq_num=self.seq_num, server_id=self._node.get_name(),
                                         markers=list(self._full.values()),
                                         poses=list(self._poses.values()),
                                         erases=list(self._erased))
        self._full, self._poses, self._erased = {}, {}, {}
        self._updates.publish(update)

    def _answer(self, request, response):
        """get_interactive_markers: every marker as it stands, and the last update's number.

        Changes not yet published are included: their update, numbered after
        this answer, replaces them with themselves (the client applies it).
        """
        response.sequence_number = self.seq_num
        response.markers = list(self.markers.values())
        return response

    def close(self) -> None:
        """Erase every marker for the clients and destroy the interfaces."""
        for name in list(self.markers):
            self.erase(name)
        self.publish()
        self._node.destroy_service(self._service)
        self._node.destroy_publisher(self._updates)
        self._node.destroy_subscription(self._feedback)
