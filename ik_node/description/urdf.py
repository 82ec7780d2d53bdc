# SPDX-License-Identifier: Apache-2.0

"""URDF text -> :class:`~ik_node.core.model.chain.Chain`; the only importer of urdf_parser_py.

Safety: the text is checked before any parser expands it. A DOCTYPE (the only
way to declare entities, internal or external) is refused outright -- URDF
never needs one -- so nothing is fetched, no local file is read and no entity
expansion can blow up. Texts above ``MAX_URDF_BYTES`` are refused.

What is read: the kinematic skeleton only, as urdfdom (robot_state_publisher's
parser) reads it: each ``<link>``'s name and each ``<joint>``'s type, parent,
child, origin, axis, limit and mimic, direct children of ``<robot>``.
Everything else a description carries (transmissions of any style,
``<gazebo>``, ``<ros2_control>``, sensors, materials, visuals, collisions,
inertials, unknown elements) is never handed to urdf_parser_py, whose
stricter reflection would refuse some of it (a ROS 1 differential
transmission, for one) although robot_state_publisher and RViz load it.
"""

import dataclasses
import io
import math
import os
import re
import stat
from typing import Any, Dict, List, Sequence
from xml.etree import ElementTree

from ik_node.core.errors import ModelError
from ik_node.core.model.chain import Chain, Joint, register_urdf_reader
from ik_node.core.model.frames import LinkFrame, LinkFrames
from ik_node.core.rotations import ypr_to_matrix
import numpy as np

# Real robot descriptions are tens to hundreds of kB (meshes live in other
# files); 4 MB leaves a wide margin while bounding parse time and memory.
MAX_URDF_BYTES = 4_000_000

_DOCTYPE = re.compile(r'<!DOCTYPE|<!ENTITY', re.IGNORECASE)


class UrdfError(ModelError):
    """The URDF text is not a usable robot description."""


def _check_text(xml) -> str:
    if isinstance(xml, bytes):
        xml = xml.decode('utf-8', errors='strict')
    if not isinstance(xml, str):
        raise UrdfError(f'URDF: expected text, received {type(xml).__name__}')
    if len(xml.encode('utf-8')) > MAX_URDF_BYTES:
        raise UrdfError(f'URDF: {len(xml.encode("utf-8")):,} bytes is above the '
                        f'{MAX_URDF_BYTES:,}-byte limit')
    if not xml.strip():
        raise UrdfError('URDF: the text is empty')
    if _DOCTYPE.search(xml):
        raise UrdfError('URDF: a DOCTYPE / ENTITY declaration was found; it is refused '
                        '(URDF needs none, and entities could read files or expand without '
                        'bound)')
    return xml


def checked_xml_text(xml) -> str:
    """Return robot-description XML text (URDF, SRDF) after the safety checks (UrdfError).

    UTF-8 text within MAX_URDF_BYTES, not empty, with no DOCTYPE / ENTITY.
    """
    return _check_text(xml)


# The elements of a <joint> that kinematics reads; urdfdom reads these (and
# dynamics, calibration, safety_controller, which change no pose).
JOINT_ELEMENTS = ('parent', 'child', 'origin', 'axis', 'limit', 'mimic')


def kinematic_skeleton(xml: str) -> str:
    """Return the URDF reduced to what kinematics reads (see the module doc).

    Args:
        xml: URDF text already checked by ``_check_text`` (no DOCTYPE).

    Returns:
        URDF text: ``<robot name>`` with ``<link name>`` and the joints'
        kinematic elements, in the order of the description.

    Raises:
        UrdfError: not XML, or the root element is not ``<robot>``.

    """
    try:
        root = ElementTree.fromstring(xml)
    except ElementTree.ParseError as exc:
        raise UrdfError(f'URDF: cannot parse: not well-formed XML: {exc}') from None
    if root.tag != 'robot':
        raise UrdfError(f'URDF: cannot parse: the root element is <{root.tag}>, expected <robot>')
    skeleton = ElementTree.Element('robot', {'name': root.get('name', '')})
    for element in root:
        if element.tag == 'link':
            ElementTree.SubElement(skeleton, 'link', _name_only(element))
        elif element.tag == 'joint':
            joint = ElementTree.SubElement(skeleton, 'joint', dict(element.attrib))
            for part in element:
                if part.tag in JOINT_ELEMENTS:
                    joint.append(part)
    return ElementTree.tostring(skeleton, encoding='unicode')


