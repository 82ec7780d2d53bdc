# SPDX-License-Identifier: Apache-2.0

"""numpy references of the collision kernels (kernels.proximity): the tests' oracle.

Each function computes what one kernel computes, with whole-array numpy
operations written apart from the kernel's loops (the model and the guard
call only the kernels: compiled, or their one source run by CPython). They
read a CollisionModel's tables; frames are in the chain's base frame,
distances in m, joints in rad (m for prismatic ones).
"""

from typing import Tuple

import numpy as np

IDENTITY_ROW = (1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0, 1.0, 0.0, 0.0, 0.0)


def cross(a, b):
    """Return the cross products of broadcast (..., 3) arrays."""
    return np.stack([a[..., 1] * b[..., 2] - a[..., 2] * b[..., 1],
                     a[..., 2] * b[..., 0] - a[..., 0] * b[..., 2],
                     a[..., 0] * b[..., 1] - a[..., 1] * b[..., 0]], axis=-1)


def joint_frames(model, q) -> Tuple[np.ndarray, np.ndarray]:
    """Return rotations (M+1, 3, 3) and origins (M+1, 3) of the joint frames; row 0: the base."""
    frames = model.tree.frames(np.asarray(q, dtype=np.float64))[0]   # a chain's, or each arm's
    table = np.empty((len(frames) + 1, 12))
    table[0] = IDENTITY_ROW
    if frames:
        table[1:] = np.array(frames, dtype=np.float64)
    return table[:, :9].reshape(-1, 3, 3), table[:, 9:]


def posed_bounds(model, q):
    """Return shape rotations (S, 3, 3), positions (S, 3), pair bounds (P,) and sphere centres.

    kernels.proximity.posed_bounds: a half-space's bound is the sphere's
    signed height above it; the centres ((P, 3), (P, 3)) are both shapes'
    bounding-sphere centres of each pair.
    """
    rot_f, org_f = joint_frames(model, q)
    r_frame, o_frame = rot_f[model._frame + 1], org_f[model._frame + 1]
    rot = np.einsum('sij,sjk->sik', r_frame, model._local[:, :3, :3])
    pos = np.einsum('sij,sj->si', r_frame, model._local[:, :3, 3]) + o_frame
    n_robot = len(model._robot)
    centre = np.einsum('sij,sj->si', r_frame, model._centre) + o_frame
    all_c = np.vstack([centre, model._w_centre])
    all_r = np.concatenate([model._radius, model._w_radius])
    ca, cb = all_c[model._pa], all_c[model._pb]
    with np.errstate(invalid='ignore'):   # inf - inf for a half-space: replaced below
        bound = np.linalg.norm(ca - cb, axis=1) - all_r[model._pa] - all_r[model._pb]
    w = model._pb - n_robot
    if model._w_plane.any():
        plane = (w >= 0) & model._w_plane[np.maximum(w, 0)]
        wi = w[plane]
        bound[plane] = (np.einsum('ij,ij->i', ca[plane], model._w_normal[wi])
                        - model._w_offset[wi] - all_r[model._pa[plane]])
    return rot, pos, bound, (ca, cb)


def sphere_witnesses(model, rows, centres):
    """Return nearest points a, b and normals (R, 3) of pairs ``rows``' bounding spheres.

    kernels.proximity.sphere_witnesses: a half-space's point is the foot of
    the sphere's centre on its plane, the normal into it.
    """
    ca, cb = centres[0][rows], centres[1][rows]
    radius = np.concatenate([model._radius, model._w_radius])
    ra, rb = radius[model._pa[rows]], radius[model._pb[rows]]
    gap = cb - ca
    with np.errstate(invalid='ignore', divide='ignore'):
        normal = gap / np.linalg.norm(gap, axis=1)[:, None]
    w = model._pb[rows] - len(model._robot)
    if model._w_plane.any():
        plane = (w >= 0) & model._w_plane[np.maximum(w, 0)]
        if plane.any():
            up = model._w_normal[w[plane]]
            height = np.einsum('ij,ij->i', ca[plane], up) - model._w_offset[w[plane]]
            normal[plane] = -up
            cb = cb.copy()
            cb[plane] = ca[plane] - height[:, None] * up
            rb = np.where(plane, 0.0, rb)
    normal = np.where(np.isfinite(normal), normal, 0.0)
    return ca + ra[:, None] * normal, cb - rb[:, None] * normal, normal


def gradients(model, q, near) -> np.ndarray:
    """Return (K, n) each near pair's d(distance)/dq: ``normal . (v_b - v_a)`` per joint."""
    k = len(near.pairs)
    rot_f, org_f = joint_frames(model, q)
    rot, origin = rot_f[1:], org_f[1:]
    z = np.einsum('mij,mj->mi', rot, model._axes)
    n_robot = len(model._robot)
    pairs = np.array([model.pairs[p] for p in near.pairs]).reshape(-1, 2)
    rate = np.zeros((k, len(rot)))
    for side, point, sign in ((0, near.point_a, -1.0), (1, near.point_b, 1.0)):
        shape = pairs[:, side]
        robot = shape < n_robot
        frame = np.where(robot, model._frame[np.minimum(shape, n_robot - 1)], -1)
        lever = point[:, None, :] - origin[None, :, :]
        nz = cross(near.normal[:, None, :], z[None, :, :])
        along = np.where(model._prismatic[None, :], near.normal @ z.T,
                         np.einsum('kmi,kmi->km', lever, nz))
        # Frame m moves the shape when m is on its path from the base (a chain:
        # m <= its frame; a tree of arms: its own branch and the shared part).
        moves = np.where(frame[:, None] >= 0, model.tree.ancestor[:, frame].T, False)
        rate += sign * moves * along
    return rate @ model._to_free


