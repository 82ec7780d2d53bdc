# SPDX-License-Identifier: Apache-2.0

"""``ik_bench collision``'s second library: python-fcl against coal on the same shapes.

Every checked pair's exact distance with each library (the same shapes,
meshes as the same convex hulls, the same configurations), and known
answers: solids set 2 m apart. python-fcl is optional: without it the
columns are left out.
"""

import math
import time as _time

from ik_node.core.collision.shapes import primitive_geometry
import numpy as np


def fcl_geometry(shape):
    """Return python-fcl's geometry of a Shape, in its own frame (meshes: coal's hull faces)."""
    import coal
    import fcl
    primitive = primitive_geometry(shape, fcl)
    if primitive is not None:
        return primitive
    points = coal.StdVec_Vec3s()
    for p in shape.vertices:
        points.append(np.asarray(p, dtype=np.float64))
    hull = coal.Convex.convexHull(points, True, None)
    faces = []
    for k in range(hull.num_polygons):
        t = hull.polygons(k)
        faces += [3, t[0], t[1], t[2]]
    return fcl.Convex(np.array(hull.points()), hull.num_polygons, np.array(faces))


def library_comparison(model, rng, chain, samples=100):
    """Time every checked pair's exact distance with coal and with python-fcl; compare them.

    The same shapes (meshes as the same convex hulls), the same configurations,
    each library's own distance call with its default GJK settings. Pairs with
    a half-space are left out: python-fcl 0.7.0.11 crashes on them (a
    segmentation fault: fcl has no distance to a half-space). Returns (coal s,
    fcl s: medians per configuration, the largest |difference| m over
    separated pairs, pairs compared), or None without python-fcl.
    """
    import coal
    try:
        import fcl
    except ImportError:
        return None
    lower = np.where(np.isfinite(chain.lower), chain.lower, -math.pi)
    upper = np.where(np.isfinite(chain.upper), chain.upper, math.pi)
    qs = [rng.uniform(lower, upper) for _ in range(samples)]
    n_robot = len(model._robot)
    shapes = [s for _, s, _ in model._robot] + [s for _, s in model._world]
    ours = [coal.CollisionObject(g) for g in model._geoms] + [
        coal.CollisionObject(g, tf) for g, tf in zip(model._world_geoms, model._world_tf)]
    theirs = [fcl.CollisionObject(fcl_geometry(s)) for s in shapes]
    for k, (_, s) in enumerate(model._world):
        theirs[n_robot + k].setTransform(fcl.Transform(s.pose[:3, :3], s.pose[:3, 3]))
    pairs = [(i, j) for i, j in model.pairs
             if 'halfspace' not in (shapes[i].kind, shapes[j].kind)]
    request, result = coal.DistanceRequest(), coal.DistanceResult()
    times = {'coal': [], 'fcl': []}
    values = {'coal': [], 'fcl': []}
    for q in qs:
        rot, pos = model.shape_poses(q)
        start = _time.perf_counter()
        for s in range(n_robot):
            ours[s].setTransform(coal.Transform3s(rot[s], pos[s]))
        row = []
        for i, j in pairs:
            result.clear()
            row.append(coal.distance(ours[i], ours[j], request, result))
        times['coal'].append(_time.perf_counter() - start)
        values['coal'].append(row)
        start = _time.perf_counter()
        for s in range(n_robot):
            theirs[s].setTransform(fcl.Transform(rot[s], pos[s]))
        row = [fcl.distance(theirs[i], theirs[j], fcl.DistanceRequest(), fcl.DistanceResult())
               for i, j in pairs]
        times['fcl'].append(_time.perf_counter() - start)
        values['fcl'].append(row)
    a, b = np.array(values['coal']), np.array(values['fcl'])
    apart = (a > 1e-4) & (b > 1e-4)
    gap = float(np.max(np.abs(a - b)[apart], initial=0.0))
    return (float(np.median(times['coal'])), float(np.median(times['fcl'])), gap,
            int(apart.sum()))


def known_answers():
    """Return [(case, exact m, coal m, python-fcl m or a note)] for solids set 2 m apart.

    Unit cubes, cylinders (radius 0.5, length 1) and spheres (radius 0.5),
    one at the origin and one 3 m up the z axis; a cube 3 m above the half-
    space z < 0 (2.5 m).
    """
    import coal
    try:
        import fcl
    except ImportError:
        return []
    up = np.array([0.0, 0.0, 3.0])
    solids = {'cube': ((1, 1, 1), coal.Box, fcl.Box),
              'cylinder': ((0.5, 1.0), coal.Cylinder, fcl.Cylinder),
              'sphere': ((0.5,), coal.Sphere, fcl.Sphere)}
    rows = []
    for a, b in (('cube', 'cube'), ('cylinder', 'cylinder'), ('cube', 'sphere')):
        (sa, ca, fa), (sb, cb, fb) = solids[a], solids[b]
        ours = coal.distance(ca(*sa), coal.Transform3s(np.eye(3), up), cb(*sb),
                             coal.Transform3s(), coal.DistanceRequest(), coal.DistanceResult())
        theirs = fcl.distance(fcl.CollisionObject(fa(*sa), fcl.Transform(np.eye(3), up)),
                              fcl.CollisionObject(fb(*sb)), fcl.DistanceRequest(),
                              fcl.DistanceResult())
        rows.append((f'{a} / {b}', 2.0, float(ours), float(theirs)))
    ours = coal.distance(coal.Box(1, 1, 1), coal.Transform3s(np.eye(3), up),
                         coal.Halfspace(np.array([0.0, 0.0, 1.0]), 0.0), coal.Transform3s(),
                         coal.DistanceRequest(), coal.DistanceResult())
    rows.append(('cube / half-space', 2.5, float(ours), 'crashes (not run)'))
    return rows


def library_columns(result):
    """Return the row's columns of library_comparison's result (python-fcl missing: none)."""
    if result is None:
        return {}
    coal_s, fcl_s, gap, compared = result
    return {'all_pairs_coal_ms': 1e3 * coal_s, 'all_pairs_fcl_ms': 1e3 * fcl_s,
            'fcl_over_coal': fcl_s / coal_s, 'max_difference_m': gap,
            'pairs_compared': compared}
