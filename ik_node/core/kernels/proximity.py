# SPDX-License-Identifier: Apache-2.0

"""Collision model kernels: shapes posed with every pair's sphere bound, and distance gradients.

Loops over shapes, pairs and joint frames in the numba subset (arrays in,
arrays written): the one source of every collision kernel. The numba
backend compiles them; the numpy backend (numba missing, or a node's first
ticks while the compile runs) runs the same source under CPython, slower
(``ik_bench ticks``) and with the same answers. The tests check both
against numpy references written apart (test/helpers/collision_reference.py).

Frames: everything is in the chain's base frame. Rotations of joint frames
are rows ``frames[f, 0:9]`` (row-major) with origins ``frames[f, 9:12]``;
frame -1 is the base itself.
"""

import math

import numpy as np


def posed_bounds(frames, frame_of, local, centre, radius, w_centre, w_radius, w_plane,
                 w_normal, w_offset, pa, pb, rot_out, pos_out, bound_out, ca_out, cb_out):
    """Pose the robot shapes at the joint frames and bound every pair's distance.

    Args:
        frames: (M, 12) joint frames after motion, base frame (see module doc).
        frame_of: (S,) int, the joint frame each robot shape is fixed to (-1: base).
        local: (S, 4, 4) each shape's pose in its joint frame.
        centre: (S, 3) each shape's bounding-sphere centre in its joint frame, m.
        radius: (S,) bounding-sphere radii, m.
        w_centre: (W, 3) obstacles' bounding-sphere centres, base frame, m.
        w_radius: (W,) their radii, m (inf for a half-space).
        w_plane: (W,) bool, the obstacle is a half-space.
        w_normal: (W, 3) a half-space's outward normal (unused otherwise).
        w_offset: (W,) a half-space's plane offset along its normal, m.
        pa: (P,) int, each pair's first shape (a robot shape).
        pb: (P,) int, its second: a robot shape (< S) or obstacle S + w.
        rot_out: (S, 3, 3) written: each shape's rotation, base frame.
        pos_out: (S, 3) written: its origin, base frame, m.
        bound_out: (P,) written: a lower bound of each pair's distance, m
            (spheres' gap; a half-space: the sphere's height above its plane).
        ca_out: (P, 3) written: the first shape's sphere centre, base frame.
        cb_out: (P, 3) written: the second's (an obstacle's own centre).

    """
    n_robot = frame_of.shape[0]
    centre_w = np.empty((n_robot, 3))
    for s in range(n_robot):
        f = frame_of[s]
        for i in range(3):
            if f < 0:   # the base: identity rows
                r0 = 1.0 if i == 0 else 0.0
                r1 = 1.0 if i == 1 else 0.0
                r2 = 1.0 if i == 2 else 0.0
                o = 0.0
            else:
                r0, r1, r2 = frames[f, 3 * i], frames[f, 3 * i + 1], frames[f, 3 * i + 2]
                o = frames[f, 9 + i]
            for j in range(3):
                rot_out[s, i, j] = r0 * local[s, 0, j] + r1 * local[s, 1, j] + r2 * local[s, 2, j]
            pos_out[s, i] = r0 * local[s, 0, 3] + r1 * local[s, 1, 3] + r2 * local[s, 2, 3] + o
        for i in range(3):
            if f < 0:
                centre_w[s, i] = centre[s, i]
            else:
                centre_w[s, i] = (frames[f, 3 * i] * centre[s, 0]
                                  + frames[f, 3 * i + 1] * centre[s, 1]
                                  + frames[f, 3 * i + 2] * centre[s, 2] + frames[f, 9 + i])
    # The pairs as whole arrays (a few operations under CPython, loops once compiled).
    n_world = w_radius.shape[0]
    all_c = np.empty((n_robot + n_world, 3))
    all_c[:n_robot] = centre_w
    all_c[n_robot:] = w_centre
    all_r = np.empty(n_robot + n_world)   # a half-space's 0 here: its bound is set below
    all_r[:n_robot] = radius
    all_r[n_robot:] = np.where(w_plane, 0.0, w_radius)
    ca_out[:] = all_c[pa]
    cb_out[:] = all_c[pb]
    gap = ca_out - cb_out
    bound_out[:] = np.sqrt((gap * gap) @ np.ones(3)) - all_r[pa] - all_r[pb]
    if not np.any(w_plane):
        return
    world = pb - n_robot
    for p in np.flatnonzero((world >= 0) & w_plane[np.maximum(world, 0)]):
        w = world[p]   # a half-space: the sphere's height above its plane
        bound_out[p] = (ca_out[p, 0] * w_normal[w, 0] + ca_out[p, 1] * w_normal[w, 1]
                        + ca_out[p, 2] * w_normal[w, 2] - w_offset[w] - radius[pa[p]])


