# SPDX-License-Identifier: Apache-2.0

"""Handles to drag in RViz: a 6-DoF one at the tip, one for the elbow pole, and a context menu.

:class:`HandlePolicy` decides (plain Python, tested without DDS): whose
feedback counts (a known marker, one client at a time as upstream's server
rules: another client's is refused for a second), when a drag is on (from
MOUSE_DOWN or the first pose update to MOUSE_UP, or half a second without
feedback: a lost MOUSE_UP or a closed window), and coalescing: the newest
dragged pose per handle waits for the next tick, which streams it as a
target (smoothing and every limit apply, as to ``~/target_pose``); the
poses it replaced are counted. :class:`TargetHandles` is the node's side:
the markers (:mod:`ik_node.ros.marker_server`), the target handle's colour
from the arm's arrival verdict, as /diagnostics reports it (green: arrived
or arriving; orange: held or blocked; red: unreachable or no path), the
handles following the
arm when nobody drags them, and the menu (reset, solver, smoothing).

Frames: markers are in the chain's base frame with a zero stamp, so that
RViz locks them to that frame and sends feedback in it; feedback in any
frame the node knows is taken (the fixed frame of RViz when it is a link of
the description).
"""

import collections
import math
from typing import Callable, Dict, Optional

from geometry_msgs.msg import Point, PointStamped, Pose, PoseStamped, Quaternion
from ik_node.core.motion.arrival import Arrival, Verdict
from ik_node.ros.conversions import check_point, check_target, matrix_to_pose, \
    pose_matrix, RejectedMessage
import numpy as np
from std_msgs.msg import ColorRGBA
from visualization_msgs.msg import InteractiveMarker, InteractiveMarkerControl, \
    InteractiveMarkerFeedback as Feedback, Marker, MenuEntry

TARGET, POLE = 'target', 'pole'
# A drag with no feedback for this long has ended (RViz sends pose updates
# while the mouse moves; MOUSE_UP may be lost with a closed window), s.
DRAG_IDLE_S = 0.5
# A look-at's handle before its first target: this far along the tool axis, m.
LOOK_AHEAD_M = 0.5
# Upstream's rule (interactive_marker_server.py): while one client drags a
# marker, another client's feedback is refused for this long, s.
OTHER_CLIENT_S = 1.0
# A following handle is moved when the arm is this far from it (m, rad).
FOLLOW_M, FOLLOW_RAD = 1e-3, 0.01
TARGET_SCALE_M, POLE_SCALE_M = 0.2, 0.12
LOOKS = {   # the arm's arrival verdict -> (r, g, b), description
    'free': ((0.1, 0.8, 0.2), 'arrived or arriving'),
    'collision': ((1.0, 0.55, 0.0), 'held or blocked (in collision)'),
    'unreachable': ((0.9, 0.1, 0.1), 'unreachable, or no path'),
    'none': ((0.7, 0.7, 0.7), 'drag me'),
}
SOLVERS = ('auto', 'analytic', 'jacobian')
# Menu entry ids (MenuEntry.id > 0; parent 0: top level).
RESET, SOLVER_MENU, SMOOTHING = 1, 2, 3
SOLVER_IDS = {name: 10 + k for k, name in enumerate(SOLVERS)}
EVENTS = {Feedback.KEEP_ALIVE, Feedback.POSE_UPDATE, Feedback.MENU_SELECT,
          Feedback.BUTTON_CLICK, Feedback.MOUSE_DOWN, Feedback.MOUSE_UP}


def look_of(arrival: Optional[Arrival]) -> str:
    """Return the target handle's look of the arm's arrival verdict (None: no target yet).

    'free' (arrived, arriving), 'collision' (held, blocked), 'unreachable'
    (unreachable, no path) or 'none': the colour /diagnostics' level and
    message agree with (ik_node.core.motion.arrival).
    """
    if arrival is None:
        return 'none'
    if arrival.verdict.ok:
        return 'free'
    if arrival.verdict in (Verdict.HELD, Verdict.BLOCKED):
        return 'collision'
    return 'unreachable'


