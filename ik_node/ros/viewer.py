# SPDX-License-Identifier: Apache-2.0

"""``ik_viewer``: the arm in a browser, beside any ik_node (viser, an optional dependency).

The viewer is its own rclpy node. It asks the ik_node (``--namespace``,
``--node``) for its parameters over the standard parameter service: the
description (``robot_description``, else ``urdf_path`` with
``xacro_arguments``, else the ``robot_description`` topic), ``base_link``,
``tip_link`` and ``feedback_topic``, and asks again every 2 s, so that a
restarted node or a changed description is drawn anew. It draws:

- the robot's ``<visual>`` shapes and meshes in their colours
  (:mod:`ik_node.description.visuals`), posed by the arm's joint states (the node's
  ``joint_states``, or its ``feedback_topic`` on a real arm);
- the target and (on arms whose solver uses one) the elbow pole as gizmos
  to drag: a drag publishes ``~/target_pose`` / ``~/pole_target`` of the
  node (a teleoperation stream: smoothing and every limit apply there); a
  gizmo nobody drags follows the tip; a closed browser mid-drag sends
  nothing more, and the arm stops at the last target;
- for a node of several end effectors (``end_effectors``: their chains
  ``<name>.base_link`` -> ``<name>.tip_link`` asked too), every driven
  link, and per end effector a target gizmo (``~/<name>/target_pose``)
  with a ball at its centre coloured by that end effector's verdict in
  ``/diagnostics`` (green arrived or moving, orange blocked, red
  unreachable, grey holding) and, where its chain has an elbow, a pole
  gizmo (``~/<name>/pole_target``);
- the planned path and the obstacles of the node's ``~/markers``;
- a panel with what ``/diagnostics`` says (the arm's arrival verdict and
  why, how far the arm is from its target, solver, solve time, collision)
  and each joint's speed against its limit.

It prints the URL to open. Frames: everything is drawn in the chain's base
frame (the scene's origin).
"""

import argparse
import sys
import threading
import time
from typing import Dict, List, Optional

from diagnostic_msgs.msg import DiagnosticArray
from geometry_msgs.msg import PointStamped, PoseStamped
from ik_node.core.collision.shapes import CollisionError
from ik_node.core.ik.stacked import Elbow, elbow_joint, JointUnion
from ik_node.core.model.frames import UnionFrames
from ik_node.core.rotations import matrix_to_quaternion
from ik_node.description.urdf import chain_from_urdf_string, link_frames, read_urdf_file
from ik_node.description.visuals import load_visual_mesh, read_visuals
from ik_node.ros.conversions import matrix_to_pose, pose_matrix, pose_to_matrix
from ik_node.ros.handles import elbow_point, HandlePolicy, moved
from ik_node.ros.spin import serve, StopRequest
import numpy as np
import rclpy
from rclpy.node import Node
from rclpy.parameter import parameter_value_to_python
from rclpy.parameter_client import AsyncParameterClient
from rclpy.qos import DurabilityPolicy, QoSProfile, ReliabilityPolicy
from rclpy.signals import SignalHandlerOptions
from sensor_msgs.msg import JointState
from std_msgs.msg import String
from visualization_msgs.msg import InteractiveMarkerFeedback as Feedback, Marker, MarkerArray

FRAME_HZ = 30.0        # scene updates at most this often
PANEL_HZ = 2.0
ASK_EVERY_S = 2.0      # the node's parameters, again (a restart, a new description)
# Asked in one request; xacro_arguments in its own (a string array the node
# leaves unset by default, and one unset name empties the whole answer).
PARAMETERS = ('robot_description', 'urdf_path', 'base_link', 'tip_link', 'feedback_topic')
# Per end effector of a group node: asked once its end_effectors are known.
EFFECTOR_PARAMETERS = ('tip_link', 'base_link', 'elbow_joint')
TARGET, POLE = '/target', '/pole'
# A verdict ball's colour (0-255 rgb) by the end effector's arrival state.
VERDICT_COLOURS = {'arrived': (40, 200, 60), 'moving': (40, 200, 60), 'blocked': (240, 150, 20),
                   'unreachable': (220, 40, 40), 'holding': (150, 150, 150)}


def gizmo_names(name: str) -> tuple:
    """Return (target, pole) gizmo names of end effector ``name`` ('' : the one-arm node's)."""
    return (TARGET, POLE) if not name else (f'{TARGET}_{name}', f'{POLE}_{name}')


