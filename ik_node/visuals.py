# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

"""The <visual> elements of a robot description: what a viewer draws of each link.

Each visual is a box, sphere, cylinder (URDF's: along its z axis) or mesh
(by ``package://`` or ``file://`` URI, as the collision meshes are found),
with its origin in its link's frame and its colour: the ``<material>``'s
``<color rgba>``, inline or named at the top of the description (grey when
neither says). Only links the chain places (``LinkFrames``) are kept; a
visual that cannot be read (a missing mesh, a bad number) is left out with
a one-line reason, and the rest are drawn.
"""

from dataclasses import dataclass
from typing import Dict, List, Tuple

from ik_node.core.collision.shapes import CollisionError
from ik_node.core.model.frames import LinkFrames
from ik_node.geometry import link_tree, MeshResolver, parse_numbers, parse_origin, \
    resolve_mesh_uri
import numpy as np

GREY = (0.6, 0.6, 0.6, 1.0)


@dataclass
class Visual:
    """One visual of a link.

    Attributes:
        link: the link it is fixed to.
        kind: 'box', 'sphere', 'cylinder' or 'mesh'.
        size: box (x, y, z) m; sphere (radius,); cylinder (radius, length); mesh ().
        origin: (4, 4) its pose in the link's frame.
        rgba: colour, each in [0, 1].
        path: a mesh's file (resolved); '' for primitives.
        scale: a mesh's scale (3,).

    """

    link: str
    kind: str
    size: Tuple[float, ...]
    origin: np.ndarray
    rgba: Tuple[float, float, float, float] = GREY
    path: str = ''
    scale: Tuple[float, float, float] = (1.0, 1.0, 1.0)


def _named_colours(root) -> Dict[str, Tuple[float, ...]]:
    """Return the description's top-level materials: name -> rgba."""
    named = {}
    for material in root.findall('material'):
        colour = material.find('color')
        if colour is not None and material.get('name'):
            try:
                named[material.get('name')] = tuple(parse_numbers(colour.get('rgba'), 4, 'rgba'))
            except CollisionError:
                continue
    return named


def _colour(element, named) -> Tuple[float, ...]:
    """Return a visual's rgba: its material's inline colour, else the named one, else grey."""
    material = element.find('material')
    if material is None:
        return GREY
    colour = material.find('color')
    if colour is not None:
        try:
            return tuple(parse_numbers(colour.get('rgba'), 4, 'rgba'))
        except CollisionError:
            return GREY
    return named.get(material.get('name', ''), GREY)


def read_visuals(xml: str, frames: LinkFrames,
                 resolve: MeshResolver = resolve_mesh_uri) -> Tuple[List[Visual], List[str]]:
    """Return the visuals of the links ``frames`` places, and why others were left out.

    Args:
        xml: the URDF text.
        frames: the links placed in the chain's base frame (ik_node.urdf.link_frames).
        resolve: mesh URI -> file path.

    """
    root, _ = link_tree(xml)
    named = _named_colours(root)
    placed = set(frames.names())
    visuals, skipped = [], []
    for link in root.findall('link'):
        name = link.get('name', '')
        if name not in placed:
            continue
        for k, element in enumerate(link.findall('visual')):
            what = f'link {name!r} visual {k}'
            try:
                visuals.append(_visual(name, element, what, named, resolve))
            except CollisionError as exc:
                skipped.append(str(exc))
    return visuals, skipped


def _visual(link: str, element, what: str, named, resolve: MeshResolver) -> Visual:
    """Return one <visual> (CollisionError: unreadable)."""
    geometry = element.find('geometry')
    shapes = list(geometry) if geometry is not None else []
    if len(shapes) != 1:
        raise CollisionError(f'{what}: <geometry> must hold one shape')
    g, origin, rgba = shapes[0], parse_origin(element, what), _colour(element, named)
    if g.tag == 'box':
        return Visual(link, 'box', tuple(parse_numbers(g.get('size'), 3, f'{what} box size')),
                      origin, rgba)
    if g.tag == 'sphere':
        return Visual(link, 'sphere', tuple(parse_numbers(g.get('radius'), 1, f'{what} radius')),
                      origin, rgba)
    if g.tag == 'cylinder':
        size = parse_numbers(g.get('radius'), 1, f'{what} radius') + \
            parse_numbers(g.get('length'), 1, f'{what} length')
        return Visual(link, 'cylinder', tuple(size), origin, rgba)
    if g.tag == 'mesh':
        scale = tuple(parse_numbers(g.get('scale', '1 1 1'), 3, f'{what} mesh scale'))
        return Visual(link, 'mesh', (), origin, rgba, resolve(g.get('filename', '')), scale)
    raise CollisionError(f'{what}: unknown geometry <{g.tag}>')


def load_visual_mesh(visual: Visual) -> Tuple[np.ndarray, np.ndarray]:
    """Return a mesh visual's (V, 3) vertices (scaled, m) and (F, 3) triangles.

    STL, OBJ, PLY: trimesh (viser's own mesh library); what it cannot read
    without more packages (COLLADA .dae needs pycollada, which makers' visual
    meshes often are): coal's assimp loader, which reads them as ROS tools do.

    Raises:
        CollisionError: neither can read the file as a mesh.

    """
    try:
        import trimesh
        mesh = trimesh.load(visual.path, force='mesh')
        vertices, faces = np.asarray(mesh.vertices), np.asarray(mesh.faces)
    except Exception as first:  # noqa: B902 - trimesh's loaders raise many kinds
        try:
            vertices, faces = _assimp_mesh(visual.path)
        except Exception:  # noqa: B902 - assimp's too
            raise CollisionError(f'{visual.link}: cannot load mesh {visual.path!r}: '
                                 f'{first}') from None
    if len(faces) == 0:
        raise CollisionError(f'{visual.link}: mesh {visual.path!r} is empty')
    return (vertices.astype(np.float64) * np.asarray(visual.scale), faces.astype(np.int64))


def _assimp_mesh(path: str) -> Tuple[np.ndarray, np.ndarray]:
    """Return (vertices (V, 3), triangles (F, 3)) of a mesh file read by coal (assimp)."""
    import coal
    with open(path, 'rb') as handle:   # a missing file: OSError, not assimp's message
        handle.read(1)
    model = coal.MeshLoader().load(str(path), np.ones(3))
    vertices = np.array(model.vertices(), dtype=np.float64).reshape(-1, 3)
    faces = np.array([[t[0], t[1], t[2]] for t in
                      (model.tri_indices(k) for k in range(model.num_tris))], dtype=np.int64)
    return vertices, faces.reshape(-1, 3)
