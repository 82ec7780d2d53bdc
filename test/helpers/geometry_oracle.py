# SPDX-License-Identifier: Apache-2.0

"""The tests' distances between solids: independent of ik_node.description.geometry and of coal.

A robot description's ``<collision>`` primitives are read here with
ElementTree and posed with the oracle's own forward kinematics
(:class:`oracle.RawModel`). A distance between two solids is bounded by
branch and bound over one solid's surface: the signed distance from a point
to a solid (exact closed forms for box, sphere, cylinder, half-space and a
convex hull: its faces' planes inside, the nearest face outside) is
1-Lipschitz, so a surface patch of radius R around a point at distance d
has no point closer than d - R. Patches are split until the lower bound
clears a floor or a point below it is found; the answer is a certified
interval, not a sample.
"""

import heapq
import math
from pathlib import Path
import struct
from xml.etree import ElementTree

import numpy as np
import transforms3d


def read_stl(path):
    """Return the triangles (T, 3, 3), m, of a binary STL file (the oracle's own reader)."""
    data = Path(path).read_bytes()
    count = struct.unpack_from('<I', data, 80)[0]
    assert len(data) == 84 + 50 * count, f'{path}: not a binary STL'
    rows = np.frombuffer(data, dtype=np.dtype([('n', '<f4', 3), ('v', '<f4', (3, 3)),
                                               ('a', '<u2')]), count=count, offset=84)
    return rows['v'].astype(np.float64)


class Hull:
    """A convex hull of points (its own frame): faces' planes and triangles (scipy's qhull).

    Attributes:
        planes: (F, 4) outward unit normal and offset, ``n . x + d <= 0`` inside.
        triangles: (F, 3, 3) each face's corners.
        points: (V, 3) its vertices.

    """

    def __init__(self, points):
        """Hull the points (N, 3), m."""
        from scipy.spatial import ConvexHull
        hull = ConvexHull(np.asarray(points, dtype=np.float64))
        self.planes = hull.equations
        self.triangles = hull.points[hull.simplices]
        self.points = hull.points[hull.vertices]


def solids_of(xml, package_dirs=None, links=None):
    """Return link -> [(kind, size, (4, 4) pose in the link)] of a URDF's <collision>s.

    A mesh (``package://name/path``, found in ``package_dirs[name]``; ik_node's
    own in this checkout) is a 'hull' whose size is its :class:`Hull` (scale
    applied). ``links``: only these (default every link).
    """
    package_dirs = dict(package_dirs or {}, ik_node=Path(__file__).resolve().parents[2])
    out = {}
    for link in ElementTree.fromstring(xml).findall('link'):
        if links is not None and link.get('name') not in links:
            continue
        for col in link.findall('collision'):
            pose = np.eye(4)
            origin = col.find('origin')
            if origin is not None:
                xyz = [float(v) for v in origin.get('xyz', '0 0 0').split()]
                r, p, y = [float(v) for v in origin.get('rpy', '0 0 0').split()]
                pose[:3, :3] = transforms3d.euler.euler2mat(r, p, y, 'sxyz')
                pose[:3, 3] = xyz
            g = list(col.find('geometry'))[0]
            if g.tag == 'box':
                size = tuple(float(v) for v in g.get('size').split())
            elif g.tag == 'sphere':
                size = (float(g.get('radius')),)
            elif g.tag == 'cylinder':
                size = (float(g.get('radius')), float(g.get('length')))
            elif g.tag == 'mesh':
                package, _, rest = g.get('filename')[len('package://'):].partition('/')
                scale = [float(v) for v in g.get('scale', '1 1 1').split()]
                triangles = read_stl(Path(package_dirs[package]) / rest) * scale
                size = Hull(triangles.reshape(-1, 3))
                out.setdefault(link.get('name'), []).append(('hull', size, pose))
                continue
            else:
                continue
            out.setdefault(link.get('name'), []).append((g.tag, size, pose))
    return out


