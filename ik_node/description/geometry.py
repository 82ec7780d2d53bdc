# SPDX-License-Identifier: Apache-2.0

"""Collision geometry from files: a URDF's <collision> elements, an SRDF, an obstacles file.

URDF: every ``<collision>`` of every link the chain moves or holds still
(``<box size>``, ``<cylinder radius length>``, ``<sphere radius>``, ``<mesh
filename scale>``), with its ``<origin>``. Mesh URIs: ``package://pkg/path``
(the package's share directory from the ament index, as ROS resolves it),
``file:///abs/path`` and plain paths (relative to the description file's
folder when it has one). Links moved by joints the chain does not drive
(the fingers of a gripper, another arm, a head) hang on the frame of their
last driven joint, where those joints put them: at their zero until the
robot's joint states say (ik_node.core.collision.undriven); a link whose
path cannot be built (a mimic of a joint not on it) is not checked, and
:func:`collision_model` reports it.

SRDF: the ``<disable_collisions link1 link2>`` pairs (MoveIt's setup
assistant writes them); nothing else of it is read.

Obstacles file (YAML)::

    obstacles:
      - name: table            # unique
        frame: world           # a link the chain does not move (default: the base)
        shape: halfspace       # box, sphere, cylinder, halfspace, mesh
        size: []               # box [x, y, z]; sphere [r]; cylinder [r, length]
        position: [0, 0, 0]    # m, in the frame
        orientation: [0, 0, 0, 1]   # quaternion x, y, z, w (default identity)
        mesh: package://pkg/meshes/part.stl   # mesh only; scale: [1, 1, 1]

XML is parsed by the same checked path as the URDF (no DOCTYPE, no
entities).
"""

import math
import os
from typing import Callable, Dict, List, NamedTuple, Optional, Sequence, Tuple
from xml.etree import ElementTree

from ik_node.core.collision.model import Body, CollisionModel
from ik_node.core.collision.pairs import (always_in_contact, attachment, check_disabled,
                                          never_checked)
from ik_node.core.collision.shapes import checked_shape, CollisionError, load_mesh, Shape
from ik_node.core.collision.undriven import UndrivenLinks
from ik_node.core.model.chain import Chain
from ik_node.core.model.frames import FrameError, LinkFrames
from ik_node.core.model.tree import frame_tree_of
from ik_node.core.rotations import quaternion_to_matrix, ypr_to_matrix
from ik_node.description.urdf import bundled_file, chains_to_links, checked_xml_text, \
    link_frames, UrdfError
import numpy as np

MeshResolver = Callable[[str], str]
# Folders below each ROS_PACKAGE_PATH root searched for a package (rospack
# crawls the whole tree; workspaces keep packages a few levels down).
PACKAGE_SEARCH_DEPTH = 3


class Note(str):
    """A line for the start-up log; ``warn``: logged as a warning (something is not checked)."""

    warn = False


class Warn(Note):
    """A start-up line logged as a warning."""

    warn = True


def resolve_mesh_uri(uri: str, base_dir: Optional[str] = None) -> str:
    """Return the file path of a mesh URI (package://, file://, or a path).

    package:// is resolved through the ament index, as ROS 2 resolves it,
    then through ``ROS_PACKAGE_PATH`` (as ROS 1 and package://-based tools
    set it: :func:`package_on_ros_package_path`); ik_node's own meshes also
    from its source tree when it is not installed.

    Raises:
        CollisionError: a package found in neither, or a relative path
            without a folder to resolve it against.

    """
    if uri.startswith('package://'):
        package, _, rest = uri[len('package://'):].partition('/')
        try:
            from ament_index_python.packages import get_package_share_directory
            return os.path.join(get_package_share_directory(package), rest)
        except Exception:  # noqa: B902 - ImportError, PackageNotFoundError and kin
            pass
        if package == 'ik_node':   # its own meshes, run from the source tree
            try:
                return bundled_file(rest)
            except FileNotFoundError:
                pass
        folder = package_on_ros_package_path(package)
        if folder is not None:
            return os.path.join(folder, rest)
        raise CollisionError(f'{uri}: package {package!r} is neither in the ament index '
                             f'(AMENT_PREFIX_PATH) nor on ROS_PACKAGE_PATH')
    if uri.startswith('file://'):
        return uri[len('file://'):]
    if os.path.isabs(uri):
        return uri
    if base_dir is None:
        raise CollisionError(f"{uri}: a relative mesh path needs the description file's folder")
    return os.path.join(base_dir, uri)