def wxyz(rotation: np.ndarray) -> tuple:
    """Return viser's (w, x, y, z) of a rotation matrix (3, 3)."""
    x, y, z, w = matrix_to_quaternion(rotation)
    return (float(w), float(x), float(y), float(z))


def rgb255(rgba) -> tuple:
    """Return a colour (r, g, b) in 0-255 of rgba in [0, 1]."""
    return tuple(int(round(255 * min(max(c, 0.0), 1.0))) for c in rgba[:3])


class RobotModel:
    """The description the node uses: chains, placed links, visuals (and why some are not).

    Args:
        text: the URDF.
        effectors: (name, base link, tip link, elbow joint) per end effector;
            one named '' for a one-arm node (its elbow: the fourth joint from
            the base, the analytic solvers' pole point), else a group's (the
            joints of their union, JointUnion's order; each elbow as the
            stacked solver's, '' the fourth free joint from the tip).

    """

    def __init__(self, text: str, effectors: List[tuple]):
        """Read ``text``; UrdfError / IKError on a bad one."""
        self.text = text
        self.key = (text, tuple(effectors))
        self.names = [e[0] for e in effectors]
        self.chains = [chain_from_urdf_string(text, base, tip) for _, base, tip, _ in effectors]
        if len(self.chains) == 1 and not self.names[0]:
            self.chain = self.chains[0]
            self.columns = [np.arange(self.chain.n)]
            self.frames = link_frames(text, self.chain)
            self._elbows = [None]
        else:
            union = JointUnion(self.chains)
            self.chain, self.columns = union, union.columns
            self.frames = UnionFrames([link_frames(text, c) for c in self.chains], union.columns)
            joints = [elbow_joint(c, e[3]) for c, e in zip(self.chains, effectors)]
            self._elbows = [None if j is None else Elbow(c, j)
                            for c, j in zip(self.chains, joints)]
        self.visuals, self.skipped = read_visuals(text, self.frames)

    def link_poses(self, q) -> Dict[str, np.ndarray]:
        """Return each drawn link's pose (4, 4) in the base frame at joints q (n,)."""
        return {link: self.frames.pose(link, q) for link in {v.link for v in self.visuals}}

    def tip(self, k: int, q) -> np.ndarray:
        """Return end effector k's tip pose (4, 4), base frame, at joints q (n,)."""
        return self.chains[k].forward(np.asarray(q)[self.columns[k]])

    def elbow(self, k: int, q) -> Optional[np.ndarray]:
        """Return end effector k's elbow point (3,), base frame, at joints q (n,), or None."""
        chain, qk = self.chains[k], np.asarray(q, dtype=np.float64)[self.columns[k]]
        if not self.names[k]:
            return elbow_point(chain, qk) if chain.n >= 4 else None
        elbow = self._elbows[k]
        return None if elbow is None else elbow.point_and_jacobian(qk)[0]


