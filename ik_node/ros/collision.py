# SPDX-License-Identifier: Apache-2.0

"""Collision in the node: the model from the description, obstacles from a file and a topic.

The collision model of each robot model the node loads (its
``<collision>`` elements, the SRDF's disabled pairs, pairs in contact at
home or always) is built by the node; :class:`CollisionSupport` keeps the
world (the ``obstacles_file`` and what ``~/obstacles`` adds),
hands both to the motion session, and turns them into markers and
diagnostics.

``~/obstacles`` (visualization_msgs/MarkerArray), marker by marker, named
``ns/id``: ADD (or MODIFY) a CUBE (scale: edge lengths), SPHERE (scale.x:
diameter, the three equal), CYLINDER (scale.x = scale.y: diameter, scale.z:
length) or MESH_RESOURCE (mesh_resource URI, scale), posed in
``header.frame_id`` (a frame the arm does not move; '' = the base);
DELETE removes one, DELETEALL every obstacle that came by the topic (the
file's stay). A quaternion of zeros is the identity, as RViz takes it. A
marker that cannot be used is refused with one line and counted by reason
(``rejected_obstacle_<reason>``); the others of the array still apply.
"""

from typing import Dict, List, Optional

from ik_node.core.collision.guard import Blocked
from ik_node.core.collision.model import CollisionModel
from ik_node.core.collision.shapes import CollisionError, Shape
from ik_node.core.model.chain import Chain
from ik_node.core.model.frames import LinkFrames
from ik_node.core.motion.session import MotionSession, World
from ik_node.core.rotations import matrix_to_quaternion
from ik_node.ros.conversions import pose_msg
from visualization_msgs.msg import Marker, MarkerArray

# Half-spaces are drawn as a thin square this wide (m).
PLANE_DRAWN = 2.0


def coal_available() -> bool:
    """Return True when coal imports (collision needs it)."""
    try:
        import coal  # noqa: F401
    except ImportError:
        return False
    return True


class CollisionSupport:
    """The node's obstacles (the file's and the topic's) and their markers and diagnostics.

    The collision model, the margin and the guard are the session's
    (:meth:`ik_node.core.motion.session.MotionSession.use_collision`): this
    composes the world from its two sources and hands it over.

    Args:
        logger: the node's logger.
        rejected: the node's Counter of refused messages (reasons added here).

    """

    def __init__(self, logger, rejected):
        """Start with no session and no world."""
        self.log = logger
        self.rejected = rejected
        self.session: Optional[MotionSession] = None
        self.chain: Optional[Chain] = None
        self.frames: Optional[LinkFrames] = None
        self.from_file: World = {}
        self.from_topic: World = {}

    @property
    def checking(self) -> bool:
        """True once a robot model's collision is checked (use_model)."""
        return self.session is not None

    def use_model(self, session: MotionSession, model: CollisionModel, chain: Chain,
                  frames: LinkFrames, margin: float) -> None:
        """Check the session's steps against a new robot's collision model (the world kept)."""
        self.session, self.chain, self.frames = session, chain, frames
        session.set_obstacles(self._world())
        session.use_collision(model, margin)

    def set_file_obstacles(self, obstacles: World) -> None:
        """Set the obstacles of the obstacles_file."""
        self.from_file = dict(obstacles)
        self._apply_world()

    def _world(self) -> World:
        world = dict(self.from_file)
        world.update(self.from_topic)
        return world

    def _apply_world(self) -> None:
        if self.session is not None:
            self.session.set_obstacles(self._world())

    # -- ~/obstacles --------------------------------------------------------------------------

    def on_markers(self, msg: MarkerArray, resolve) -> None:
        """Apply a MarkerArray of obstacles (module doc); refusals counted by reason."""
        if self.session is None:
            self._refuse('no_model', 'obstacles arrived before a robot model: ignored')
            return
        from ik_node.description.geometry import obstacle_from_dict
        changed = False
        for marker in msg.markers:
            name = f'{marker.ns}/{marker.id}'
            if marker.action == Marker.DELETEALL:
                changed = changed or bool(self.from_topic)
                self.from_topic.clear()
                continue
            if marker.action == Marker.DELETE:
                changed = self.from_topic.pop(name, None) is not None or changed
                continue
            if marker.action not in (Marker.ADD, Marker.MODIFY):
                self._refuse('action', f'obstacle {name}: unknown marker action '
                                       f'{marker.action}')
                continue
            try:
                entry = marker_entry(marker, name)
                _, shape = obstacle_from_dict(entry, self.frames, self.chain, resolve)
            except CollisionError as exc:
                self._refuse(_reason(str(exc)), str(exc))
                continue
            self.from_topic[name] = (shape,)
            changed = True
        if changed:
            self._apply_world()

    def _refuse(self, reason: str, line: str) -> None:
        self.rejected[f'obstacle_{reason}'] += 1
        self.log.warning(f'~/obstacles: {line}', throttle_duration_sec=1.0)

    # -- outputs --------------------------------------------------------------------------------

    def markers(self, frame: str, stamp) -> List[Marker]:
        """Return the obstacles drawn (namespace 'obstacles'), after a DELETEALL of the old."""
        out = [Marker(ns='obstacles', action=Marker.DELETEALL)]
        if self.session is None:
            return out
        for k, (name, shapes) in enumerate(sorted(self.session.obstacles().items())):
            for j, shape in enumerate(shapes):
                m = shape_marker(shape)
                if m is None:
                    continue
                m.ns, m.id, m.text = 'obstacles', 100 * k + j, name
                m.header.frame_id, m.header.stamp = frame, stamp
                out.append(m)
        return out

    def values(self, q) -> Dict[str, str]:
        """Return the diagnostics values of collision at joints q."""
        summary = None if self.session is None else self.session.collision(q)
        if summary is None:
            return {'collision': 'off'}
        values = {'collision_margin': f'{summary.margin:g}',
                  'obstacles': str(summary.obstacles),
                  'collision_pairs_checked': str(summary.pairs),
                  'collision_holds': str(summary.holds),
                  'collision_backend': summary.backend}
        if summary.closest is not None:
            a, b, distance = summary.closest
            values['closest_pair'] = f'{a} / {b}'
            values['closest_distance'] = f'{distance:.4f}'
        held, last = summary.blocked, summary.last_hold
        values['collision'] = 'free' if held is None else \
            f'held ({held.action}): {_pair_text(held)}'
        values['collision_last_hold'] = 'none' if last is None else \
            f'{last.action}: {_pair_text(last)}'
        return values