def package_on_ros_package_path(package: str, depth: int = PACKAGE_SEARCH_DEPTH
                                ) -> Optional[str]:
    """Return the folder of ``package`` on ``ROS_PACKAGE_PATH``, or None.

    As rospack finds it: a folder of that name holding a ``package.xml``,
    each root of the path (``os.pathsep``-separated) searched ``depth``
    folders deep, roots in order.
    """
    for root in os.environ.get('ROS_PACKAGE_PATH', '').split(os.pathsep):
        if not root or not os.path.isdir(root):
            continue
        level = [root]
        for _ in range(depth + 1):
            for folder in level:
                if os.path.basename(os.path.normpath(folder)) == package and \
                        os.path.isfile(os.path.join(folder, 'package.xml')):
                    return folder
            level = [os.path.join(f, d) for f in level for d in sorted(_subfolders(f))]
    return None


def _subfolders(folder: str) -> List[str]:
    try:
        return [e.name for e in os.scandir(folder) if e.is_dir() and not e.name.startswith('.')]
    except OSError:
        return []


def parse_numbers(text: Optional[str], count: int, what: str) -> List[float]:
    """Return ``count`` finite numbers of an attribute's text (CollisionError: not so)."""
    values = (text or '').split()
    try:
        numbers = [float(v) for v in values]
    except ValueError:
        raise CollisionError(f'{what}: {text!r} is not {count} numbers') from None
    if len(numbers) != count or not all(math.isfinite(v) for v in numbers):
        raise CollisionError(f'{what}: {text!r} is not {count} finite numbers')
    return numbers


def _origin(element, what: str) -> np.ndarray:
    pose = np.eye(4)
    origin = element.find('origin')
    if origin is not None:
        xyz = parse_numbers(origin.get('xyz', '0 0 0'), 3, f'{what} origin xyz')
        rpy = parse_numbers(origin.get('rpy', '0 0 0'), 3, f'{what} origin rpy')
        pose[:3, :3] = ypr_to_matrix(rpy[2], rpy[1], rpy[0])
        pose[:3, 3] = xyz
    return pose


class Geometry(NamedTuple):
    """One <collision> or <visual> element's shape, read as the URDF writes it.

    kind: 'box', 'sphere', 'cylinder' or 'mesh'; size: box (x, y, z), sphere
    (radius,), cylinder (radius, length), mesh () m; pose: (4, 4) in the
    link's frame; path: a mesh's file (resolved), else ''; scale: a mesh's (3,).
    """

    kind: str
    size: Tuple[float, ...]
    pose: np.ndarray
    path: str = ''
    scale: Tuple[float, ...] = (1.0, 1.0, 1.0)


def read_geometry(element, what: str, resolve: MeshResolver) -> Geometry:
    """Return the shape of a <collision> or <visual> element (CollisionError: unreadable)."""
    geometry = element.find('geometry')
    kinds = list(geometry) if geometry is not None else []
    if len(kinds) != 1:
        raise CollisionError(f'{what}: <geometry> must hold one shape')
    g, pose = kinds[0], _origin(element, what)
    if g.tag == 'box':
        return Geometry('box', tuple(parse_numbers(g.get('size'), 3, f'{what} box size')), pose)
    if g.tag == 'sphere':
        return Geometry('sphere', tuple(parse_numbers(g.get('radius'), 1, f'{what} radius')),
                        pose)
    if g.tag == 'cylinder':
        return Geometry('cylinder', tuple(parse_numbers(g.get('radius'), 1, f'{what} radius')
                                          + parse_numbers(g.get('length'), 1, f'{what} length')),
                        pose)
    if g.tag == 'mesh':
        scale = tuple(parse_numbers(g.get('scale', '1 1 1'), 3, f'{what} mesh scale'))
        return Geometry('mesh', (), pose, resolve(g.get('filename', '')), scale)
    raise CollisionError(f'{what}: unknown geometry <{g.tag}> (box, cylinder, sphere, mesh)')