class BrowserScene:
    """What the browser shows (viser): robot, gizmos, path, obstacles, panel.

    Args:
        server: a viser.ViserServer.
        on_target: called with (end effector name, a dragged target pose (4, 4), base frame).
        on_pole: called with (end effector name, a dragged pole point (3,), base frame).

    The one-arm node's end effector is named ''.
    """

    def __init__(self, server, on_target, on_pole):
        """Add the gizmos (hidden until a model) and the panel."""
        self.server = server
        self._on_target, self._on_pole = on_target, on_pole
        self.model: Optional[RobotModel] = None
        self.frames_sent = 0
        self._links: Dict[str, object] = {}
        self._shown: Dict[str, np.ndarray] = {}
        server.gui.configure_theme(dark_mode=True)
        server.scene.add_grid('/floor', width=2.0, height=2.0, cell_size=0.1)
        self.status = server.gui.add_markdown('waiting for ik_node ...')
        self.speeds = server.gui.add_markdown('')
        # name -> (target gizmo, pole gizmo, verdict ball or None), and who owns a gizmo.
        self.gizmos: Dict[str, tuple] = {}
        self._owners: Dict[str, tuple] = {}
        self.use_effectors([''])
        self.path = None
        self._path_points: Optional[np.ndarray] = None
        self._obstacles: Dict[int, tuple] = {}   # id -> (what was drawn, handle)

    def use_effectors(self, names: List[str]) -> None:
        """Make a target and a pole gizmo per end effector (the old ones removed)."""
        if list(self.gizmos) == list(names):
            return
        for target, pole, ball in self.gizmos.values():
            for handle in (target, pole, ball):
                if handle is not None:
                    handle.remove()
        self.gizmos.clear()
        self._owners.clear()
        for name in names:
            target_name, pole_name = gizmo_names(name)
            ball = None if not name else self.server.scene.add_icosphere(
                f'{target_name}/verdict', 0.025, color=VERDICT_COLOURS['holding'],
                visible=False)
            self.gizmos[name] = (self._gizmo(target_name, 0.2, rotations=True),
                                 self._gizmo(pole_name, 0.12, rotations=False), ball)
            self._owners[target_name] = (name, False)
            self._owners[pole_name] = (name, True)
        self.drags = HandlePolicy(self._owners)
        self._shown.clear()

    @property
    def target(self):
        """The first end effector's target gizmo (the one-arm node's)."""
        return next(iter(self.gizmos.values()))[0]

    @property
    def pole(self):
        """The first end effector's pole gizmo (the one-arm node's)."""
        return next(iter(self.gizmos.values()))[1]

    def _gizmo(self, name: str, scale: float, rotations: bool):
        handle = self.server.scene.add_transform_controls(name, scale=scale, visible=False,
                                                          disable_rotations=not rotations)

        async def changed(event) -> None:   # async: on viser's loop, in the order sent
            self._changed(name, handle, event.phase)
        handle.on_update(changed)
        return handle

    def _changed(self, name: str, handle, phase: str) -> None:
        """Take a gizmo's drag start / move / end in a browser; publish where it moved."""
        event = {'start': Feedback.MOUSE_DOWN, 'end': Feedback.MOUSE_UP}.get(
            phase, Feedback.POSE_UPDATE)
        self.drags.admit(name, 'browser', event, time.monotonic())
        if event != Feedback.POSE_UPDATE:
            return
        w, x, y, z = handle.wxyz
        pose = pose_matrix(handle.position, np.array([x, y, z, w], dtype=np.float64))
        self._shown[name] = pose
        if not np.all(np.isfinite(pose)) or name not in self._owners:
            return
        effector, is_pole = self._owners[name]
        if is_pole:
            self._on_pole(effector, pose[:3, 3].copy())
        else:
            self._on_target(effector, pose)

    def show_robot(self, model: RobotModel) -> List[str]:
        """Draw a (new) robot; return one line per visual left out."""
        for handle in self._links.values():
            handle.remove()
        self._links.clear()
        self._shown.clear()
        skipped = list(model.skipped)
        for k, visual in enumerate(model.visuals):
            frame = self._links.get(visual.link)
            if frame is None:
                frame = self.server.scene.add_frame(f'/robot/{visual.link}', show_axes=False)
                self._links[visual.link] = frame
            try:
                self._add_visual(f'/robot/{visual.link}/visual_{k}', visual)
            except CollisionError as exc:
                skipped.append(str(exc))
        self.model = model
        return skipped

    def _add_visual(self, name: str, visual) -> None:
        scene, colour = self.server.scene, rgb255(visual.rgba)
        pose = {'wxyz': wxyz(visual.origin[:3, :3]), 'position': tuple(visual.origin[:3, 3])}
        if visual.kind == 'box':
            scene.add_box(name, colour, tuple(visual.size), **pose)
        elif visual.kind == 'sphere':
            scene.add_icosphere(name, visual.size[0], color=colour, **pose)
        elif visual.kind == 'cylinder':
            scene.add_cylinder(name, visual.size[0], visual.size[1], color=colour, **pose)
        else:
            vertices, faces = load_visual_mesh(visual)
            scene.add_mesh_simple(name, vertices.astype(np.float32), faces.astype(np.uint32),
                                  color=colour, **pose)

    def pose_robot(self, q: np.ndarray, uses_pole: bool) -> None:
        """Pose the links at joints q; gizmos nobody drags follow the tips and the elbows.

        ``uses_pole``: the poles are served (the one-arm node's analytic
        solvers; a group's end effectors with an elbow always).
        """
        model = self.model
        if model is None:
            return
        with self.server.atomic():
            for link, pose in model.link_poses(q).items():
                frame = self._links[link]
                frame.wxyz, frame.position = wxyz(pose[:3, :3]), tuple(pose[:3, 3])
            now = time.monotonic()
            for k, name in enumerate(model.names):
                target, pole, _ = self.gizmos[name]
                target_name, pole_name = gizmo_names(name)
                self._follow(target, target_name, model.tip(k, q), now)
                point = model.elbow(k, q) if uses_pole else None
                if point is not None:
                    elbow = np.eye(4)
                    elbow[:3, 3] = point
                    self._follow(pole, pole_name, elbow, now)
                pole.visible = point is not None
        self.frames_sent += 1

    def show_verdicts(self, verdicts: Dict[str, str]) -> None:
        """Colour each end effector's verdict ball by its arrival state (a group's)."""
        for name, state in verdicts.items():
            ball = self.gizmos.get(name, (None, None, None))[2]
            if ball is not None:
                ball.color = VERDICT_COLOURS.get(state, VERDICT_COLOURS['unreachable'])
                ball.visible = True

    def _follow(self, handle, name: str, pose: np.ndarray, now: float) -> None:
        handle.visible = True
        if self.drags.dragging(name, now):
            return
        shown = self._shown.get(name)
        if shown is None or moved(shown, pose):
            handle.wxyz, handle.position = wxyz(pose[:3, :3]), tuple(pose[:3, 3])
            self._shown[name] = pose

    def show_markers(self, msg: MarkerArray) -> None:
        """Draw the planned path and the obstacles of the node's ~/markers (what changed)."""
        wanted, cleared = {}, False
        for marker in msg.markers:
            if marker.ns == 'planned_path':
                self._show_path(marker)
            elif marker.ns == 'obstacles':
                if marker.action == Marker.DELETEALL:
                    wanted, cleared = {}, True
                elif marker.action == Marker.ADD:
                    wanted[marker.id] = marker
                else:
                    wanted.pop(marker.id, None)
        if cleared or wanted:
            self._show_obstacles(wanted, cleared)

    def _show_path(self, marker: Marker) -> None:
        points = np.array([[p.x, p.y, p.z] for p in marker.points], dtype=np.float32)
        if marker.action != Marker.ADD or len(points) < 2:
            points = np.zeros((0, 3), dtype=np.float32)
        if self._path_points is not None and np.array_equal(points, self._path_points):
            return   # the node sends it at 5 Hz, mostly unchanged
        self._path_points = points
        if self.path is not None:
            self.path.remove()
            self.path = None
        if len(points) >= 2:
            segments = np.stack([points[:-1], points[1:]], axis=1)
            self.path = self.server.scene.add_line_segments('/planned_path', segments,
                                                            colors=(0, 150, 255), line_width=3.0)

    def _show_obstacles(self, wanted: Dict[int, Marker], cleared: bool) -> None:
        """Add, replace or remove obstacles so that ``wanted`` (id -> marker) is drawn."""
        keys = {k: (m.type, tuple(pose_to_matrix(m.pose).ravel()), m.scale.x, m.scale.y,
                    m.scale.z) for k, m in wanted.items()}
        for k in list(self._obstacles):
            if (cleared and k not in wanted) or (k in keys and keys[k] != self._obstacles[k][0]):
                self._obstacles.pop(k)[1].remove()
        for k, marker in wanted.items():
            if k not in self._obstacles:
                handle = self._add_obstacle(marker)
                if handle is not None:
                    self._obstacles[k] = (keys[k], handle)

    def _add_obstacle(self, marker: Marker):
        """Return the scene handle of one obstacle marker (None: a type not drawn)."""
        pose = pose_to_matrix(marker.pose)
        kw = {'wxyz': wxyz(pose[:3, :3]), 'position': tuple(pose[:3, 3]), 'opacity': 0.6}
        name, colour, s, scene = f'/obstacles/{marker.id}', (200, 80, 80), marker.scale, \
            self.server.scene
        if marker.type == Marker.CUBE:
            return scene.add_box(name, colour, (s.x, s.y, s.z), **kw)
        if marker.type == Marker.SPHERE:
            return scene.add_icosphere(name, 0.5 * s.x, color=colour, **kw)
        if marker.type == Marker.CYLINDER:
            return scene.add_cylinder(name, 0.5 * s.x, s.z, color=colour, **kw)
        return None

    def show_status(self, values: Dict[str, str], message: str) -> None:
        """Write what /diagnostics says in the panel."""
        lines = [f'**{message}**', '',
                 f"arm to target: {values.get('distance_to_target_m', '?')} m, "
                 f"{values.get('angle_to_target_rad', '?')} rad "
                 f"({values.get('arrival', '?')})",
                 f"solver: {values.get('solver', '?')} ({values.get('backend', '?')}), "
                 f"mode: {values.get('mode', '?')}",
                 f"solve time: {values.get('solve_time_s', '?')} s "
                 f"(p50 {values.get('solve_time_p50_s', '?')} s)",
                 f"collision: {values.get('collision', values.get('closest_pair', 'off'))}"]
        self.status.content = '  \n'.join(lines)

    def show_speeds(self, names, velocity, limits) -> None:
        """Write each joint's speed against its limit (rad/s or m/s) in the panel."""
        rows = ['| joint | speed | limit |', '|---|---|---|']
        for name, v, limit in zip(names, velocity, limits):
            rows.append(f'| {name} | {abs(v):.3f} | {limit:.3f} |')
        self.speeds.content = '\n'.join(rows)