def _name_only(element) -> Dict[str, str]:
    """Return the attributes urdfdom reads of a <link>: its name (when given)."""
    return {'name': element.get('name')} if element.get('name') is not None else {}


def _parse(xml: str):
    # Imported here so that merely importing ik_node stays cheap.
    from urdf_parser_py import urdf as urdf_module
    from urdf_parser_py.xml_reflection import core as reflection
    skeleton = kinematic_skeleton(xml)
    warnings: List[str] = []
    previous = reflection.on_error
    reflection.on_error = warnings.append  # unknown tags: collected, not printed
    try:
        return urdf_module.URDF.from_xml_string(skeleton)
    except ModelError:
        raise
    except Exception as exc:  # noqa: B902 - any parser failure means a bad file
        raise UrdfError(f'URDF: cannot parse: {type(exc).__name__}: {exc}') from None
    finally:
        reflection.on_error = previous


def _origin(joint) -> np.ndarray:
    xyz = [0.0, 0.0, 0.0]
    rpy = [0.0, 0.0, 0.0]
    if joint.origin is not None:
        xyz = list(joint.origin.xyz or xyz)
        rpy = list(joint.origin.rpy or rpy)
    values = xyz + rpy
    if len(xyz) != 3 or len(rpy) != 3 or not all(math.isfinite(v) for v in values):
        raise UrdfError(f'joint {joint.name!r}: origin xyz/rpy must be 3 finite numbers each, '
                        f'received xyz={xyz} rpy={rpy}')
    t = np.eye(4)
    t[:3, :3] = ypr_to_matrix(rpy[2], rpy[1], rpy[0])
    t[:3, 3] = xyz
    return t


def _joint(joint) -> Joint:
    jtype = joint.type
    axis = list(joint.axis) if joint.axis is not None else [1.0, 0.0, 0.0]
    if len(axis) != 3 or not all(math.isfinite(a) for a in axis):
        raise UrdfError(f'joint {joint.name!r}: axis must be 3 finite numbers, received {axis}')
    lower, upper, velocity = -math.inf, math.inf, math.inf
    if jtype in ('revolute', 'prismatic'):
        if joint.limit is None:
            raise UrdfError(f'joint {joint.name!r}: a {jtype} joint needs a <limit>')
        lower = joint.limit.lower if joint.limit.lower is not None else 0.0
        upper = joint.limit.upper if joint.limit.upper is not None else 0.0
    if joint.limit is not None and joint.limit.velocity is not None:
        velocity = joint.limit.velocity
    for label, value in (('lower', lower), ('upper', upper), ('velocity', velocity)):
        if isinstance(value, float) and math.isnan(value):
            raise UrdfError(f'joint {joint.name!r}: {label} limit is NaN')
    mimic = None
    if joint.mimic is not None:
        mult = joint.mimic.multiplier if joint.mimic.multiplier is not None else 1.0
        off = joint.mimic.offset if joint.mimic.offset is not None else 0.0
        if not (math.isfinite(mult) and math.isfinite(off)):
            raise UrdfError(f'joint {joint.name!r}: mimic multiplier/offset must be finite')
        mimic = (joint.mimic.joint, float(mult), float(off))
    return Joint(name=joint.name, type=jtype, origin=_origin(joint), axis=np.array(axis, float),
                 lower=float(lower), upper=float(upper), velocity=float(velocity), mimic=mimic)


def _parent_joints(robot) -> Dict[str, Any]:
    """Map child link -> the joint whose child it is; reject a non-tree graph."""
    links = {link.name for link in robot.links}
    parent: Dict[str, Any] = {}
    for joint in robot.joints:
        for end in (joint.parent, joint.child):
            if end not in links:
                raise UrdfError(f'joint {joint.name!r} refers to link {end!r}, which does not '
                                'exist')
        if joint.child in parent:
            raise UrdfError(f'link {joint.child!r} has two parent joints '
                            f'({parent[joint.child].name!r} and {joint.name!r})')
        parent[joint.child] = joint
    roots = sorted(links - set(parent))
    if len(roots) != 1:
        if not roots:
            raise UrdfError('URDF: every link has a parent joint, so the joints form a cycle')
        raise UrdfError(f'URDF has {len(roots)} root links ({", ".join(roots)}); a robot '
                        'description must be a single tree')
    # Every link has one parent: a link the root does not reach is on a cycle
    # or below one (a walk up from it repeats a link). Linear in the links.
    children: Dict[str, List[str]] = {}
    for child, joint in parent.items():
        children.setdefault(joint.parent, []).append(child)
    reached, stack = {roots[0]}, [roots[0]]
    while stack:
        for child in children.get(stack.pop(), ()):
            reached.add(child)
            stack.append(child)
    if len(reached) < len(links):
        link, seen = min(links - reached), set()
        while link not in seen:
            seen.add(link)
            link = parent[link].parent
        raise UrdfError(f'URDF: the joints form a cycle through link {link!r}')
    return parent