class HandlePolicy:
    """Whose feedback counts, when a drag is on, and the newest pose waiting (module doc).

    Times are seconds of a monotonic clock (a drag is a person's gesture).
    ``counts``: refused feedback by reason, and ``coalesced``: dragged poses
    replaced by a newer one before a tick took them.
    """

    def __init__(self, names):
        """Serve the handles ``names``; nothing dragged yet."""
        self.names = set(names)
        self.counts: Dict[str, int] = collections.Counter()
        self.coalesced = 0
        self._drag: Dict[str, tuple] = {}     # name -> (client_id, last feedback time)
        self._owner: Dict[str, tuple] = {}    # name -> (client_id, last feedback time)
        self._pending: Dict[str, object] = {}

    def admit(self, name: str, client: str, event: int, now: float) -> Optional[str]:
        """Take a feedback event's bookkeeping; return why it is refused, or None.

        Refused: an unknown marker or event type, or another client's while
        one drags (OTHER_CLIENT_S). MOUSE_DOWN and pose updates start or go
        on with a drag, MOUSE_UP ends it.
        """
        if name not in self.names:
            return self.refuse('marker_unknown')
        if event not in EVENTS:
            return self.refuse('marker_event_unknown')
        owner = self._owner.get(name)
        if owner is not None and owner[0] != client and now - owner[1] < OTHER_CLIENT_S:
            return self.refuse('marker_other_client')
        self._owner[name] = (client, now)
        if event in (Feedback.MOUSE_DOWN, Feedback.POSE_UPDATE):
            self._drag[name] = (client, now)
        elif event == Feedback.MOUSE_UP:
            self._drag.pop(name, None)
        elif event == Feedback.KEEP_ALIVE and name in self._drag:
            self._drag[name] = (client, now)
        return None

    def refuse(self, reason: str) -> str:
        """Count a refusal for ``reason``; return the reason."""
        self.counts[reason] += 1
        return reason

    def offer(self, name: str, value) -> None:
        """Keep ``value`` (a checked pose or point) as ``name``'s newest; count one replaced."""
        if name in self._pending:
            self.coalesced += 1
        self._pending[name] = value

    def newest(self, name: str):
        """Return ``name``'s newest dragged value, once (None when none waits)."""
        return self._pending.pop(name, None)

    def dragging(self, name: str, now: float) -> bool:
        """Return True while ``name`` is dragged (not released, fed within DRAG_IDLE_S)."""
        drag = self._drag.get(name)
        if drag is None:
            return False
        if now - drag[1] > DRAG_IDLE_S:
            del self._drag[name]
            return False
        return True


def elbow_point(chain, q) -> np.ndarray:
    """Return the elbow (3,) m, base frame, at joints q: the fourth joint's origin."""
    return np.array(chain.frames(q)[0][3][9:12])


def handle_pose(session) -> np.ndarray:
    """Return where the target handle sits (4, 4), base frame: the tip, or what it looks at.

    A look-at's target is the point looked at, not the tip's pose (a handle at
    the tip would ask the camera to look at itself): its handle is at the
    target's point, or LOOK_AHEAD_M along the tool axis before a target came.
    """
    tip = session.chain.forward(session.q)
    task = session.tracker.solver.task
    if task.name != 'look_at':
        return tip
    at = tip.copy()
    point = session.tracker.target[:3, 3]
    if np.linalg.norm(point - tip[:3, 3]) > LOOK_AHEAD_M * 0.01:
        at[:3, 3] = point
    else:
        at[:3, 3] = tip[:3, 3] + LOOK_AHEAD_M * (tip[:3, :3] @ np.array(task.tool_axis))
    return at


def moved(shown: np.ndarray, actual: np.ndarray) -> bool:
    """Return True when pose ``actual`` (4, 4) is FOLLOW_M / FOLLOW_RAD away from ``shown``."""
    if np.linalg.norm(actual[:3, 3] - shown[:3, 3]) > FOLLOW_M:
        return True
    cos = (np.trace(shown[:3, :3].T @ actual[:3, :3]) - 1.0) / 2.0
    return math.acos(max(-1.0, min(1.0, cos))) > FOLLOW_RAD


# -- the markers -------------------------------------------------------------------------------

def _axis_controls(name: str, rotate: bool):
    """Return the move (and rotate) controls of the three axes, as RViz's 6-DoF tutorial."""
    controls = []
    s = 1.0 / math.sqrt(2.0)
    for axis, quat in (('x', (s, 0.0, 0.0, s)), ('y', (0.0, 0.0, s, s)),
                       ('z', (0.0, s, 0.0, s))):
        modes = [('move', InteractiveMarkerControl.MOVE_AXIS)]
        if rotate:
            modes.append(('rotate', InteractiveMarkerControl.ROTATE_AXIS))
        for verb, mode in modes:
            controls.append(InteractiveMarkerControl(
                name=f'{verb}_{axis}', interaction_mode=mode,
                orientation=Quaternion(x=quat[0], y=quat[1], z=quat[2], w=quat[3]),
                orientation_mode=InteractiveMarkerControl.INHERIT))
    return controls


