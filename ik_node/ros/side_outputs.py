# SPDX-License-Identifier: Apache-2.0

"""The node's side outputs: ``/diagnostics``, ``~/markers`` and the RViz handles, by the clock.

Sent from the joint-state tick, right after its command, each at its own
rate below the tick's (they are for people and RViz): a separate timer
firing first would delay a command. Ticks that run late do not starve them
(each is due by the clock, at an offset of its own), and one that fell
behind does not burst.
"""

from diagnostic_msgs.msg import DiagnosticArray, DiagnosticStatus, KeyValue
from geometry_msgs.msg import Point
from ik_node.ros import diagnostics
from ik_node.ros.conversions import matrix_to_pose
from visualization_msgs.msg import Marker, MarkerArray

# About these rates (Hz), below the joint-state rate.
DIAGNOSTICS_HZ = 2.0
MARKERS_HZ = 5.0
# The RViz handles follow the arm at this rate (only moves of 1 mm / 0.01 rad are sent).
HANDLES_HZ = 20.0


class SideOutputs:
    """Diagnostics, markers and handles of an IKNode, each when due (module docstring).

    Args:
        node: the IKNode (its publishers are made here; its counters,
            session, feedback, collision and handles are read).
        guarded: wraps a publishing function as the node's callbacks are
            (an exception logged and counted, the node going on).

    """

    def __init__(self, node, guarded):
        """Make the publishers; nothing is due before the first tick."""
        self._node = node
        self._diag_pub = node.create_publisher(DiagnosticArray, '/diagnostics', 10)
        self._marker_pub = node.create_publisher(MarkerArray, '~/markers', 10)
        # [period s, offset s, next due time (None: from the first tick), publish].
        self._table = []
        for k, (hz, publish) in enumerate(((DIAGNOSTICS_HZ, self._diagnostics),
                                           (MARKERS_HZ, self._markers),
                                           (HANDLES_HZ, self._handles))):
            self._table.append([1.0 / hz, k * 0.5 / hz, None, guarded(publish)])

    def publish_due(self, now: float) -> None:
        """Publish each side output (diagnostics, markers) that is due at ``now`` (s)."""
        for side in self._table:
            period, offset, due, publish = side
            if due is None or now < due - period:   # the first tick, or the clock went back
                due = side[2] = now + offset
            if now >= due:
                publish()
                due += period
                side[2] = due if due > now else now + period   # fell behind: no burst

    def _diagnostics(self):
        """Publish one DiagnosticStatus: reachability, residuals, counts (see .diagnostics)."""
        node = self._node
        now = node.now_s()
        status = None if node.session is None else node.session.status(now)
        stale = diagnostics.feedback_problem(node.feedback_topic, node.feedback, now)
        level, message = diagnostics.level_and_message(status, stale)
        values = {'rejected_messages': str(sum(node.rejected.values())),
                  'callback_errors': str(node.callback_errors),
                  'worker_errors': str(node.worker.errors)}
        values.update({f'rejected_{k}': str(v) for k, v in sorted(node.rejected.items())})
        values['targets_received'] = str(node.targets_received)
        values['poles_received'] = str(node.poles_received)
        values['twists_received'] = str(node.twists_received)
        values['command_output'] = f'{node.output} on {node.command_topic}'
        values.update(diagnostics.feedback_values(node.feedback_topic, node.feedback, now))
        if node.handles is not None:
            values.update(node.handles.values())
            values['handle_feedback_dropped_unread'] = str(node.handle_gaps.missing)
        values['targets_dropped_unread'] = str(node.target_gaps.missing)
        values['twists_dropped_unread'] = str(node.twist_gaps.missing)
        values['poles_dropped_unread'] = str(node.pole_gaps.missing)
        values['points_dropped_unread'] = str(node.point_gaps.missing)
        if status is not None:
            values.update(diagnostics.tracker_values(status))
        if node.session is not None:
            values.update(node.collision.values(node.session.q))
        if node.stream is not None:
            values.update(diagnostics.stream_values(node.stream, node.clock.late_ticks,
                                                    node.clock.jumps_back,
                                                    node.clock.jumps_forward))
        msg = DiagnosticArray(status=[DiagnosticStatus(
            level=level, name='ik_node: inverse kinematics', message=message,
            hardware_id='ik_node', values=[KeyValue(key=k, value=v) for k, v in values.items()])])
        msg.header.stamp = node.get_clock().now().to_msg()
        self._diag_pub.publish(msg)

    def _markers(self):
        """Publish the target arrow and the planned tip path (keys still ahead)."""
        node = self._node
        if node.session is None:
            return
        stamp = node.get_clock().now().to_msg()
        target = Marker(type=Marker.ARROW, action=Marker.ADD, id=0, ns='target')
        target.header.frame_id, target.header.stamp = node.chain.base_link, stamp
        target.pose = matrix_to_pose(node.session.target_pose)
        target.scale.x, target.scale.y, target.scale.z = 0.1, 0.015, 0.015
        target.color.r, target.color.g, target.color.a = 1.0, 0.4, 1.0
        path = Marker(type=Marker.LINE_STRIP, action=Marker.ADD, id=1, ns='planned_path')
        path.header.frame_id, path.header.stamp = node.chain.base_link, stamp
        path.scale.x = 0.005
        path.color.b, path.color.g, path.color.a = 1.0, 0.6, 1.0
        path.pose.orientation.w = 1.0
        path.points = [Point(x=x, y=y, z=z)
                       for x, y, z in node.session.planned_tip_path().tolist()]
        if len(path.points) < 2:
            path.action = Marker.DELETE
        obstacles = node.collision.markers(node.chain.base_link, stamp)
        self._marker_pub.publish(MarkerArray(markers=[target, path] + obstacles))

    def _handles(self) -> None:
        """Let the RViz handles follow the arm, show reachability and the menu's state."""
        node = self._node
        if node.handles is not None:
            node.handles.refresh()
