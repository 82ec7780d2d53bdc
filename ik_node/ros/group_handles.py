# SPDX-License-Identifier: Apache-2.0

"""RViz handles of several end effectors: one 6-DoF handle per end effector, its own colour.

With ``end_effectors`` the node serves, on ``~/target_marker``, a handle
named after each end effector at its tip (or the point its look-at task
looks at), coloured by that end effector's verdict
(:class:`ik_node.core.motion.group.EffectorArrival`: green arrived or
moving, orange blocked, red unreachable, grey no target yet). Dragging one
streams targets to that end effector as ``~/<name>/target_pose`` does, once
per tick (the newest pose; the others counted as coalesced). Each end
effector with an elbow also has a pole handle, ``<name>_pole``, at its pole
(or its elbow before one): dragging it sets that arm's pole as
``~/<name>/pole_target`` does. The menu: reset and smoothing. Whose
feedback counts and when a drag is on: :class:`ik_node.ros.handles.HandlePolicy`,
as one arm's handles.
"""

from typing import Callable, Dict, Optional, Sequence

from geometry_msgs.msg import PoseStamped
from ik_node.ros.conversions import check_target, frames_at, matrix_to_pose, pose_matrix, \
    RejectedMessage
from ik_node.ros.handles import handle_values, HandlePolicy, LOOK_AHEAD_M, moved, RESET, \
    show_pole, SMOOTHING, target_marker
import numpy as np
from visualization_msgs.msg import InteractiveMarkerFeedback as Feedback, MenuEntry

# An end effector's verdict -> the handle's look (ik_node.ros.handles.LOOKS).
LOOK_OF_STATE = {'arrived': 'free', 'moving': 'free', 'blocked': 'collision',
                 'unreachable': 'unreachable', 'holding': 'none'}


def pole_name(name: str) -> str:
    """Return the pole handle's name of end effector ``name``."""
    return f'{name}_pole'


def group_menu(smoothing: bool):
    """Return the context menu of the group's handles: reset, smoothing (checked when on)."""
    return [MenuEntry(id=RESET, parent_id=0, title='Reset (back to the initial joints)',
                      command_type=MenuEntry.FEEDBACK),
            MenuEntry(id=SMOOTHING, parent_id=0,
                      title=('[x] ' if smoothing else '[ ] ') + 'Smoothing',
                      command_type=MenuEntry.FEEDBACK)]


class GroupHandles:
    """One handle per end effector: markers served, feedback taken, targets streamed.

    Args:
        server: a MarkerServer (or anything with put / move / erase / publish).
        node: the IKNode in group mode (its session, group front, parameters).
        clock: the monotonic clock of drags, s.
        names: the end effectors' names (the handles' names).

    """

    def __init__(self, server, node, clock: Callable[[], float], names: Sequence[str]):
        """No markers until :meth:`use_model`."""
        self.server, self._node, self._clock = server, node, clock
        self.names = list(names)
        self.poles_of = {pole_name(n): n for n in self.names}   # pole handle -> end effector
        self.drags = HandlePolicy(self.names + list(self.poles_of))
        self.targets = self.poles = 0
        self._shown: Dict[str, np.ndarray] = {}
        self._looks: Dict[str, str] = {}
        self._smoothing: Optional[bool] = None

    def use_model(self) -> None:
        """Serve a handle per end effector at its tip (and at its elbow, its pole's)."""
        self._shown.clear()
        self._looks.clear()
        self._smoothing = None
        self.refresh()

    def _poses(self):
        """Return per end effector where its handle sits (4, 4), base frame."""
        tracker = self._node.session.tracker
        out = []
        for lane, tip in zip(tracker.lanes, tracker.solver.forward(tracker.q)):
            task = lane.effector.task
            if task.name != 'look_at':
                out.append(tip)
                continue
            at = tip.copy()
            point = lane.target[:3, 3]
            if np.linalg.norm(point - tip[:3, 3]) > LOOK_AHEAD_M * 0.01:
                at[:3, 3] = point
            else:
                at[:3, 3] = tip[:3, 3] + LOOK_AHEAD_M * (tip[:3, :3] @ np.array(task.tool_axis))
            out.append(at)
        return out

    def refresh(self) -> None:
        """Follow each arm with handles nobody drags, recolour, re-menu; publish the changes."""
        node = self._node
        session = node.session
        now = self._clock()
        arrival = session.arrival(node.now_s())
        smoothing = bool(node.get_parameter('smoothing').value)
        base = session.chain.base_link
        for name, pose, verdict in zip(self.names, self._poses(), arrival.effectors):
            look = LOOK_OF_STATE.get(verdict.state, 'none')
            dragged = self.drags.dragging(name, now)
            if look != self._looks.get(name) or smoothing != self._smoothing:
                shown = self._shown[name] if dragged and name in self._shown else pose
                marker = target_marker(base, matrix_to_pose(shown), look, group_menu(smoothing),
                                       name=name, title=f'ik_node {name}')
                self.server.put(marker)
                self._shown[name], self._looks[name] = shown, look
            elif not dragged and moved(self._shown[name], pose):
                self.server.move(name, matrix_to_pose(pose))
                self._shown[name] = pose
        self._refresh_poles(base, now)
        self._smoothing = smoothing
        self.server.publish()

    def _refresh_poles(self, base: str, now: float) -> None:
        """Put each elbow's pole handle at its pole (at the elbow before one), undragged."""
        tracker = self._node.session.tracker
        elbows = tracker.solver.elbow_points(tracker.q)
        for name, lane, elbow in zip(self.names, tracker.lanes, elbows):
            handle = pole_name(name)
            if elbow is None or self.drags.dragging(handle, now):
                continue
            show_pole(self.server, self._shown, base, elbow if lane.pole is None else lane.pole,
                      handle, f'ik_node {name} pole')

    def on_feedback(self, msg: Feedback) -> Optional[str]:
        """Take one feedback message; return why it was refused (counted), or None."""
        now = self._clock()
        refused = self.drags.admit(msg.marker_name, msg.client_id, msg.event_type, now)
        if refused is not None:
            return refused
        node = self._node
        if msg.event_type == Feedback.MENU_SELECT:
            if msg.menu_entry_id == RESET:
                node.reset_motion()
                return None
            if msg.menu_entry_id == SMOOTHING:
                return node.set_from_handle('smoothing',
                                            not node.get_parameter('smoothing').value)
            return self.drags.refuse('marker_menu_unknown')
        if msg.event_type != Feedback.POSE_UPDATE:
            return None
        try:
            p, q = check_target(PoseStamped(header=msg.header, pose=msg.pose),
                                frames_at(node.frames, node.session.q))
        except RejectedMessage as exc:
            return self.drags.refuse(f'marker_{exc.reason}')
        value = pose_matrix(p, q)
        self._shown[msg.marker_name] = value
        self.drags.offer(msg.marker_name, value)
        return None

    def apply(self, now: float) -> None:
        """Stream each end effector's newest dragged target and pole into the session.

        Once per tick (the newest of each; the others counted as coalesced).
        """
        session = self._node.session
        for name in self.names:
            target = self.drags.newest(name)
            if target is not None:
                session.target_of(name, now, target)
                self.targets += 1
            pole = self.drags.newest(pole_name(name))
            if pole is not None:
                session.pole_of(name, pole[:3, 3].copy())
                self.poles += 1

    def values(self) -> Dict[str, str]:
        """Diagnostics: handle targets streamed, poses coalesced, feedback refused by reason."""
        return handle_values(self.targets, self.poles, self.drags)