def chain_from_robot_text(xml, base_link: str, tip_link: str) -> Chain:
    """Build the chain ``base_link`` -> ``tip_link`` from URDF text (see module doc)."""
    robot = _parse(_check_text(xml))
    links = sorted(link.name for link in robot.links)
    for role, name in (('base_link', base_link), ('tip_link', tip_link)):
        if name not in links:
            shown = ', '.join(links[:20]) + (' ...' if len(links) > 20 else '')
            raise UrdfError(f'{role} {name!r} is not a link of robot {robot.name!r}; links: '
                            f'{shown}')
    parent = _parent_joints(robot)
    path = []
    link = tip_link
    while link != base_link:
        if link not in parent:
            raise UrdfError(f'tip_link {tip_link!r} is not below base_link {base_link!r} in '
                            'the kinematic tree')
        joint = parent[link]
        path.append(joint)
        link = joint.parent
    return Chain([_joint(j) for j in reversed(path)], base_link, tip_link)


def chains_to_links(xml, base_link: str, links: Sequence[str]) -> Dict[str, Any]:
    """Return, per link, its Chain from ``base_link`` (parsed once), or why there is none.

    For the links joints outside the driven chains move (another arm, a head,
    fingers): their paths from the base hold the joints that place them.
    """
    robot = _parse(_check_text(xml))
    parent = _parent_joints(robot)
    out: Dict[str, Any] = {}
    for link in links:
        path, at = [], link
        while at != base_link and at in parent:
            path.append(parent[at])
            at = parent[at].parent
        if at != base_link:
            out[link] = f'{link!r} is not below {base_link!r}'
            continue
        out[link] = _state_or_reason(lambda p, t: Chain([_joint(j) for j in reversed(p)],
                                                        base_link, t), path, link)
    return out


def link_frames(xml, chain: Chain) -> LinkFrames:
    """Every link of the robot description, resolvable in ``chain``'s base frame.

    A link is static when only fixed joints separate it from the base (above,
    below or beside it), moved by the chain when the movable joints between
    the base and it are the chain's own, and refused (with the reason)
    otherwise: the description's other joints (a gripper, a second arm) are
    not ik_node's to know. Linear in the number of links: each link's frame
    is its parent link's and one joint (1,000 fixed links in a row were
    quadratic: 36 s).
    """
    robot = _parse(_check_text(xml))
    resolver = _FrameResolver(chain, _parent_joints(robot))
    frames, refused = {}, {}
    for link in (item.name for item in robot.links):
        frame = resolver.frame(link)
        if isinstance(frame, str):
            refused[link] = frame
        else:
            frames[link] = frame
    return LinkFrames(chain.base_link, frames, refused)