def _collision_shape(element, what: str, resolve: MeshResolver) -> Shape:
    g = read_geometry(element, what, resolve)
    if g.kind == 'mesh':
        return checked_shape('mesh', (), g.pose, load_mesh(g.path, g.scale, what), source=what)
    return checked_shape(g.kind, g.size, g.pose, source=what)


def link_tree(xml: str) -> Tuple[ElementTree.Element, Dict[str, Tuple[str, str]]]:
    """Return the parsed <robot> and its tree: child link -> (parent link, joint type)."""
    try:
        root = ElementTree.fromstring(checked_xml_text(xml))
    except ElementTree.ParseError as exc:
        raise UrdfError(f'URDF: cannot parse: not well-formed XML: {exc}') from None
    parents = {}
    for joint in root.findall('joint'):
        parent, child = joint.find('parent'), joint.find('child')
        if parent is not None and child is not None:
            parents[child.get('link', '')] = (parent.get('link', ''), joint.get('type', ''))
    return root, parents


def collision_model(xml: str, chain: Chain, frames: Optional[LinkFrames] = None,
                    resolve: Optional[MeshResolver] = None,
                    disabled: Sequence[Tuple[str, str]] = (),
                    sample_contacts: bool = True,
                    home=None, backend: str = 'auto',
                    place_undriven: bool = True) -> Tuple[CollisionModel, List[Note]]:
    """Build the collision model of ``chain`` from its URDF text.

    Args:
        xml: the URDF text (checked: no DOCTYPE).
        chain: the chain built from the same text.
        frames: its LinkFrames (built here when None).
        resolve: mesh URI -> file path (default :func:`resolve_mesh_uri`).
        disabled: link pairs never to check (an SRDF's).
        sample_contacts: also disable the pairs in contact in every sampled
            configuration (pairs.always_in_contact).
        home: (n,) joints of the arm's home (its initial positions): pairs in
            contact there are not checked either (MoveIt's "default" pairs:
            shapes that overlap at home overlap by design).
        backend: the model's kernels ('auto', 'numpy', 'numba'): CollisionModel.
        place_undriven: also the links joints the chain does not drive move
            (another arm, a head, fingers), at those joints' zero: the model's
            ``undriven`` (UndrivenLinks) places them anew (move_bodies).

    Returns:
        (model, notes): notes are lines for the start-up log (links not
        checked and why, pairs disabled by sampling); a :class:`Warn` (one
        per mesh file that cannot be read) is logged as a warning.

    Raises:
        CollisionError: a malformed collision element or an unreadable mesh.

    """
    root, parents = link_tree(xml)
    frames = frames if frames is not None else link_frames(xml, chain)
    resolve = resolve or resolve_mesh_uri
    bodies, skipped = [], []
    skipped_shapes: Dict[str, tuple] = {}
    unreadable: Dict[str, List[str]] = {}   # the reason (one per file) -> links
    for link in root.findall('link'):
        name = link.get('name', '')
        elements = link.findall('collision')
        if not elements:
            continue
        shapes = []
        for k, element in enumerate(elements):
            try:
                shapes.append(_collision_shape(element, f'link {name!r} collision {k}',
                                               resolve))
            except CollisionError as exc:
                if 'mesh' not in str(exc) and 'package' not in str(exc):
                    raise
                # A mesh not found here: that shape is not checked (said below).
                reason = str(exc).replace(f'link {name!r} collision {k}: ', '')
                unreadable.setdefault(reason, []).append(name)
        try:
            frames.pose(name, chain.mid_limits())
        except FrameError:
            skipped.append(name)
            skipped_shapes[name] = tuple(shapes)
            continue
        attached = attachment(frame_tree_of(chain), frames.pose, name)
        if attached is None:
            skipped.append(name)
            skipped_shapes[name] = tuple(shapes)
            continue
        bodies.append(Body(name, attached[0], attached[1], tuple(shapes)))
    undriven = None
    if place_undriven and skipped_shapes:
        undriven, placed = _undriven_bodies(xml, chain, skipped_shapes)
        bodies += placed
        skipped = [name for name in skipped if name not in undriven.frames]
    pairs = never_checked(parents) + check_disabled(
        [link.get('name', '') for link in root.findall('link')], disabled, 'SRDF')
    model = CollisionModel(chain, bodies, pairs, backend=backend,
                           movable=() if undriven is None else undriven.frames)
    model.undriven = undriven
    notes: List[Note] = [Warn(f'collision: NOT checked: link(s) {", ".join(sorted(set(links)))}'
                              f' (a <collision> mesh cannot be read: {reason}); source the '
                              f'workspace that installs its package, or add the folder holding '
                              f'it to ROS_PACKAGE_PATH')
                         for reason, links in unreadable.items()]
    still = sorted({body.link for body, s in zip(
        [b for b in model.bodies for _ in b.shapes], model.still) if s and body.frame >= 0})
    if still:
        notes.append(Note(f'collision: shapes of {", ".join(still)} are where no joint moves '
                          f'them (on a joint axis they are symmetric about): not checked '
                          f'against obstacles'))
    if undriven is not None and undriven.frames:
        shown = ', '.join(undriven.joints[:6]) + (', ...' if len(undriven.joints) > 6 else '')
        notes.append(Note(f'collision: {len(undriven.frames)} link(s) moved by joints the node '
                          f'does not drive are checked where those joints are: at their zero '
                          f"until the robot's joint states (feedback_topic) say ({shown})"))
    if skipped:
        notes.append(Note(f'collision: {len(skipped)} link(s) moved by joints the chain does '
                          f'not drive are not checked ({", ".join(skipped[:5])})'))
    if sample_contacts:
        always = always_in_contact(model)
        model.disable(always)
        if always:
            notes.append(Note(f'collision: {len(always)} pair(s) in contact in every sampled '
                              f'configuration not checked '
                              f'({", ".join("/".join(p) for p in always)})'))
    if home is not None:
        near = model.distances(np.asarray(home, dtype=np.float64), 0.0)
        default = sorted({tuple(sorted(model.pair_names(int(p))))
                          for p, d in zip(near.pairs, near.distance) if d <= 0.0})
        model.disable(default)
        if default:
            notes.append(Note(f'collision: {len(default)} pair(s) in contact at home not '
                              f'checked ({", ".join("/".join(p) for p in default)})'))
    return model, notes