def near_pairs(bound, known, threshold, exact, near_out, fine_out, floor_out):
    """Select the pairs a distance query lists; return how many.

    A pair's floor is the larger of its sphere bound and the lower bound the
    caller holds (``known_floors`` of distances known elsewhere). Pairs
    whose floor is below their threshold are listed in order.

    Args:
        bound: (P,) each pair's sphere bound at q, m (posed_bounds).
        known: (P,) each pair's lower bound held by the caller, m (-inf: none).
        threshold: (P,) list a pair whose floor is below this, m.
        exact: (P,) a listed pair whose sphere bound is below this needs
            the exact distance, m.
        near_out: (P,) int, written: the listed pairs, first ``count`` entries.
        fine_out: (P,) bool, written: the listed pair needs the exact distance.
        floor_out: (P,) written: every pair's floor, m.

    """
    count = 0
    for p in range(bound.shape[0]):
        floor = max(bound[p], known[p])
        floor_out[p] = floor
        if floor < threshold[p]:
            near_out[count] = p
            fine_out[count] = bound[p] < exact[p]
            count += 1
    return count


def known_floors(q, known_distance, known_at, sweep, need, out):
    """Write what known distances leave of each pair's at q (m, (P,)); return True if all >= need.

    Args:
        q: (n,) the joints, rad (m).
        known_distance: (P,) each pair's distance known before, m (-inf: none).
        known_at: (P, n) the joints where it was known.
        sweep: (P, n) the model's sweep matrix, m per rad.
        need: (P,) m.
        out: (P,) written: ``known_distance - sweep . |q - known_at|``, m.

    """
    # Whole rows at once: a few array operations under CPython, loops once compiled
    # (-inf less a finite sweep stays -inf: no pair known stays unknown).
    out[:] = known_distance - (sweep * np.abs(q - known_at)) @ np.ones(q.shape[0])
    return bool(np.all(out >= need))


