# SPDX-License-Identifier: Apache-2.0

"""Collision shapes: what a link or an obstacle is made of, checked and ready for coal.

A :class:`Shape` is one primitive or mesh with its pose in the frame it
belongs to (a link's frame, or the frame an obstacle is given in). Sizes in
metres; poses (4, 4) homogeneous. Kinds:

* ``box``: ``size`` (x, y, z) full edge lengths, centred on the pose;
* ``sphere``: ``size`` (radius,);
* ``cylinder``: ``size`` (radius, length) along the pose's z, centred;
* ``halfspace``: the solid below the pose's x-y plane (its z points out of
  the solid; a table top, a virtual wall), ``size`` ();
* ``mesh``: ``vertices`` (V, 3) already scaled, used as their **convex
  hull**: distances with normals come from GJK/EPA on convex shapes in
  microseconds, a hull is never smaller than the mesh (so a margin kept to
  the hull is kept to the mesh), and URDF collision meshes are convex or
  nearly so by convention (MoveIt's setup assistant and most makers' packages
  ship decimated convex collision meshes).

coal (the successor of hpp-fcl) is imported lazily: the rest of the core
imports and runs without it.
"""

from dataclasses import dataclass, field
import math
from typing import Optional, Tuple

from ik_node.core.errors import ModelError
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

KINDS = ('box', 'sphere', 'cylinder', 'halfspace', 'mesh')
# A mesh with more triangles than this is refused (a 10-million-triangle file
# would take seconds to hull and megabytes per copy); decimate it first.
MAX_TRIANGLES = 1_000_000
# Sizes outside this range (m) are refused as a typo (mm for m, a negative).
SIZE_RANGE = (1e-6, 1e3)


class CollisionError(ModelError):
    """A collision shape or an obstacle that cannot be used (the reason is the message)."""


@dataclass(frozen=True, eq=False)
class Shape:
    """One collision shape (see the module doc for the kinds and units).

    Attributes:
        kind: one of KINDS.
        size: the kind's dimensions, metres.
        pose: (4, 4) pose in the owner's frame.
        vertices: (V, 3) mesh vertices (meshes only), metres, owner frame of the pose.
        source: where it came from, for messages (a URDF link, a file, an obstacle name).

    """

    kind: str
    size: Tuple[float, ...]
    pose: FloatArray = field(default_factory=lambda: np.eye(4))
    vertices: Optional[FloatArray] = None
    source: str = ''

    def bounding_sphere(self) -> Tuple[FloatArray, float]:
        """Return (centre (3,) in the owner's frame, radius m) enclosing the shape.

        A half-space has no bounding sphere: radius inf.
        """
        p = self.pose[:3, 3]
        if self.kind == 'box':
            return p.copy(), 0.5 * math.sqrt(sum(s * s for s in self.size))
        if self.kind == 'sphere':
            return p.copy(), self.size[0]
        if self.kind == 'cylinder':
            return p.copy(), math.hypot(self.size[0], 0.5 * self.size[1])
        if self.kind == 'mesh':
            assert self.vertices is not None
            local = self.vertices
            centre = 0.5 * (local.min(axis=0) + local.max(axis=0))
            radius = float(np.max(np.linalg.norm(local - centre, axis=1)))
            return self.pose[:3, :3] @ centre + p, radius
        return p.copy(), math.inf


def checked_shape(kind: str, size, pose=None, vertices=None, source: str = '') -> Shape:
    """Return a Shape after checking it; raise CollisionError with the reason otherwise.

    Args:
        kind: one of KINDS.
        size: the kind's dimensions (box 3, sphere 1, cylinder 2, halfspace 0,
            mesh 0), metres, finite and within SIZE_RANGE.
        pose: (4, 4) pose in the owner's frame (default identity); its
            rotation must be orthonormal.
        vertices: (V, 3) finite vertices of a mesh, V >= 4, not all on a plane.
        source: a name for messages.

    """
    where = f'{source}: ' if source else ''
    if kind not in KINDS:
        raise CollisionError(f'{where}unknown shape {kind!r} (one of {", ".join(KINDS)})')
    wanted = {'box': 3, 'sphere': 1, 'cylinder': 2, 'halfspace': 0, 'mesh': 0}[kind]
    values = tuple(float(s) for s in (size or ()))
    if len(values) != wanted:
        raise CollisionError(f'{where}a {kind} takes {wanted} size value(s), got {len(values)}')
    for s in values:
        if not (math.isfinite(s) and SIZE_RANGE[0] <= s <= SIZE_RANGE[1]):
            raise CollisionError(f'{where}{kind} size {s} is not within '
                                 f'[{SIZE_RANGE[0]}, {SIZE_RANGE[1]}] m')
    matrix = np.eye(4) if pose is None else np.array(pose, dtype=np.float64)
    if matrix.shape != (4, 4) or not np.all(np.isfinite(matrix)):
        raise CollisionError(f'{where}pose is not a finite 4x4 transform')
    if not np.allclose(matrix[:3, :3] @ matrix[:3, :3].T, np.eye(3), atol=1e-6):
        raise CollisionError(f'{where}pose rotation is not orthonormal')
    points = None
    if kind == 'mesh':
        points = _checked_vertices(vertices, where)
    return Shape(kind, values, matrix, points, source)