def _ball(radius: float, rgb, mode: int) -> InteractiveMarkerControl:
    """Return a free-drag control showing a sphere of ``radius`` (m) in colour ``rgb``."""
    ball = Marker(type=Marker.SPHERE, color=ColorRGBA(r=rgb[0], g=rgb[1], b=rgb[2], a=0.8))
    ball.scale.x = ball.scale.y = ball.scale.z = 2.0 * radius
    ball.pose.orientation.w = 1.0
    return InteractiveMarkerControl(name='drag', interaction_mode=mode, always_visible=True,
                                    markers=[ball])


def menu_entries(solver: str, smoothing: bool):
    """Return the context menu: reset, the solver (current one checked), smoothing."""
    entries = [MenuEntry(id=RESET, parent_id=0, title='Reset (back to the initial joints)',
                         command_type=MenuEntry.FEEDBACK),
               MenuEntry(id=SOLVER_MENU, parent_id=0, title='Solver',
                         command_type=MenuEntry.FEEDBACK)]
    entries += [MenuEntry(id=k, parent_id=SOLVER_MENU,
                          title=('[x] ' if name == solver else '[ ] ') + name,
                          command_type=MenuEntry.FEEDBACK) for name, k in SOLVER_IDS.items()]
    entries.append(MenuEntry(id=SMOOTHING, parent_id=0,
                             title=('[x] ' if smoothing else '[ ] ') + 'Smoothing',
                             command_type=MenuEntry.FEEDBACK))
    return entries


def target_marker(base: str, pose: Pose, look: str, menu, name: str = TARGET,
                  title: str = 'ik_node target') -> InteractiveMarker:
    """Return the 6-DoF target handle ``name`` at ``pose`` (base frame) coloured by ``look``."""
    rgb, words = LOOKS[look]
    marker = InteractiveMarker(name=name, description=f'{title}: {words}',
                               scale=TARGET_SCALE_M, pose=pose, menu_entries=menu)
    marker.header.frame_id = base   # stamp zero: RViz locks it to the base frame
    marker.controls = [_ball(0.03, rgb, InteractiveMarkerControl.MOVE_ROTATE_3D)]
    marker.controls += _axis_controls(TARGET, rotate=True)
    return marker


def pole_marker(base: str, point: np.ndarray, name: str = POLE,
                title: str = 'ik_node elbow pole') -> InteractiveMarker:
    """Return the elbow pole handle ``name`` at ``point`` (3,), base frame."""
    pose = Pose(position=Point(x=float(point[0]), y=float(point[1]), z=float(point[2])))
    pose.orientation.w = 1.0
    marker = InteractiveMarker(name=name, description=title, scale=POLE_SCALE_M, pose=pose)
    marker.header.frame_id = base
    marker.controls = [_ball(0.02, (0.6, 0.3, 0.9), InteractiveMarkerControl.MOVE_3D)]
    marker.controls += _axis_controls(POLE, rotate=False)
    return marker


def show_pole(server, shown: Dict[str, np.ndarray], base: str, point: np.ndarray,
              name: str = POLE, title: str = 'ik_node elbow pole') -> None:
    """Put pole handle ``name`` at ``point`` (3,), base frame, or move it there if it moved.

    ``shown``: the handles' poses (4, 4) as last served, by name (updated).
    """
    at = np.eye(4)
    at[:3, 3] = point
    if name not in shown:
        server.put(pole_marker(base, point, name, title))
    elif moved(shown[name], at):
        server.move(name, matrix_to_pose(at))
    else:
        return
    shown[name] = at


# -- the node's side ---------------------------------------------------------------------------