def distance_rates(frames, axes, prismatic, frame_of, ancestor, shape_a, shape_b, point_a,
                   point_b, normal, rate_out):
    """Write each near pair's distance rate per joint frame's motion, (K, M).

    The distance grows at ``normal . (v_b - v_a)``; a revolute frame m turning
    at 1 rad/s moves a point p at ``z_m x (p - o_m)``, a prismatic one at
    ``z_m``, for the shapes fixed to frame m or one it moves (``ancestor``).

    Args:
        frames: (M, 12) joint frames after motion, base frame.
        axes: (M, 3) each joint's axis in its own frame.
        prismatic: (M,) bool.
        frame_of: (S,) int, each robot shape's joint frame (-1: base).
        ancestor: (M, M) bool, frame m's motion moves frame f (model.tree.FrameTree).
        shape_a: (K,) int, each pair's first shape (robot).
        shape_b: (K,) int, its second: a robot shape (< S) or an obstacle (static).
        point_a: (K, 3) nearest points on a, base frame, m.
        point_b: (K, 3) nearest points on b, base frame, m.
        normal: (K, 3) unit normals from a toward b.
        rate_out: (K, M) written, m per rad (m per m for a prismatic frame).

    """
    n_robot = frame_of.shape[0]
    m_frames = frames.shape[0]
    for k in range(shape_a.shape[0]):
        nx, ny, nz = normal[k, 0], normal[k, 1], normal[k, 2]
        last_a = frame_of[shape_a[k]]
        last_b = frame_of[shape_b[k]] if shape_b[k] < n_robot else -1
        for m in range(m_frames):
            f = frames[m]
            zx = f[0] * axes[m, 0] + f[1] * axes[m, 1] + f[2] * axes[m, 2]
            zy = f[3] * axes[m, 0] + f[4] * axes[m, 1] + f[5] * axes[m, 2]
            zz = f[6] * axes[m, 0] + f[7] * axes[m, 1] + f[8] * axes[m, 2]
            rate = 0.0
            for side in range(2):
                last = last_a if side == 0 else last_b
                if last < 0 or not ancestor[m, last]:
                    continue
                if prismatic[m]:
                    along = nx * zx + ny * zy + nz * zz
                else:   # normal . (z x (p - o)) = (p - o) . (normal x z)
                    if side == 0:
                        px, py, pz = point_a[k, 0], point_a[k, 1], point_a[k, 2]
                    else:
                        px, py, pz = point_b[k, 0], point_b[k, 1], point_b[k, 2]
                    lx, ly, lz = px - f[9], py - f[10], pz - f[11]
                    along = (lx * (ny * zz - nz * zy) + ly * (nz * zx - nx * zz)
                             + lz * (nx * zy - ny * zx))
                rate += along if side == 1 else -along
            rate_out[k, m] = rate


def braking_dip(grads, v1, a_max, out):
    """Write each pair's lowest linearised distance change while the joints brake, (K,).

    Each joint i brakes from v1[i] at its own limit a_max[i] (inf: at once)
    and stops at ``|v1[i]| / a_max[i]``; its displacement is ``v t -
    sign(v) a t^2 / 2`` until then. Along a pair's distance gradient the
    change is piecewise quadratic in t: its minimum is at t = 0, a stop
    time, or a vertex inside an interval between two.

    Args:
        grads: (K, n) each pair's d(distance)/dq, m per rad.
        v1: (n,) joint velocities at the start of braking, rad/s.
        a_max: (n,) acceleration limits, rad/s^2 (> 0; inf: stops at once).
        out: (K,) written: the lowest change (<= 0), m.

    """
    n = v1.shape[0]
    stops = np.zeros(n)
    dec = np.zeros(n)
    for i in range(n):
        if math.isfinite(a_max[i]):
            stops[i] = abs(v1[i]) / a_max[i]
            dec[i] = math.copysign(a_max[i], v1[i]) if v1[i] != 0.0 else 0.0
    times = np.sort(stops)   # breakpoints; t = 0 and repeats cost one evaluation each
    for k in range(grads.shape[0]):
        lowest = 0.0
        for b in range(n):
            lowest = min(lowest, _braking_change(grads, k, v1, dec, stops, times[b]))
        t0 = 0.0
        for b in range(n):
            t1 = times[b]
            if t1 > t0:
                # On [t0, t1) the joints with stops beyond t0 move: the
                # change's slope is lin - quad t; a minimum where it is zero.
                lin, quad = 0.0, 0.0
                for i in range(n):
                    if stops[i] > t0:
                        lin += grads[k, i] * v1[i]
                        quad += grads[k, i] * dec[i]
                if quad < 0.0:
                    tv = lin / quad
                    if t0 < tv < t1:
                        lowest = min(lowest, _braking_change(grads, k, v1, dec, stops, tv))
                t0 = t1
        out[k] = lowest


def _braking_change(grads, k, v1, dec, stops, t):
    """Return pair k's linearised distance change t s into braking (see braking_dip), m.

    Joint i has moved ``v1 tau - dec tau^2 / 2`` with tau = min(t, stops[i]).
    """
    value = 0.0
    for i in range(v1.shape[0]):
        tau = min(t, stops[i])
        value += grads[k, i] * (v1[i] * tau - 0.5 * dec[i] * tau * tau)
    return value