class ViewerNode(Node):
    """The viewer's ROS side: the node's parameters, states, markers, diagnostics in; drags out.

    Args:
        scene_factory: called with (on_target, on_pole) to make the BrowserScene.
        namespace: the ik_node's namespace ('' or '/ns').
        node_name: the ik_node's name.

    """

    def __init__(self, scene_factory, namespace: str = '', node_name: str = 'ik_node'):
        """Create the subscriptions, publishers, the parameter client and the timers."""
        # Absolute names: launch also puts this node in the namespace (__ns),
        # and a relative name would be resolved in it a second time.
        namespace = '/' + namespace.strip('/') if namespace.strip('/') else ''
        super().__init__('ik_viewer', namespace=namespace or '/')
        prefix = f'{namespace}/{node_name}'
        self.prefix, self.namespace_ = prefix, namespace
        self.scene = scene_factory(self._publish_target, self._publish_pole)
        self._lock = threading.Lock()
        self._params = AsyncParameterClient(self, prefix)
        self._asked = None
        self._asked_at = 0.0
        self._xacro_arguments = ()
        self._several: List[str] = []   # the node's end_effectors (none: one arm)
        # Per end effector of a group: (name, base link, tip link, elbow joint), once asked.
        self._effectors: List[tuple] = []
        self._effector_pubs: Dict[str, tuple] = {}
        self._described: Optional[str] = None
        self.model: Optional[RobotModel] = None
        self._q: Optional[np.ndarray] = None
        self._velocity: Optional[np.ndarray] = None
        self._fresh = False
        self._states_subs: Dict[str, object] = {}
        self._states_topic = ''
        self._uses_pole = False
        self.target_pub = self.create_publisher(PoseStamped, f'{prefix}/target_pose', 10)
        self.pole_pub = self.create_publisher(PointStamped, f'{prefix}/pole_target', 10)
        self.create_subscription(MarkerArray, f'{prefix}/markers', self._on_markers, 10)
        self.create_subscription(DiagnosticArray, '/diagnostics', self._on_diagnostics, 10)
        latched = QoSProfile(depth=1, durability=DurabilityPolicy.TRANSIENT_LOCAL,
                             reliability=ReliabilityPolicy.RELIABLE)
        self.create_subscription(String, f'{self.namespace_}/robot_description',
                                 self._on_description, latched)
        self.create_timer(ASK_EVERY_S, self._ask)
        self.create_timer(1.0 / FRAME_HZ, self._frame)
        self._ask()

    # -- the model ---------------------------------------------------------------------------

    def _ask(self) -> None:
        """Ask the node for its parameters (once its service is there; again every 2 s).

        A request unanswered for ASK_EVERY_S (the node stopped under it) is
        given up: a restarted node is asked anew.
        """
        if self._asked is not None and not self._asked.done() \
                and time.monotonic() - self._asked_at < ASK_EVERY_S:
            return
        if not self._params.services_are_ready():
            return
        self._asked_at = time.monotonic()
        self._params.get_parameters(['xacro_arguments'], self._on_xacro_arguments)
        self._params.get_parameters(['end_effectors'], self._on_end_effectors)
        self._asked = self._params.get_parameters(list(PARAMETERS), self._on_parameters)

    def _on_end_effectors(self, future) -> None:
        """Note a node of several end effectors; ask for their chains."""
        result = future.result()
        if result is None or len(result.values) != 1:
            return
        names = list(parameter_value_to_python(result.values[0]) or ())
        self._several = names
        if names:
            keys = [f'{n}.{k}' for n in names for k in EFFECTOR_PARAMETERS]
            self._params.get_parameters(keys, lambda f: self._on_effectors(f, names))

    def _on_effectors(self, future, names: List[str]) -> None:
        """Keep each end effector's (name, base link, tip link, elbow joint)."""
        result = future.result()
        if result is None or len(result.values) != len(names) * len(EFFECTOR_PARAMETERS):
            return
        values = [parameter_value_to_python(v) or '' for v in result.values]
        k = len(EFFECTOR_PARAMETERS)
        self._effectors = [(n, *values[i * k:(i + 1) * k]) for i, n in enumerate(names)]

    def _on_xacro_arguments(self, future) -> None:
        result = future.result()
        if result is not None and len(result.values) == 1:
            self._xacro_arguments = parameter_value_to_python(result.values[0]) or ()

    def _on_parameters(self, future) -> None:
        result = future.result()
        if result is None or len(result.values) != len(PARAMETERS):
            return
        p = {name: parameter_value_to_python(v) for name, v in zip(PARAMETERS, result.values)}
        text = p['robot_description'] or ''
        if not text and p['urdf_path']:
            try:
                text = read_urdf_file(p['urdf_path'], self._xacro_arguments)
            except Exception as exc:  # noqa: B902 - any unreadable file: say it, keep the old
                self.get_logger().warning(f'cannot read {p["urdf_path"]}: {exc}',
                                          throttle_duration_sec=10.0)
                return
        text = text or self._described or ''
        if self._several:
            if [e[0] for e in self._effectors] != self._several:
                return   # their chains not known yet (asked)
            effectors = [(n, own_base or p['base_link'], tip, elbow)
                         for n, tip, own_base, elbow in self._effectors]
        elif p['tip_link']:
            effectors = [('', p['base_link'], p['tip_link'], '')]
        else:
            return
        self._use(text, effectors, p['feedback_topic'] or '')

    def _on_description(self, msg: String) -> None:
        self._described = msg.data

    def _use(self, text: str, effectors: List[tuple], feedback_topic: str) -> None:
        """Draw the description if it is new; follow the node's joint states.

        ``effectors``: (name, base link, tip link, elbow joint) each (RobotModel).
        """
        if not text or (self.model is not None and self.model.key == (text, tuple(effectors))):
            return
        try:
            model = RobotModel(text, effectors)
        except Exception as exc:  # noqa: B902 - a bad description: say it, keep the old
            self.get_logger().warning(f'cannot draw the description: {exc}',
                                      throttle_duration_sec=10.0)
            return
        with self._lock:
            self.scene.use_effectors(model.names)
            for line in self.scene.show_robot(model):
                self.get_logger().warning(f'not drawn: {line}')
            self.model, self._q = model, None
        for name in model.names:
            if name and name not in self._effector_pubs:
                self._effector_pubs[name] = (
                    self.create_publisher(PoseStamped, f'{self.prefix}/{name}/target_pose', 10),
                    self.create_publisher(PointStamped, f'{self.prefix}/{name}/pole_target', 10))
        topic = feedback_topic or f'{self.namespace_}/joint_states'
        # One subscription per topic, never destroyed: destroying one the
        # executor holds in its wait set made its next take raise (seen in CI).
        if topic not in self._states_subs:
            self._states_subs[topic] = self.create_subscription(
                JointState, topic, lambda msg, t=topic: self._on_joints(msg, t), 10)
        self._states_topic = topic
        chains = ', '.join(f'{c.base_link} -> {c.tip_link}' for c in model.chains)
        self.get_logger().info(f'drawing {len(model.visuals)} visuals of {chains}; '
                               f'joint states from {topic}')

    # -- inputs ------------------------------------------------------------------------------

    def _on_joints(self, msg: JointState, topic: str) -> None:
        model = self.model
        if model is None or topic != self._states_topic:
            return
        index = {name: k for k, name in enumerate(msg.name)}
        if not all(name in index for name in model.chain.joint_names):
            return
        q = np.array([msg.position[index[n]] for n in model.chain.joint_names])
        if not np.all(np.isfinite(q)):
            return
        velocity = np.array([msg.velocity[index[n]] if len(msg.velocity) == len(msg.name)
                             else 0.0 for n in model.chain.joint_names])
        if self._q is not None and np.array_equal(q, self._q) and not self._fresh:
            return   # at rest: nothing new to draw
        self._q, self._velocity, self._fresh = q, velocity, True

    def _on_markers(self, msg: MarkerArray) -> None:
        with self._lock:
            self.scene.show_markers(msg)

    def _on_diagnostics(self, msg: DiagnosticArray) -> None:
        verdicts = {}
        for status in msg.status:
            if status.name.startswith('ik_node'):
                values = {kv.key: kv.value for kv in status.values}
                if 'end_effector' in values:   # a group's: one status per end effector
                    verdicts[values['end_effector']] = values.get('arrival', '')
                    continue
                self._uses_pole = values.get('solver') == 'analytic'
                with self._lock:
                    self.scene.show_status(values, status.message)
        if verdicts:
            with self._lock:
                self.scene.show_verdicts(verdicts)
                self.scene.status.content = '  \n'.join(
                    f'**{name}**: {state}' for name, state in verdicts.items())

    def _frame(self) -> None:
        """Push the newest joint state to the browser (at most FRAME_HZ)."""
        if not self._fresh or self.model is None:
            return
        self._fresh = False
        with self._lock:
            self.scene.pose_robot(self._q, self._uses_pole or bool(self._several))
            if self.scene.frames_sent % int(FRAME_HZ / PANEL_HZ) == 0:
                chain = self.model.chain
                self.scene.show_speeds(chain.joint_names, self._velocity, chain.velocity)

    # -- drags -------------------------------------------------------------------------------

    def _publish_target(self, name: str, pose: np.ndarray) -> None:
        model = self.model
        if model is None:
            return
        msg = PoseStamped(pose=matrix_to_pose(pose))
        msg.header.frame_id = model.chain.base_link
        msg.header.stamp = self.get_clock().now().to_msg()
        (self._effector_pubs[name][0] if name else self.target_pub).publish(msg)

    def _publish_pole(self, name: str, point: np.ndarray) -> None:
        model = self.model
        if model is None:
            return
        msg = PointStamped()
        msg.header.frame_id = model.chain.base_link
        msg.point.x, msg.point.y, msg.point.z = (float(v) for v in point)
        (self._effector_pubs[name][1] if name else self.pole_pub).publish(msg)