def triangle_distances(points, triangles):
    """Return (N, F): the distance from each point (N, 3) to each triangle (F, 3, 3).

    The closest point on a triangle by its Voronoi regions (vertex, edge,
    face; Ericson, Real-Time Collision Detection, 5.1.5), all pairs at once.
    """
    p = points[:, None, :]
    a, b, c = (triangles[None, :, k, :] for k in range(3))
    ab, ac, ap = b - a, c - a, p - a
    d1, d2 = np.sum(ab * ap, -1), np.sum(ac * ap, -1)
    bp, cp = p - b, p - c
    d3, d4 = np.sum(ab * bp, -1), np.sum(ac * bp, -1)
    d5, d6 = np.sum(ab * cp, -1), np.sum(ac * cp, -1)
    va, vb, vc = d3 * d6 - d5 * d4, d5 * d2 - d1 * d6, d1 * d4 - d3 * d2
    # A region's division by zero (a degenerate face) is never the region taken.
    with np.errstate(divide='ignore', invalid='ignore'):
        denom = va + vb + vc
        v_face, w_face = vb / denom, vc / denom
        t_ab = d1 / (d1 - d3)
        t_ac = d2 / (d2 - d6)
        t_bc = (d4 - d3) / ((d4 - d3) + (d5 - d6))
        closest = a + v_face[..., None] * ab + w_face[..., None] * ac
        answers = [a, b, c, a + t_ab[..., None] * ab, a + t_ac[..., None] * ac,
                   b + t_bc[..., None] * (c - b)]
    regions = [
        (d1 <= 0) & (d2 <= 0), (d3 >= 0) & (d4 <= d3), (d6 >= 0) & (d5 <= d6),
        (vc <= 0) & (d1 >= 0) & (d3 <= 0), (vb <= 0) & (d2 >= 0) & (d6 <= 0),
        (va <= 0) & ((d4 - d3) >= 0) & ((d5 - d6) >= 0)]
    done = np.zeros(d1.shape, dtype=bool)
    for region, answer in zip(regions, answers):
        take = region & ~done
        closest = np.where(take[..., None], np.broadcast_to(answer, closest.shape), closest)
        done |= take
    out = np.linalg.norm(p - closest, axis=-1)
    # A degenerate face (collinear corners) gives no answer: its edges are
    # its neighbours' edges.
    return np.where(np.isfinite(out), out, np.inf)


def point_distance(kind, size, pose, points):
    """Signed distances (N,) from points (N, 3) to a solid (negative inside)."""
    local = (points - pose[:3, 3]) @ pose[:3, :3]
    if kind == 'sphere':
        return np.linalg.norm(local, axis=1) - size[0]
    if kind == 'halfspace':
        return local[:, 2]
    if kind == 'box':
        q = np.abs(local) - 0.5 * np.array(size)
        outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
        return outside + np.minimum(q.max(axis=1), 0.0)
    if kind == 'cylinder':
        r, half = size[0], 0.5 * size[1]
        q = np.stack([np.hypot(local[:, 0], local[:, 1]) - r, np.abs(local[:, 2]) - half], 1)
        outside = np.linalg.norm(np.maximum(q, 0.0), axis=1)
        return outside + np.minimum(q.max(axis=1), 0.0)
    if kind == 'hull':
        height = local @ size.planes[:, :3].T + size.planes[:, 3]    # (N, F)
        inside = height.max(axis=1)
        out = inside.copy()
        away = inside > 0.0
        if away.any():
            out[away] = triangle_distances(local[away], size.triangles).min(axis=1)
        return out
    raise ValueError(kind)


def _phis(lo, hi, a, b):
    """Return the angles in [lo, hi] where a cos(phi) + b sin(phi) can be extreme.

    The ends and the stationary points inside.
    """
    out = [lo, hi]
    star = math.atan2(b, a)
    for k in range(-2, 3):
        for phi in (star + k * math.pi,):
            if lo < phi < hi:
                out.append(phi)
    return out