def slide_projection(x0, grads, need, slack, sweeps, out):
    """Write the x nearest x0 with ``grads @ x >= need`` (Hildreth's method, approximate).

    The guard's slid goal (collision.guard.slide; the tests' numpy
    reference has the same rows, order and updates). Rows with a zero
    gradient, or whose ``grads @ x0`` clears ``need`` by ``slack`` or more,
    are left out; the others are swept at most ``sweeps`` times, until no
    multiplier changes by 1e-12 or more.

    Args:
        x0: (n,) the unconstrained displacement, rad.
        grads: (K, n) the pairs' distance gradients, m per rad.
        need: (K,) the least ``grads @ x`` each pair needs, m.
        slack: rows clearing their need by this much are left out, m.
        sweeps: the most sweeps over the rows.
        out: (n,) written: x, rad.

    """
    n = x0.shape[0]
    rows = grads.shape[0]
    for j in range(n):
        out[j] = x0[j]
    use = np.zeros(rows, dtype=np.int64)
    norms = np.zeros(rows)
    used = 0
    for i in range(rows):
        norm, along = 0.0, 0.0
        for j in range(n):
            norm += grads[i, j] * grads[i, j]
            along += grads[i, j] * x0[j]
        if norm > 1e-18 and along - need[i] < slack:
            use[used] = i
            norms[used] = norm
            used += 1
    lam = np.zeros(used)
    for _ in range(sweeps):
        largest = 0.0
        for u in range(used):
            i = use[u]
            along = 0.0
            for j in range(n):
                along += grads[i, j] * out[j]
            step = max(-lam[u], (need[i] - along) / norms[u])
            if step != 0.0:
                lam[u] += step
                for j in range(n):
                    out[j] += step * grads[i, j]
                largest = max(largest, abs(step))
        if largest < 1e-12:
            break


def stop_and_need(q1, v1, a_max, lower, upper, sweep, margin, stop_out, need_out):
    """Write the stopping point braking from (q1, v1), and each pair's need on the way there.

    The guard's (collision.guard.CollisionGuard._stop_and_need).

    Args:
        q1: (n,) joints, rad.
        v1: (n,) their velocities, rad/s.
        a_max: (n,) acceleration limits, rad/s^2 (inf: stops at once).
        lower: (n,) lower position limits, rad.
        upper: (n,) upper position limits, rad.
        sweep: (P, n) the model's sweep matrix, m per rad.
        margin: m.
        stop_out: (n,) written: ``q1 + v1 |v1| / (2 a)`` within the limits.
        need_out: (P,) written: margin + ``sweep . |stop - q1|``, m.

    """
    n = q1.shape[0]
    for i in range(n):
        travel = v1[i] * abs(v1[i]) / (2.0 * a_max[i]) if math.isfinite(a_max[i]) else 0.0
        stop_out[i] = min(max(q1[i] + travel, lower[i]), upper[i])
    need_out[:] = margin + sweep @ np.abs(stop_out - q1)