def _undriven_bodies(xml: str, chain, shapes: Dict[str, tuple]):
    """Return (UndrivenLinks, their Bodies at the joints' zero) of links others move."""
    paths = {link: found for link, found in
             chains_to_links(xml, chain.base_link, sorted(shapes)).items()
             if isinstance(found, Chain)}
    undriven = UndrivenLinks(paths, chain.joint_names)
    tree = frame_tree_of(chain)
    bodies = []
    for link in sorted(paths):
        if not shapes[link]:   # every shape unreadable (said apart)
            continue
        attached = undriven.attach(tree, link)
        if attached is not None:
            bodies.append(Body(link, attached[0], attached[1], shapes[link]))
    return undriven, bodies


def read_srdf_pairs(path: str) -> List[Tuple[str, str]]:
    """Return the <disable_collisions> pairs of an SRDF file (CollisionError with the reason)."""
    try:
        with open(path, 'r', encoding='utf-8') as handle:
            text = handle.read(4_000_000)
    except OSError as exc:
        raise CollisionError(f'SRDF {path}: cannot read it ({exc.strerror})') from None
    try:
        root = ElementTree.fromstring(checked_xml_text(text))
    except (ElementTree.ParseError, UrdfError) as exc:
        raise CollisionError(f'SRDF {path}: {exc}') from None
    pairs = []
    for element in root.iter('disable_collisions'):
        a, b = element.get('link1'), element.get('link2')
        if not a or not b:
            raise CollisionError(f'SRDF {path}: <disable_collisions> without link1 and link2')
        pairs.append((a, b))
    return pairs