class _Family:
    """Patches of one smooth piece of a surface: params (u, v) in a box -> local points.

    ``radius(lo, hi)`` bounds how far a patch's points are from its centre's
    point; ``candidates(lo, hi, g)`` (None for a sphere) returns params
    among which the linear function g . x (local) takes its minimum over
    the patch, for the convexity bound.
    """

    def __init__(self, f, lo, hi, radius, candidates=None, grid=8):
        """Keep the map, the parameter box, the two bounds and the first split (grid^2)."""
        self.f, self.lo, self.hi, self.radius, self.candidates = f, lo, hi, radius, candidates
        self.grid = grid


def _patches(kind, size):
    """Return the surface of a solid as families of patches (local frame)."""
    if kind == 'sphere':
        r = size[0]

        def sphere(uv):
            th, ph = uv[:, 0], uv[:, 1]
            return r * np.stack([np.sin(th) * np.cos(ph), np.sin(th) * np.sin(ph), np.cos(th)], 1)
        return [_Family(sphere, (0.0, 0.0), (math.pi, 2 * math.pi),
                        lambda lo, hi: r * ((hi[0] - lo[0]) + (hi[1] - lo[1])) / 2)]
    if kind == 'cylinder':
        r, half = size[0], 0.5 * size[1]

        def side(uv):
            return np.stack([r * np.cos(uv[:, 0]), r * np.sin(uv[:, 0]), uv[:, 1]], 1)

        def side_candidates(lo, hi, g):
            return [(phi, z) for phi in _phis(lo[0], hi[0], g[0], g[1])
                    for z in (lo[1], hi[1])]

        def cap(sign):
            def f(uv):
                return np.stack([uv[:, 0] * np.cos(uv[:, 1]), uv[:, 0] * np.sin(uv[:, 1]),
                                 np.full(len(uv), sign * half)], 1)
            return f

        def cap_candidates(lo, hi, g):
            return [(rho, phi) for phi in _phis(lo[1], hi[1], g[0], g[1])
                    for rho in (lo[0], hi[0])]
        return [_Family(side, (0.0, -half), (2 * math.pi, half),
                        lambda lo, hi: (r * (hi[0] - lo[0]) + (hi[1] - lo[1])) / 2,
                        side_candidates),
                _Family(cap(1.0), (0.0, 0.0), (r, 2 * math.pi),
                        lambda lo, hi: ((hi[0] - lo[0]) + hi[0] * (hi[1] - lo[1])) / 2,
                        cap_candidates),
                _Family(cap(-1.0), (0.0, 0.0), (r, 2 * math.pi),
                        lambda lo, hi: ((hi[0] - lo[0]) + hi[0] * (hi[1] - lo[1])) / 2,
                        cap_candidates)]
    if kind == 'box':
        h = 0.5 * np.array(size)
        out = []
        for axis in range(3):
            a, b = [k for k in range(3) if k != axis]
            for sign in (1.0, -1.0):
                def face(uv, axis=axis, a=a, b=b, sign=sign):
                    p = np.empty((len(uv), 3))
                    p[:, axis], p[:, a], p[:, b] = sign * h[axis], uv[:, 0], uv[:, 1]
                    return p
                out.append(_Family(face, (-h[a], -h[b]), (h[a], h[b]),
                                   lambda lo, hi: math.hypot(hi[0] - lo[0], hi[1] - lo[1]) / 2,
                                   lambda lo, hi, g: [(u, v) for u in (lo[0], hi[0])
                                                      for v in (lo[1], hi[1])]))
        return out
    if kind == 'hull':
        return [_triangle_family(*corners) for corners in size.triangles]
    raise ValueError(kind)