def braking_path(q1, v1, a_max, lower, upper, stop, sweep, margin, configs_out, speeds_out,
                 needs_out):
    """Write the braking path from (q1, v1) in equal times, and what each piece needs.

    The guard's (collision.guard.CollisionGuard._braking_path). Each joint
    brakes at its own limit to rest (``v t - sign(v) a t^2 / 2`` until
    ``|v| / a``), within the position limits; the path's end is ``stop`` (stop_and_need's).

    Args:
        q1: (n,) joints, rad.
        v1: (n,) their velocities, rad/s.
        a_max: (n,) acceleration limits, rad/s^2 (inf: stops at once).
        lower: (n,) lower position limits, rad.
        upper: (n,) upper position limits, rad.
        stop: (n,) where braking ends, rad.
        sweep: (P, n) the path's sweep bound, m per rad.
        margin: m.
        configs_out: (K + 1, n) written: the joints after k of K equal times
            (row 0: q1, row K: stop), rad.
        speeds_out: (K, n) written: their velocities at the pieces' starts, rad/s.
        needs_out: (K, P) written: margin + ``sweep . |configs[k + 1] - configs[k]|``, m.

    """
    pieces, n = speeds_out.shape[0], q1.shape[0]
    end = 0.0
    for i in range(n):
        if math.isfinite(a_max[i]):
            end = max(end, abs(v1[i]) / a_max[i])
    for i in range(n):
        configs_out[0, i], speeds_out[0, i], configs_out[pieces, i] = q1[i], v1[i], stop[i]
        finite = math.isfinite(a_max[i])
        rest = abs(v1[i]) / a_max[i] if finite else 0.0
        dec = math.copysign(a_max[i], v1[i]) if finite and v1[i] != 0.0 else 0.0
        for k in range(1, pieces):
            t = min(end * k / pieces, rest)
            speeds_out[k, i] = v1[i] - dec * t if t < rest else 0.0
            x = q1[i] + v1[i] * t - 0.5 * dec * t * t
            configs_out[k, i] = min(max(x, lower[i]), upper[i])
    for k in range(pieces):
        needs_out[k, :] = margin + sweep @ np.abs(configs_out[k + 1] - configs_out[k])


def path_sweep(frames, axes, prismatic, frame_of, parent, centre, radius, arms, side_a,
               start_a, side_b, start_b, to_free, travel, out):
    """Write each pair's sweep (P, n) along a joint path starting at ``frames``: m per rad.

    A tighter twin of the model's static sweep for one path on which free
    joint i travels at most ``travel[i]`` (monotone or not: its total
    variation). Joint frame m turning by 1 rad moves a point p of shape s by
    ``|z_m x (p - o_m)|``, at most the distance from s's bounding-sphere
    centre to m's axis plus its radius. On the path that distance changes
    only through the frames between m and s's own (the frames up to m move
    both together, m itself turns about its axis), each by at most its arm
    (the static bound) times its travel. Each entry is the smaller of this
    and the static arm; a prismatic frame's is 1 (m per m). A pair counts,
    for each of its shapes, the frames on that shape's path from the base
    that do not also move the other shape (on one chain: the later shape's
    frames after the earlier one's; on a tree, two arms: each arm's own).

    Args:
        frames: (M, 12) joint frames at the path's start, base frame.
        axes: (M, 3) each joint's axis in its own frame.
        prismatic: (M,) bool.
        frame_of: (S,) int, each robot shape's joint frame (-1: base).
        parent: (M,) int, each frame's parent frame (-1: the base).
        centre: (S, 3) bounding-sphere centres in their joint frames, m.
        radius: (S,) bounding-sphere radii, m.
        arms: (S, M) the static arms (CollisionModel._shape_arms), m per rad.
        side_a: (P,) int, a robot shape of the pair.
        start_a: (P,) int, the frame on side_a's path nearest the base whose
            motion counts (it and the frames after it on that path); M: none.
        side_b: (P,) int, the pair's other shape when a robot shape, else -1.
        start_b: (P,) int, as start_a for side_b (M: none).
        to_free: (M, n) each joint frame's rate per free joint (mimic multipliers).
        travel: (n,) each free joint's travel on the path, rad (m).
        out: (P, n) written: the bound on each pair's distance change per
            unit travel of each free joint, m per rad.

    """
    m_frames = frames.shape[0]
    n = to_free.shape[1]
    moved = np.abs(to_free) @ travel   # (M,) each frame's turn
    # suffix[s, m, j]: shape s's arms over frame m and the frames after it on
    # s's path, per free joint j (row M: none).
    suffix = np.zeros((frame_of.shape[0], m_frames + 1, n))
    for s in range(frame_of.shape[0]):
        f = frame_of[s]
        if f < 0:
            continue
        fr = frames[f]
        cx = fr[0] * centre[s, 0] + fr[1] * centre[s, 1] + fr[2] * centre[s, 2] + fr[9]
        cy = fr[3] * centre[s, 0] + fr[4] * centre[s, 1] + fr[5] * centre[s, 2] + fr[10]
        cz = fr[6] * centre[s, 0] + fr[7] * centre[s, 1] + fr[8] * centre[s, 2] + fr[11]
        later = 0.0   # how far the frames after m may move the centre on the path
        acc = np.zeros(n)
        m = f
        while m >= 0:
            if prismatic[m]:
                lever = arms[s, m]
            else:
                g = frames[m]
                zx = g[0] * axes[m, 0] + g[1] * axes[m, 1] + g[2] * axes[m, 2]
                zy = g[3] * axes[m, 0] + g[4] * axes[m, 1] + g[5] * axes[m, 2]
                zz = g[6] * axes[m, 0] + g[7] * axes[m, 1] + g[8] * axes[m, 2]
                dx, dy, dz = cx - g[9], cy - g[10], cz - g[11]
                ex, ey, ez = dy * zz - dz * zy, dz * zx - dx * zz, dx * zy - dy * zx
                norm = math.sqrt(zx * zx + zy * zy + zz * zz)
                perp = math.sqrt(ex * ex + ey * ey + ez * ez) / norm if norm > 0.0 else 0.0
                lever = min(arms[s, m], perp + radius[s] + later)
            later += arms[s, m] * moved[m]
            acc = acc + lever * np.abs(to_free[m])
            suffix[s, m, :] = acc
            m = parent[m]
    for p in range(side_a.shape[0]):
        out[p, :] = suffix[side_a[p], start_a[p], :]
        if side_b[p] >= 0:
            out[p, :] += suffix[side_b[p], start_b[p], :]