def _checked_vertices(vertices, where: str) -> FloatArray:
    points = np.asarray(vertices if vertices is not None else np.zeros((0, 3)), dtype=np.float64)
    if points.ndim != 2 or points.shape[1] != 3 or len(points) < 4:
        raise CollisionError(f'{where}a mesh needs at least 4 vertices (x, y, z), got '
                             f'{points.shape}')
    if not np.all(np.isfinite(points)):
        raise CollisionError(f'{where}mesh vertices are not all finite')
    centred = points - points.mean(axis=0)
    if np.linalg.matrix_rank(centred, tol=1e-9) < 3:
        raise CollisionError(f'{where}mesh is flat or degenerate (no volume)')
    return points


def load_mesh(path: str, scale=(1.0, 1.0, 1.0), source: str = '') -> FloatArray:
    """Return the (V, 3) vertices of a mesh file (STL, DAE, OBJ: assimp, through coal), scaled.

    Raises:
        CollisionError: unreadable, empty, or above MAX_TRIANGLES.

    """
    return _vertices(_load_bvh(path, scale, source), path, source)


def load_mesh_triangles(path: str, scale=(1.0, 1.0, 1.0),
                        source: str = '') -> Tuple[FloatArray, npt.NDArray[np.int64]]:
    """Return a mesh file's (V, 3) vertices (scaled, m) and (F, 3) triangles (load_mesh's reading).

    Raises:
        CollisionError: as load_mesh.

    """
    model = _load_bvh(path, scale, source)
    vertices = _vertices(model, path, source)
    faces = np.array([[t[0], t[1], t[2]] for t in
                      (model.tri_indices(k) for k in range(model.num_tris))], dtype=np.int64)
    return vertices, faces.reshape(-1, 3)


def _load_bvh(path: str, scale, source: str):
    """Return coal's model of a mesh file (CollisionError: unreadable or above MAX_TRIANGLES)."""
    import coal
    where = f'{source}: ' if source else ''
    try:
        with open(path, 'rb') as handle:
            handle.read(1)
        model = coal.MeshLoader().load(str(path), np.asarray(scale, dtype=np.float64))
    except OSError as exc:
        raise CollisionError(f'{where}cannot read mesh {path!r}: {exc.strerror}') from None
    except Exception as exc:  # noqa: B902 - assimp's messages for bad files vary
        raise CollisionError(f'{where}cannot load mesh {path!r}: {exc}') from None
    if model.num_tris > MAX_TRIANGLES:
        raise CollisionError(f'{where}mesh {path!r} has {model.num_tris:,} triangles, above '
                             f'{MAX_TRIANGLES:,}: decimate it (a convex hull is used anyway)')
    return model


def _vertices(model, path: str, source: str) -> FloatArray:
    """Return a coal model's (V, 3) vertices (CollisionError: none)."""
    # All at once: vertices(k) is deprecated in coal 3 (a DeprecationWarning per
    # vertex, an error under warnings-as-errors; found on a maker's meshes).
    vertices = np.array(model.vertices(), dtype=np.float64).reshape(-1, 3)
    if len(vertices) == 0:
        where = f'{source}: ' if source else ''
        raise CollisionError(f'{where}mesh {path!r} is empty')
    return vertices


def primitive_geometry(shape: Shape, library):
    """Return ``library``'s Box, Sphere, Cylinder or Halfspace of ``shape``; None for a mesh.

    ``library``: the coal module, or python-fcl's (ik_bench's comparison): the
    same class names and arguments. In the shape's own frame.
    """
    if shape.kind == 'box':
        return library.Box(*shape.size)
    if shape.kind == 'sphere':
        return library.Sphere(shape.size[0])
    if shape.kind == 'cylinder':
        return library.Cylinder(shape.size[0], shape.size[1])
    if shape.kind == 'halfspace':
        return library.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0)
    return None


def coal_geometry(shape: Shape):
    """Return the coal geometry of ``shape`` (in its own frame: apply ``shape.pose`` outside)."""
    import coal
    primitive = primitive_geometry(shape, coal)
    if primitive is not None:
        return primitive
    points = coal.StdVec_Vec3s()
    assert shape.vertices is not None   # checked_shape: a mesh has its vertices
    for p in shape.vertices:
        points.append(np.asarray(p, dtype=np.float64))
    try:
        return coal.Convex.convexHull(points, False, None)
    except Exception as exc:  # noqa: B902 - qhull's errors
        raise CollisionError(f'{shape.source}: no convex hull of the mesh: {exc}') from None