def path_sweep(model, q, travel) -> np.ndarray:
    """Return (P, n) the sweep matrix of one joint path from q (kernels.proximity.path_sweep)."""
    rot_f, org_f = joint_frames(model, q)
    rot, org = rot_f[1:], org_f[1:]
    centre = np.einsum('sij,sj->si', rot_f[model._frame + 1], model._centre) \
        + org_f[model._frame + 1]
    z = np.einsum('mij,mj->mi', rot, model._axes)
    z /= np.maximum(np.linalg.norm(z, axis=1), 1e-300)[:, None]
    perp = np.linalg.norm(cross(centre[:, None, :] - org[None, :, :], z[None, :, :]), axis=2)
    moved = np.abs(model._to_free) @ travel
    reach = model._arms * moved[None, :]
    anc = model.tree.ancestor   # anc[m, f]: frame m moves frame f
    later = reach @ anc.T - reach   # the frames m moves, after it on the shape's path
    lever = np.where(model._prismatic[None, :], model._arms,
                     np.minimum(model._arms, perp + model._radius[:, None] + later))
    on = np.where(model._frame[:, None] >= 0, anc[:, model._frame].T, False)   # (S, M)
    lever = np.where(on, lever, 0.0)
    n_robot = len(model._robot)
    rows = np.zeros((len(model.pairs), len(rot)))
    for p, (i, j) in enumerate(model.pairs):
        if j >= n_robot:
            rows[p] = lever[i]
        else:   # each shape by the frames that do not also move the other
            rows[p] = np.where(on[j], 0.0, lever[i]) + np.where(on[i], 0.0, lever[j])
    return rows @ np.abs(model._to_free)


def known_floors(q, known_distance, known_at, sweep) -> np.ndarray:
    """Return (P,) what distances known at ``known_at`` (P, n) leave at q (n,), m."""
    return known_distance - np.einsum('pn,pn->p', sweep, np.abs(q - known_at))


def braking_profile(v1, a_max) -> Tuple[np.ndarray, np.ndarray]:
    """Return each joint's time to rest (n,), s, and signed deceleration (n,) from v1."""
    with np.errstate(divide='ignore', invalid='ignore'):   # 0 * inf: a joint at rest
        stops = np.where(np.isfinite(a_max), np.abs(v1) / a_max, 0.0)
        dec = np.where(np.isfinite(a_max), np.sign(v1) * a_max, 0.0)
    return stops, dec


def braking_dip(grads, v1, a_max) -> np.ndarray:
    """Return (K,) the lowest of ``grads @ displacement(t)`` while braking from v1, m (<= 0)."""
    stops, dec = braking_profile(v1, a_max)
    times = np.unique(np.concatenate([[0.0], stops[stops > 0.0]]))
    tt = np.minimum(times[:, None], stops[None, :])
    lowest = np.min(grads @ (v1 * tt - 0.5 * dec * tt * tt).T, axis=1)
    t0 = times[:-1]
    moving = stops[None, :] > t0[:, None]
    lin = grads @ (moving * v1).T
    quad = grads @ (moving * dec).T
    with np.errstate(divide='ignore', invalid='ignore'):
        vertex = np.where(quad < 0.0, lin / quad, -1.0)
    inside = (vertex > t0[None, :]) & (vertex < times[1:][None, :])
    if inside.any():
        k, i = np.nonzero(inside)
        tv = np.minimum(vertex[k, i][:, None], stops[None, :])
        value = np.einsum('jn,jn->j', grads[k], v1 * tv - 0.5 * dec * tv * tv)
        np.minimum.at(lowest, k, value)
    return np.minimum(lowest, 0.0)


def slide_projection(x0, grads, need, slack, sweeps) -> np.ndarray:
    """Return the x nearest x0 with ``grads @ x >= need`` (Hildreth's method, ``sweeps`` at most).

    Rows clearing their need at x0 by ``slack`` (m) stay out.
    """
    norms = np.einsum('ij,ij->i', grads, grads)
    use = (norms > 1e-18) & (grads @ x0 - need < slack)
    grads, need, norms = grads[use], need[use], norms[use]
    lam = np.zeros(len(grads))
    x = x0.copy()
    for _ in range(sweeps):
        largest = 0.0
        for i in range(len(grads)):
            step = max(-lam[i], (need[i] - grads[i] @ x) / norms[i])
            if step != 0.0:
                lam[i] += step
                x += step * grads[i]
                largest = max(largest, abs(step))
        if largest < 1e-12:
            break
    return x