def obstacle_from_dict(entry, frames: LinkFrames, chain: Chain,
                       resolve: Optional[MeshResolver] = None) -> Tuple[str, Shape]:
    """Return (name, shape posed in the base frame) of one obstacle entry (see module doc).

    Raises:
        CollisionError: a missing or malformed field, a moving or unknown frame.

    """
    if not isinstance(entry, dict):
        raise CollisionError(f'obstacle {entry!r}: expected a mapping')
    name = str(entry.get('name', '')).strip()
    if not name:
        raise CollisionError(f'obstacle {entry!r}: needs a name')
    where = f'obstacle {name!r}'
    unknown = set(entry) - {'name', 'frame', 'shape', 'size', 'position', 'orientation', 'mesh',
                            'scale'}
    if unknown:
        raise CollisionError(f'{where}: unknown field(s) {", ".join(sorted(unknown))}')
    frame_pose = static_frame_pose(str(entry.get('frame', '') or ''), frames, chain, where)
    position = _vector(entry.get('position', [0, 0, 0]), 3, f'{where} position')
    orientation = _vector(entry.get('orientation', [0, 0, 0, 1]), 4, f'{where} orientation')
    norm = float(np.linalg.norm(orientation))
    if norm < 1e-6:
        raise CollisionError(f'{where}: orientation quaternion has zero norm')
    local = np.eye(4)
    local[:3, :3] = quaternion_to_matrix(orientation / norm)
    local[:3, 3] = position
    kind = str(entry.get('shape', ''))
    vertices = None
    if kind == 'mesh':
        scale = _vector(entry.get('scale', [1, 1, 1]), 3, f'{where} scale')
        vertices = load_mesh((resolve or resolve_mesh_uri)(str(entry.get('mesh', ''))), scale,
                             where)
    size = entry.get('size', [])
    if not isinstance(size, (list, tuple)):
        raise CollisionError(f'{where}: size must be a list of numbers')
    return name, checked_shape(kind, [_number(s, f'{where} size') for s in size],
                               frame_pose @ local, vertices, where)


def static_frame_pose(frame: str, frames: LinkFrames, chain: Chain, where: str) -> np.ndarray:
    """Return the (4, 4) base-frame pose of a frame no chain joint moves; CollisionError if not."""
    try:
        low = frames.pose(frame, chain.mid_limits())
        high = frames.pose(frame, np.where(np.isfinite(chain.lower), chain.lower, 0.0))
    except FrameError as exc:
        raise CollisionError(f'{where}: {exc}') from None
    if not np.allclose(low, high, atol=1e-12):
        raise CollisionError(f'{where}: frame {frame!r} moves with the arm; give obstacles in a '
                             f'frame that does not (the base, world)')
    return low


def _number(value, what: str) -> float:
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        raise CollisionError(f'{what}: {value!r} is not a number')
    return float(value)


def _vector(value, count: int, what: str) -> np.ndarray:
    if not isinstance(value, (list, tuple)) or len(value) != count:
        raise CollisionError(f'{what}: expected {count} numbers, got {value!r}')
    numbers = np.array([_number(v, what) for v in value])
    if not np.all(np.isfinite(numbers)):
        raise CollisionError(f'{what}: not finite')
    return numbers


def read_obstacles_file(path: str, frames: LinkFrames, chain: Chain,
                        resolve: Optional[MeshResolver] = None) -> Dict[str, Tuple[Shape, ...]]:
    """Return the obstacles of a YAML file, name -> shapes (CollisionError with the reason)."""
    import yaml
    try:
        with open(path, 'r', encoding='utf-8') as handle:
            data = yaml.safe_load(handle.read(4_000_000))
    except OSError as exc:
        raise CollisionError(f'obstacles file {path}: cannot read it ({exc.strerror})') from None
    except yaml.YAMLError as exc:
        raise CollisionError(f'obstacles file {path}: not YAML: {exc}'.splitlines()[0]) from None
    if not isinstance(data, dict) or not isinstance(data.get('obstacles'), list):
        raise CollisionError(f'obstacles file {path}: expected a mapping with a list '
                             f'"obstacles"')
    out: Dict[str, Tuple[Shape, ...]] = {}
    base_dir = os.path.dirname(os.path.abspath(path))
    for entry in data['obstacles']:
        name, shape = obstacle_from_dict(entry, frames, chain,
                                         resolve or (lambda u: resolve_mesh_uri(u, base_dir)))
        if name in out:
            raise CollisionError(f'obstacles file {path}: obstacle {name!r} given twice')
        out[name] = (shape,)
    return out