class _FrameResolver:
    """The LinkFrame of each link, from its parent link's (memoized, top-down).

    A link's state is a LinkFrame, or a str: the reason it is refused (the
    first joint, from the top, that makes it so; every link below inherits it).
    """

    def __init__(self, chain: Chain, parent: Dict[str, Any]):
        """Index the base's ancestors; nothing resolved yet."""
        self.chain, self.parent = chain, parent
        self.above_base = [chain.base_link]               # base, its parent, ..., the root
        while self.above_base[-1] in parent:
            self.above_base.append(parent[self.above_base[-1]].parent)
        self.above = set(self.above_base)
        self.states: Dict[str, Any] = {}

    def frame(self, link: str):
        """Return the LinkFrame of ``link``, or the reason it has none (str)."""
        pending = []
        while link not in self.states and link not in self.above:
            pending.append(link)
            link = self.parent[link].parent
        if link not in self.states:
            self.states[link] = _state_or_reason(self._above_state, link)
        for child in reversed(pending):
            self.states[child] = _state_or_reason(self._child_state, self.states[link],
                                                  self.parent[child])
            link = child
        return self.states[link]

    def _above_state(self, ancestor: str):
        """State of a link above (or at) the base: static, or moved by a joint in between."""
        up = _path_down(self.chain.base_link, ancestor, self.parent)    # ancestor -> base
        moving = [j.name for j in up if j.type != 'fixed']
        if moving:
            return (f'joint {moving[0]!r} moves it relative to the base link '
                    f'{self.chain.base_link!r}, and ik_node does not control that joint')
        t_ancestor_base = np.eye(4)
        for joint in up:
            t_ancestor_base = t_ancestor_base @ _origin(joint)
        return LinkFrame(ancestor, np.asarray(np.linalg.inv(t_ancestor_base), dtype=np.float64))

    def _child_state(self, above, urdf_joint):
        """State of the child link of ``urdf_joint``, whose parent link's state is ``above``."""
        link = urdf_joint.child
        if isinstance(above, str):
            return above
        joint = _joint(urdf_joint)
        if joint.type == 'fixed':
            if above.chain is None:
                return LinkFrame(link, above.offset @ joint.origin)
            tail = joint.origin if above.tail is None else above.tail @ joint.origin
            return LinkFrame(link, above.offset, above.chain, above.joints, tail,
                             above.scale, above.shift)
        why = self._not_driven(joint)
        if why is None and above.chain is None and not self._below_base(urdf_joint.parent):
            why = (f'joint {joint.name!r} moves it relative to the base link '
                   f'{self.chain.base_link!r}, from outside the chain')
        if why is not None:
            return why
        return self._sub_chain_frame(link)

    def _not_driven(self, joint: Joint):
        """Return why the chain's joints do not drive ``joint`` (None: they do)."""
        chain = f"the chain {self.chain.base_link!r} -> {self.chain.tip_link!r}'s"
        if joint.mimic is None:
            if joint.name in self.chain.joint_names:
                return None
            return f'joint {joint.name!r} moves it, and that joint is not one of {chain}'
        if joint.mimic[0] in self.chain.joint_names:
            return None
        return (f'joint {joint.name!r} moves it, mimicking {joint.mimic[0]!r}, which is not '
                f'one of {chain} joints')

    def _below_base(self, link: str) -> bool:
        """Whether the base link is above ``link`` (or is it)."""
        while link not in self.above:
            link = self.parent[link].parent
        return link == self.chain.base_link

    def _sub_chain_frame(self, link: str) -> LinkFrame:
        """Return the LinkFrame of a link that a joint moves: the chain base -> ``link``.

        Every movable joint on the way is a chain joint or a mimic of one (the
        states above refuse any other). A mimic joint becomes a free joint of
        the sub-chain, driven by its leader through (multiplier, offset), so
        its leader need not lie on the way (the second finger of a hand).
        """
        joints, indices, scale, shift = [], [], [], []
        for urdf_joint in _path_down(link, self.chain.base_link, self.parent):
            joint = _joint(urdf_joint)
            if joint.type != 'fixed':
                leader, k, c = joint.mimic or (joint.name, 1.0, 0.0)
                if joint.mimic is not None:
                    joint = dataclasses.replace(joint, mimic=None, lower=-math.inf,
                                                upper=math.inf)
                indices.append(self.chain.joint_names.index(leader))
                scale.append(k)
                shift.append(c)
            joints.append(joint)
        return LinkFrame(link, np.eye(4), Chain(joints, self.chain.base_link, link),
                         tuple(indices), scale=tuple(scale), shift=tuple(shift))


def _state_or_reason(build, *args):
    """Return ``build(*args)``, or the reason (str) of the ModelError it raised.

    A malformed joint outside the chain (a NaN origin on a camera mount, a
    finger's inverted limits) makes the links it moves unusable as target
    frames, with that reason; only a problem with the chain ends start-up.
    """
    try:
        return build(*args)
    except ModelError as exc:
        return str(exc)


def _path_down(link: str, ancestor: str, parent) -> List[Any]:
    """URDF joints from ``ancestor`` down to ``link`` (ancestor above link)."""
    path = []
    while link != ancestor:
        joint = parent[link]
        path.append(joint)
        link = joint.parent
    return list(reversed(path))