class TargetHandles:
    """The node's handles: markers served, feedback taken, targets streamed (module doc).

    Args:
        server: a MarkerServer (or anything with put / move / erase / publish).
        node: the IKNode (its session, chain, frames, parameters and logger).
        clock: the monotonic clock of drags, s.

    """

    def __init__(self, server, node, clock: Callable[[], float]):
        """No markers until :meth:`use_model`."""
        self.server, self._node, self._clock = server, node, clock
        self.drags = HandlePolicy((TARGET, POLE))
        self.targets = self.poles = 0
        self._shown: Dict[str, np.ndarray] = {}
        self._look = None
        self._menu_state = None

    # -- markers -------------------------------------------------------------------------------

    def use_model(self) -> None:
        """Serve the handles of the node's (new) model: the tip's, the pole's if it is used."""
        self._look = self._menu_state = None
        self._shown.clear()
        self.server.erase(POLE)
        self.refresh()

    def refresh(self) -> None:
        """Follow the arm with handles nobody drags, recolour, re-menu; publish the changes."""
        node = self._node
        if node.session is None:
            return
        now = self._clock()
        session = node.session
        look = look_of(session.arrival(node.now_s()) if session.has_target else None)
        menu_state = (node.get_parameter('solver').value,
                      bool(node.get_parameter('smoothing').value))
        tip = handle_pose(session)
        base = session.chain.base_link
        if look != self._look or menu_state != self._menu_state:
            shown = tip if TARGET not in self._shown or not self.drags.dragging(TARGET, now) \
                else self._shown[TARGET]
            self.server.put(target_marker(base, matrix_to_pose(shown), look,
                                          menu_entries(*menu_state)))
            self._shown[TARGET], self._look, self._menu_state = shown, look, menu_state
        elif not self.drags.dragging(TARGET, now) and moved(self._shown[TARGET], tip):
            self.server.move(TARGET, matrix_to_pose(tip))
            self._shown[TARGET] = tip
        self._refresh_pole(session, base, now)
        self.server.publish()

    def _refresh_pole(self, session, base: str, now: float) -> None:
        """Show the pole handle while the solver turns the elbow: at the pole, or at the elbow."""
        if not session.uses_pole or session.chain.n < 4:
            if POLE in self._shown:
                self.server.erase(POLE)
                del self._shown[POLE]
            return
        if self.drags.dragging(POLE, now):
            return
        if session.pole_target is not None:
            point = session.pole_target
        else:
            point = elbow_point(session.chain, session.q)
        show_pole(self.server, self._shown, base, point)

    # -- feedback ------------------------------------------------------------------------------

    def on_feedback(self, msg: Feedback) -> Optional[str]:
        """Take one feedback message; return why it was refused (counted), or None."""
        now = self._clock()
        refused = self.drags.admit(msg.marker_name, msg.client_id, msg.event_type, now)
        if refused is not None:
            return refused
        if msg.event_type == Feedback.MENU_SELECT:
            return self._menu(msg.menu_entry_id)
        if msg.event_type != Feedback.POSE_UPDATE:
            return None
        try:
            if msg.marker_name == TARGET:
                p, q = check_target(PoseStamped(header=msg.header, pose=msg.pose),
                                    self._node.resolver())
                value = pose_matrix(p, q)
                self._shown[TARGET] = value
            else:
                value = check_point(PointStamped(header=msg.header, point=msg.pose.position),
                                    self._node.resolver())
        except RejectedMessage as exc:
            return self.drags.refuse(f'marker_{exc.reason}')
        self.drags.offer(msg.marker_name, value)
        return None

    def apply(self, now: float) -> None:
        """Stream the newest dragged target and pole into the session (once per tick)."""
        session = self._node.session
        if session is None:
            return
        pole = self.drags.newest(POLE)
        if pole is not None:
            session.pole(pole)
            self.poles += 1
        target = self.drags.newest(TARGET)
        if target is not None:
            session.target(now, target)
            self.targets += 1

    def _menu(self, entry: int) -> Optional[str]:
        """Do a menu entry's action: reset, a solver, smoothing on / off."""
        node = self._node
        if entry == RESET:
            node.reset_motion()
            return None
        if entry == SMOOTHING:
            return node.set_from_handle('smoothing', not node.get_parameter('smoothing').value)
        for name, k in SOLVER_IDS.items():
            if entry == k:
                return node.set_from_handle('solver', name)
        return self.drags.refuse('marker_menu_unknown')

    def values(self) -> Dict[str, str]:
        """Diagnostics: handle targets streamed, poses coalesced, feedback refused by reason."""
        return handle_values(self.targets, self.poles, self.drags)


def handle_values(targets: int, poles: int, drags: HandlePolicy) -> Dict[str, str]:
    """Return the handles' diagnostics: targets, poles streamed, coalesced, refused by reason."""
    values = {'handle_targets': str(targets), 'handle_poles': str(poles),
              'handle_poses_coalesced': str(drags.coalesced)}
    values.update({f'handle_refused_{k}': str(v) for k, v in sorted(drags.counts.items())})
    return values