def sphere_witnesses(rows, ca, cb, radius, w_radius, w_plane, w_normal, w_offset, pa, pb, out):
    """Write the bounding spheres' nearest points and normals of pairs ``rows``, base frame.

    A half-space's
    point is the foot of the sphere's centre on its plane, the normal into
    it; two coincident centres get a zero normal.

    Args:
        rows: (R,) int, checked pairs.
        ca: (P, 3) each pair's first sphere centre, base frame (posed_bounds).
        cb: (P, 3) its second's.
        radius: (S,) robot shapes' bounding-sphere radii, m.
        w_radius: (W,) obstacles' radii, m (inf for a half-space).
        w_plane: (W,) bool, the obstacle is a half-space.
        w_normal: (W, 3) a half-space's outward normal.
        w_offset: (W,) a half-space's plane offset along its normal, m.
        pa: (P,) int, each pair's first shape (a robot shape).
        pb: (P,) int, its second: a robot shape (< S) or obstacle S + w.
        out: (R, 9) written: point on a, point on b, unit normal from a toward b.

    """
    n_robot = radius.shape[0]
    for r in range(rows.shape[0]):
        p = rows[r]
        ax, ay, az = ca[p, 0], ca[p, 1], ca[p, 2]
        bx, by, bz = cb[p, 0], cb[p, 1], cb[p, 2]
        ra = radius[pa[p]]
        b = pb[p]
        w = b - n_robot
        if w >= 0 and w_plane[w]:
            ux, uy, uz = w_normal[w, 0], w_normal[w, 1], w_normal[w, 2]
            height = ax * ux + ay * uy + az * uz - w_offset[w]
            nx, ny, nz = -ux, -uy, -uz
            bx, by, bz = ax - height * ux, ay - height * uy, az - height * uz
            rb = 0.0
        else:
            rb = radius[b] if w < 0 else w_radius[w]
            gx, gy, gz = bx - ax, by - ay, bz - az
            norm = math.sqrt(gx * gx + gy * gy + gz * gz)
            if norm > 0.0:
                nx, ny, nz = gx / norm, gy / norm, gz / norm
            else:
                nx, ny, nz = 0.0, 0.0, 0.0
        out[r, 0], out[r, 1], out[r, 2] = ax + ra * nx, ay + ra * ny, az + ra * nz
        out[r, 3], out[r, 4], out[r, 5] = bx - rb * nx, by - rb * ny, bz - rb * nz
        out[r, 6], out[r, 7], out[r, 8] = nx, ny, nz