def _triangle_family(a, b, c):
    """One flat face: (u, v) in the unit square -> a + u (b - a) + u v (c - b) (bilinear).

    A parameter box's image is in the hull of its four corners' images
    (bilinear weights): they bound its radius and carry its linear minimum.
    """
    def f(uv):
        u, v = uv[:, :1], uv[:, 1:]
        return a + u * (b - a) + u * v * (c - b)

    def corners(lo, hi, g=None):
        return [(u, v) for u in (lo[0], hi[0]) for v in (lo[1], hi[1])]

    def radius(lo, hi):
        mid = f(np.array([((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2)]))
        return float(np.max(np.linalg.norm(f(np.array(corners(lo, hi))) - mid, axis=1)))
    return _Family(f, (0.0, 0.0), (1.0, 1.0), radius, corners, grid=1)


def _gradient(other, p):
    """Gradient (3,) of the signed distance to ``other`` at point p (central differences)."""
    h = 1e-7
    steps = np.vstack([p + h * e for e in np.eye(3)] + [p - h * e for e in np.eye(3)])
    d = point_distance(other[0], other[1], other[2], steps)
    return (d[:3] - d[3:]) / (2 * h)


def distance_interval(a, b, floor, max_points=40000, axis=None):
    """Certified [lower, upper] of the signed distance between solids a and b.

    Args:
        a: (kind, size, (4, 4) pose in a common frame).
        b: the other solid, the same way; either may be a half-space.
        floor: stop refining once the lower bound is at least this, m.
        max_points: the most surface points evaluated per surface.
        axis: a unit direction from a toward b (any source: a hint), along
            which a convex pair's separation is tried first.

    A convex hull and a bounded primitive: Gilbert's algorithm on their
    support points (:func:`_convex_interval`). Otherwise both surfaces are
    searched against the other solid (a half-space's
    against nothing: it has no bounded surface), so a solid inside the other
    is found too. A sphere's distance is exact: its centre's distance minus
    its radius. A patch's bound is the better of two: Lipschitz (the
    signed distance to a solid moves by at most the distance moved) and
    convexity (the signed distance to a convex solid is convex, so it is
    above its tangent plane at the patch centre: exact on a flat face
    parallel to the other solid's, where Lipschitz never converges).
    """
    for ball, other in ((a, b), (b, a)):
        if ball[0] == 'sphere':   # a ball is a point grown by r: exact
            d = float(point_distance(other[0], other[1], other[2], ball[2][None, :3, 3])[0])
            return d - ball[1][0], d - ball[1][0]
    if 'hull' in (a[0], b[0]) and 'halfspace' not in (a[0], b[0]):
        return _convex_interval(a, b, floor, axis)
    lower, upper = math.inf, math.inf
    for s, other in ((a, b), (b, a)):
        if s[0] == 'halfspace':
            continue
        lo, up = _surface_interval(s, other, floor, max_points)
        lower, upper = min(lower, lo), min(upper, up)
    return lower, upper


def support_point(solid, u):
    """Return a point of the solid farthest along u (3,) (common frame)."""
    kind, size, pose = solid
    rot, org = pose[:3, :3], pose[:3, 3]
    w = rot.T @ u   # u in the solid's frame
    if kind == 'hull':
        local = size.points[int(np.argmax(size.points @ w))]
    elif kind == 'sphere':
        n = float(np.linalg.norm(w))
        local = size[0] * w / n if n > 0.0 else np.zeros(3)
    elif kind == 'box':
        local = 0.5 * np.array(size) * np.where(w >= 0.0, 1.0, -1.0)
    elif kind == 'cylinder':
        n = math.hypot(w[0], w[1])
        rim = size[0] * w[:2] / n if n > 0.0 else np.zeros(2)
        local = np.array([rim[0], rim[1], 0.5 * size[1] * (1.0 if w[2] >= 0.0 else -1.0)])
    else:
        raise ValueError(kind)
    return rot @ local + org


def _convex_interval(a, b, floor, axis=None, tol=1e-7, iterations=20000):
    """Certified [lower, upper] of the distance between two convex solids (Gilbert's algorithm).

    x runs over points of the Minkowski difference a - b toward its point
    nearest the origin: |x| is an upper bound of the distance, and the
    projection gap along x, ``min over a - b of z . x / |x|`` (the solids'
    separation along that axis), a lower bound. Stops once the bounds are
    within ``tol`` or settle the floor. ``axis`` (a toward b): its
    separation is tried first, and x starts at its support points.
    """
    u = np.array([1.0, 0.0, 0.0]) if axis is None else np.asarray(axis, dtype=np.float64)
    x = support_point(a, u) - support_point(b, -u)
    lower = -math.inf
    if axis is not None:   # the gap between the projections on u: a lower bound
        lower = float(support_point(b, -u) @ u - support_point(a, u) @ u)
    for _ in range(iterations):
        norm = float(np.linalg.norm(x))
        if norm == 0.0:
            return -math.inf, 0.0
        s = support_point(a, -x) - support_point(b, x)
        lower = max(lower, float(s @ x) / norm)
        if norm - lower < tol or lower >= floor or norm < floor:
            break
        d = s - x
        dd = float(d @ d)
        t = min(1.0, max(0.0, -float(x @ d) / dd)) if dd > 0.0 else 0.0
        x = x + t * d
    return lower, float(np.linalg.norm(x))


def _surface_interval(shape, other, floor, max_points):
    kind, size, pose = shape
    rot, org = pose[:3, :3], pose[:3, 3]
    heap, upper, count = [], math.inf, 0

    def push(fam, lo, hi):
        nonlocal upper, count
        mid = ((lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2)
        local = fam.f(np.array([mid]))[0]
        p = rot @ local + org
        d = float(point_distance(other[0], other[1], other[2], p[None])[0])
        count += 1
        upper = min(upper, d)
        bound = d - fam.radius(lo, hi)
        if fam.candidates is not None and d > 0.0:
            g = rot.T @ _gradient(other, p)
            corners = fam.f(np.array(fam.candidates(lo, hi, g)))
            bound = max(bound, d + float(np.min((corners - local) @ g)) - 1e-9)
        heapq.heappush(heap, (bound, count, fam, lo, hi))

    for fam in _patches(kind, size):
        lo, hi = fam.lo, fam.hi
        du, dv = (hi[0] - lo[0]) / fam.grid, (hi[1] - lo[1]) / fam.grid
        for i in range(fam.grid):
            for j in range(fam.grid):
                u0, v0 = lo[0] + du * i, lo[1] + dv * j
                push(fam, (u0, v0), (u0 + du, v0 + dv))
    while heap and count < max_points:
        bound, _, fam, lo, hi = heapq.heappop(heap)
        if bound >= floor or upper < floor:
            return min(bound, upper), upper
        um, vm = (lo[0] + hi[0]) / 2, (lo[1] + hi[1]) / 2
        for l2, h2 in (((lo[0], lo[1]), (um, vm)), ((um, lo[1]), (hi[0], vm)),
                       ((lo[0], vm), (um, hi[1])), ((um, vm), (hi[0], hi[1]))):
            push(fam, l2, h2)
    bound = heap[0][0] if heap else upper
    return min(bound, upper), upper


class RobotSolids:
    """A description's collision solids posed by the oracle's FK (base frame)."""

    def __init__(self, xml, raw_model, base, links, package_dirs=None):
        """Keep the solids of ``links`` (those the model under test checks); see solids_of."""
        solids = solids_of(xml, package_dirs, set(links))
        self.raw, self.base = raw_model, base
        self.solids = {link: solids[link] for link in links if link in solids}

    def posed(self, link, values):
        """Return [(kind, size, pose in the base frame)] of one link at joint values (dict)."""
        t = self.raw.pose(self.base, link, values)
        return [(kind, size, t @ pose) for kind, size, pose in self.solids[link]]
