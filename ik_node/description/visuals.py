# SPDX-License-Identifier: Apache-2.0

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

from ik_node.core.collision.shapes import CollisionError, load_mesh_triangles
from ik_node.core.model.frames import LinkFrames
from ik_node.description.geometry import link_tree, MeshResolver, parse_numbers, read_geometry, \
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
        frames: the links placed in the chain's base frame (ik_node.description.urdf.link_frames).
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
    g = read_geometry(element, what, resolve)
    return Visual(link, g.kind, g.size, g.pose, _colour(element, named), g.path, g.scale)


def load_visual_mesh(visual: Visual) -> Tuple[np.ndarray, np.ndarray]:
    """Return a mesh visual's (V, 3) vertices (scaled, m) and (F, 3) triangles.

    STL, OBJ, PLY: trimesh (viser's own mesh library); what it cannot read
    without more packages (COLLADA .dae needs pycollada, which makers' visual
    meshes often are): coal's assimp loader, as the collision meshes are read
    (``load_mesh_triangles``: the same checks).

    Raises:
        CollisionError: neither can read the file as a mesh.

    """
    try:
        import trimesh
        mesh = trimesh.load(visual.path, force='mesh')
        vertices = np.asarray(mesh.vertices, dtype=np.float64) * np.asarray(visual.scale)
        faces = np.asarray(mesh.faces, dtype=np.int64)
    except Exception:  # noqa: B902 - trimesh's loaders raise many kinds
        vertices, faces = load_mesh_triangles(visual.path, visual.scale, visual.link)
    if len(faces) == 0:
        raise CollisionError(f'{visual.link}: mesh {visual.path!r} is empty')
    return vertices, faces