def chain_from_urdf_string(xml, base_link: str, tip_link: str) -> Chain:
    """Build a chain from URDF text; raises UrdfError / ModelError with the reason."""
    return chain_from_robot_text(xml, base_link, tip_link)


def bundled_file(relative: str) -> str:
    """Return the path of a file shipped with ik_node (``urdf/...``, ``config/...``).

    From the source tree, else the package's share/ directory (ament index).

    Raises:
        FileNotFoundError: naming the places looked in.

    """
    source_tree = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
    candidates = [os.path.join(source_tree, relative)]
    try:
        from ament_index_python.packages import get_package_share_directory
        candidates.append(os.path.join(get_package_share_directory('ik_node'), relative))
    except Exception:  # noqa: B902 - not installed with ament: source tree only
        pass
    for path in candidates:
        if os.path.isfile(path):
            return path
    raise FileNotFoundError(f'bundled file {relative} not found in {candidates}')


def bundled_urdf(name: str) -> str:
    """Return the path of a URDF bundled with ik_node (urdf/<name>); see bundled_file."""
    return bundled_file(os.path.join('urdf', name))


def chain_from_urdf_file(path, base_link: str, tip_link: str) -> Chain:
    """Read a URDF or xacro file (bounded read) and build the chain; see chain_from_urdf_string."""
    return chain_from_robot_text(read_urdf_file(path), base_link, tip_link)


def read_urdf_file(path, xacro_arguments: Sequence[str] = ()) -> str:
    """Return a robot description file's URDF text (UrdfError with the reason).

    A ``.xacro`` file is expanded by the xacro package (``xacro_arguments``:
    ``name:=value`` strings, as on xacro's command line); anything else is
    read as URDF. Either text is read within MAX_URDF_BYTES, and the expanded
    text is checked like any URDF (size, no DOCTYPE / ENTITY) before it is
    parsed. Mesh file names (``package://``, ``file://``) are kept as text:
    the kinematics never open them.
    """
    text = _read_text(path)
    if not str(path).endswith('.xacro'):
        if xacro_arguments:
            raise UrdfError(f'URDF file {path}: xacro arguments given, but it is not a '
                            '.xacro file')
        return text
    return _expand_xacro(path, text, xacro_arguments)


def _expand_xacro(path, text: str, arguments: Sequence[str]) -> str:
    """Run xacro on ``path`` (its text already read and checked here first); return URDF."""
    _check_text(text)   # the top file: size, DOCTYPE (xacro's own parser is expat)
    mappings = {}
    for argument in arguments:
        name, sep, value = str(argument).partition(':=')
        if not sep or not name:
            raise UrdfError(f'xacro argument {argument!r}: expected name:=value')
        mappings[name] = value
    try:
        import xacro
    except ImportError:
        raise UrdfError(f'{path}: a .xacro file needs the xacro package (pip install xacro, or '
                        'ros-<distro>-xacro)') from None
    try:
        doc = xacro.process_file(str(path), mappings=mappings)
    except Exception as exc:  # noqa: B902 - xacro raises many kinds; each is a bad file
        raise UrdfError(f'xacro {path}: {type(exc).__name__}: {exc}') from None
    try:
        return _check_text(doc.toxml())
    except UrdfError as exc:
        raise UrdfError(f'xacro {path} expanded to an unusable text: {exc}') from None


def _read_text(path) -> str:
    """Return a file's text, read within MAX_URDF_BYTES (UrdfError with the reason)."""
    try:
        info = os.stat(path)
        if not stat.S_ISREG(info.st_mode):   # a FIFO or a device would block or never end
            raise UrdfError(f'URDF file {path}: not a regular file')
        size = info.st_size
        if size > MAX_URDF_BYTES:
            raise UrdfError(f'URDF file {path}: {size:,} bytes is above the '
                            f'{MAX_URDF_BYTES:,}-byte limit')
        with io.open(path, 'r', encoding='utf-8') as handle:
            text = handle.read(MAX_URDF_BYTES + 1)
    except OSError as exc:
        raise UrdfError(f'URDF file {path}: cannot read it ({exc.strerror})') from None
    except UnicodeDecodeError as exc:
        raise UrdfError(f'URDF file {path}: not UTF-8 text ({exc.reason})') from None
    return text


register_urdf_reader(chain_from_urdf_string, chain_from_urdf_file)