def spin(node: Node, stop: StopRequest) -> None:
    """Spin until SIGINT / SIGTERM; an error inside the executor is logged (throttled), not fatal.

    Under load rclpy's take sometimes fails to convert a message it took
    ("Unable to convert call argument '0' to Python object"; seen in this
    viewer's tests, and in joint_state_publisher: ros/joint_state_publisher
    #117): that message is lost, the viewer draws the next one.
    """
    def lost(exc: Exception) -> None:
        node.get_logger().warning(f'a message was lost in rclpy ({type(exc).__name__}: '
                                  f'{exc}); going on', throttle_duration_sec=5.0)

    serve(node, stop, on_error=lost)


def main(argv=None) -> int:
    """Run the viewer until SIGINT; exit 1 with one line when viser is missing."""
    parser = argparse.ArgumentParser(prog='ik_viewer', description=__doc__.splitlines()[0])
    parser.add_argument('--namespace', default='', help="the ik_node's namespace ('' = none)")
    parser.add_argument('--node', default='ik_node', help="the ik_node's name")
    parser.add_argument('--host', default='0.0.0.0', help='address to serve on')
    parser.add_argument('--port', type=int, default=8080, help='port to serve on')
    args, ros_args = parser.parse_known_args(argv)
    try:
        import viser
    except ImportError:
        print('ik_viewer: cannot start: viser is not installed (pip install viser)',
              file=sys.stderr)
        return 1
    stop = StopRequest()   # a signal is counted, never raised inside rclpy's code
    stop.install()
    rclpy.init(args=ros_args, signal_handler_options=SignalHandlerOptions.NO)
    server = viser.ViserServer(host=args.host, port=args.port, verbose=False)
    server.initial_camera.position = (1.8, 1.4, 1.3)
    server.initial_camera.look_at = (0.0, 0.0, 0.5)
    server.initial_camera.up = (0.0, 0.0, 1.0)
    node = ViewerNode(lambda t, p: BrowserScene(server, t, p), args.namespace, args.node)
    print(f'ik_viewer: open http://localhost:{server.get_port()} '
          f'(ik_node {node.prefix})', flush=True)
    try:
        spin(node, stop)
    finally:
        server.stop()
        node.destroy_node()
        rclpy.try_shutdown()
    return 0


if __name__ == '__main__':
    sys.exit(main())