def marker_entry(marker: Marker, name: str) -> dict:
    """Return the obstacles-file entry of one marker (CollisionError when it is not a solid)."""
    s = marker.scale
    if marker.type == Marker.CUBE:
        shape, size = 'box', [s.x, s.y, s.z]
    elif marker.type == Marker.SPHERE:
        if not (s.x == s.y == s.z):
            raise CollisionError(f'obstacle {name}: a SPHERE needs equal scales (an ellipsoid '
                                 f'is not supported), got {s.x}, {s.y}, {s.z}')
        shape, size = 'sphere', [0.5 * s.x]
    elif marker.type == Marker.CYLINDER:
        if s.x != s.y:
            raise CollisionError(f'obstacle {name}: a CYLINDER needs scale.x == scale.y '
                                 f'(an elliptic one is not supported)')
        shape, size = 'cylinder', [0.5 * s.x, s.z]
    elif marker.type == Marker.MESH_RESOURCE:
        shape, size = 'mesh', []
    else:
        raise CollisionError(f'obstacle {name}: unknown marker type {marker.type} (CUBE, '
                             f'SPHERE, CYLINDER, MESH_RESOURCE)')
    p, o = marker.pose.position, marker.pose.orientation
    quat = [o.x, o.y, o.z, o.w]
    if all(v == 0.0 for v in quat):
        quat = [0.0, 0.0, 0.0, 1.0]   # as RViz: an unset quaternion is the identity
    entry = {'name': name, 'frame': marker.header.frame_id, 'shape': shape, 'size': size,
             'position': [p.x, p.y, p.z], 'orientation': quat}
    if shape == 'mesh':
        entry['mesh'] = marker.mesh_resource
        entry['scale'] = [s.x, s.y, s.z]
    return entry


def _reason(message: str) -> str:
    """Return a counter key for a refusal message."""
    for key, words in (('frame', ('frame', 'moves with')), ('mesh', ('mesh',)),
                       ('type', ('unknown marker type',)), ('size', ('size', 'scale')),
                       ('not_finite', ('finite', 'zero norm'))):
        if any(w in message for w in words):
            return key
    return 'malformed'


def shape_marker(shape: Shape) -> Optional[Marker]:
    """Return a marker drawing one obstacle shape (base frame pose), or None."""
    m = Marker(action=Marker.ADD)
    pose = shape.pose
    m.color.r, m.color.g, m.color.b, m.color.a = 0.9, 0.3, 0.2, 0.5
    if shape.kind == 'box':
        m.type = Marker.CUBE
        m.scale.x, m.scale.y, m.scale.z = shape.size
    elif shape.kind == 'sphere':
        m.type = Marker.SPHERE
        m.scale.x = m.scale.y = m.scale.z = 2.0 * shape.size[0]
    elif shape.kind == 'cylinder':
        m.type = Marker.CYLINDER
        m.scale.x = m.scale.y = 2.0 * shape.size[0]
        m.scale.z = shape.size[1]
    elif shape.kind == 'halfspace':   # a thin square under the plane
        m.type = Marker.CUBE
        m.scale.x, m.scale.y, m.scale.z = PLANE_DRAWN, PLANE_DRAWN, 0.002
        pose = pose.copy()
        pose[:3, 3] = pose[:3, 3] - 0.001 * pose[:3, 2]
        m.color.a = 0.25
    else:
        return None   # meshes: their hull is not drawn (the marker of the user's mesh is)
    m.pose = pose_msg(pose[:3, 3], matrix_to_quaternion(pose[:3, :3]))
    return m


def _pair_text(hold: Blocked) -> str:
    """Return 'a / b at 0.0100 m': the pair that held the arm and its distance."""
    return f'{hold.pair[0]} / {hold.pair[1]} at {hold.distance:.4f} m'