def distance_gradients(frames, axes, prismatic, frame_of, ancestor, pa, pb, pairs, point_a,
                       point_b, normal, to_free, grads_out):
    """Write the pairs' distance gradients over the free joints, (K, n).

    ``distance_rates`` per joint frame, mapped to the free joints (mimic
    multipliers): CollisionModel.gradients' compiled path.

    Args:
        frames: (M, 12) joint frames after motion, base frame.
        axes: (M, 3) each joint's axis in its own frame.
        prismatic: (M,) bool.
        frame_of: (S,) int, each robot shape's joint frame (-1: base).
        ancestor: (M, M) bool, frame m's motion moves frame f.
        pa: (P,) int, each checked pair's first shape.
        pb: (P,) int, its second (a robot shape, or S + an obstacle).
        pairs: (K,) int, the pairs to judge.
        point_a: (K, 3) their nearest points on a, base frame, m.
        point_b: (K, 3) on b.
        normal: (K, 3) unit normals from a toward b.
        to_free: (M, n) each joint frame's rate per free joint (mimic multipliers).
        grads_out: (K, n) written: d(distance)/dq, m per rad.

    """
    count = pairs.shape[0]
    m_frames = frames.shape[0]
    rate = np.empty((count, m_frames))
    distance_rates(frames, axes, prismatic, frame_of, ancestor, pa[pairs], pb[pairs], point_a,
                   point_b, normal, rate)
    for k in range(count):
        for j in range(to_free.shape[1]):
            value = 0.0
            for m in range(m_frames):
                value += rate[k, m] * to_free[m, j]
            grads_out[k, j] = value


def gradients_and_dip(frames, axes, prismatic, frame_of, ancestor, pa, pb, pairs, point_a,
                      point_b, normal, to_free, v1, a_max, grads_out, dip_out):
    """Write the pairs' distance gradients (``distance_gradients``) and their braking dips.

    One call for what the guard needs at a configuration on a braking path.
    The arguments are distance_gradients', then:

    Args:
        frames: see distance_gradients.
        axes: see distance_gradients.
        prismatic: see distance_gradients.
        frame_of: see distance_gradients.
        ancestor: see distance_gradients.
        pa: see distance_gradients.
        pb: see distance_gradients.
        pairs: see distance_gradients.
        point_a: see distance_gradients.
        point_b: see distance_gradients.
        normal: see distance_gradients.
        to_free: see distance_gradients.
        v1: (n,) joint velocities where braking starts, rad/s.
        a_max: (n,) acceleration limits, rad/s^2 (inf: stops at once).
        grads_out: (K, n) written: d(distance)/dq, m per rad.
        dip_out: (K,) written: the lowest linearised change while braking, m (<= 0).

    """
    distance_gradients(frames, axes, prismatic, frame_of, ancestor, pa, pb, pairs, point_a,
                       point_b, normal, to_free, grads_out)
    braking_dip(grads_out, v1, a_max, dip_out)


def remember(q, floors, held, known_distance, known_at):
    """Keep each pair's bound at q where it is tighter than what was held there.

    The guard's memory (collision.guard.KnownBounds.keep).

    Args:
        q: (n,) the joints the bounds hold at, rad.
        floors: (P,) each pair's lower bound at q just computed, m.
        held: (P,) what the remembered bounds left at q, m (known_floors).
        known_distance: (P,) written where tighter: the bound, m.
        known_at: (P, n) written where tighter: q.

    """
    better = floors > held
    known_distance[:] = np.where(better, floors, known_distance)
    known_at[:] = np.where(np.expand_dims(better, 1), np.expand_dims(q, 0), known_at)
