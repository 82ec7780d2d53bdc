# SPDX-License-Identifier: Apache-2.0

"""Closed-form IK of 7-DoF arms with an offset last axis (Franka Panda class): kernels.

One source for both backends, as :mod:`ik_node.core.kernels.base` (same
conventions). :class:`ik_node.core.ik.closed_form.offset_wrist.AnalyticOffsetWrist` holds the
model and chooses the free parameter and branches; these functions do the
geometry of one target at one value of q7.

Geometry (product of exponentials, world axes w_i at q = 0): axes 1-3 meet at
the shoulder S; axes 5 and 6 meet at the wrist point W0; S and W0 project
onto axis 4 at the same point E0 (the elbow bends in a plane, whatever its
offsets); axis 7 misses W0. With T(q) = e^[xi1 q1] ... e^[xi7 q7] M, fixing
q7 fixes e^[xi1 q1] ... e^[xi6 q6] = T_t M^-1 e^-[xi7 q7], hence the wrist
point W (joints 5, 6 leave W0 in place) and the rotation R_06 of the first
six joints. q4 follows from |W - S| (law of cosines, as on an SRS arm); the
elbow plane turns about S-W by the swivel angle psi, and the only condition
left is that axis 6 stays on its cone about axis 5:

    (Rot(u, psi) R_04(0) w5) . (R_06 w6) = w5 . w6,  u = (W - S) / |W - S|,

that is A cos(psi) + B sin(psi) = c - C: two roots, psi = phi +- acos(.).
Then q1-q3 split the shoulder rotation (two solutions), and q5, q6 the wrist
rotation R_04^T R_06 = Rot(w5, q5) Rot(w6, q6) (one). 2 elbow x 2 root x 2
shoulder = 8 branches per q7; the Panda's elbow limits leave one elbow sign.

The model ``m`` is the SRS kernels' tuple (their fields, AXES ... REACH_HIGH,
read as m[FIELD]; srs_kernels.elbow_part applies as it is) with the fields of
the constants below (POINT7_IN_TIP in the SRS wrist centre's slot, which
elbow_part does not read). A branch is (elbow, shoulder, root) signs, rows in
BRANCHES order (row 4 i_e + 2 i_s + i_r), as on the SRS arm.
"""

import math

from ik_node.core.kernels.base import add3, chain_frames, cross3, dot3, mat_mul, mat_mul_t, \
    mat_tvec, mat_vec, pose_error, rodrigues, rotation_of_rows, scale3, sub3, \
    translation_of_rows, unit3, vec3
from ik_node.core.kernels.srs import AXES, branch_row, elbow_part, ELBOW_PHASE, elbow_point, \
    into_limits, LOWER, NO_BRANCH_WITHIN_LIMITS, REACH_HIGH, REACH_LOW, SHOULDER, sp1, \
    spherical_within, swivel_basis, TIP_ROTATION_ZERO, UPPER, WITHIN_LIMITS, wrap_angle

# Below this |(A, B)| the cone condition does not depend on the swivel angle
# (u along the axis-5 direction's own cone axis): every psi or none.
FLAT_CONE = 1e-12
# Feasibility margin (margin_grid) of a branch with no solution at a q7: far
# below any limit margin (those are above -4 pi).
NO_ROOT_MARGIN = -1000.0
# A reach edge (reach_q7s) computes on either side of the reach by rounding:
# the searches sample this far (rad) to each side of it instead.
REACH_NUDGE = 1e-7
# Room for every reach sample: 2 extremes and 4 edges x 2 sides, 7 shifts each.
REACH_SAMPLES = 70
# Fields this model adds to the SRS model's (read as m[FIELD], as there); the
# SRS slot WRIST_IN_TIP holds a point on axis 7 here.
POINT7_IN_TIP = 4        # a point on axis 7, tip frame (3)
AXIS7_IN_TIP = 15        # axis 7's direction, tip frame (3)
WRIST_FROM_POINT7 = 16   # W0 minus that point, tip frame (3)
NORMAL_TO_AXIS6 = 17     # a unit vector normal to w6 (3)
AXIS5_DOT_AXIS6 = 18     # w5 . w6


def undo_joint7(target_r, target_p, q7, m):
    """Return the wrist point W (3) and target_r Rot(w7_tip, -q7) (9) for a given q7.

    The second is R_06 R_M: the target's rotation with joint 7 undone, what
    srs_kernels.elbow_part takes as its target rotation.
    """
    p7, w7, r7 = m[POINT7_IN_TIP], m[AXIS7_IN_TIP], m[WRIST_FROM_POINT7]
    undo = rodrigues(w7[0], w7[1], w7[2], -q7)
    wrist_in_tip = add3(vec3(p7), mat_vec(undo, vec3(r7)))
    return add3(target_p, mat_vec(target_r, wrist_in_tip)), mat_mul(target_r, undo)


def reach_q7s(rows, m, out):
    """q7 values (rad) where the wrist's distance from the shoulder is extreme or at the reach.

    The wrist point turns about axis 7 with q7, so its squared distance from
    the shoulder is a sinusoid, d^2 = h + 2 (c.e) cos q7 + 2 (c.f) sin q7:
    its maximum and minimum, and the roots of d = reach_high and d =
    reach_low, are closed forms. A band of q7 where the wrist is within
    reach can be much narrower than any grid (a target near full stretch):
    these values fall inside it or on its edges. Fills out (6): maximum,
    minimum, then the up to four roots (NaN where none).
    """
    target_r, target_p = rotation_of_rows(rows), translation_of_rows(rows)
    shoulder, p7, w7, r7 = m[SHOULDER], m[POINT7_IN_TIP], m[AXIS7_IN_TIP], m[WRIST_FROM_POINT7]
    reach_low, reach_high = m[REACH_LOW], m[REACH_HIGH]
    w, r = vec3(w7), vec3(r7)
    along = scale3(dot3(w, r), w)
    c = sub3(add3(target_p, mat_vec(target_r, add3(vec3(p7), along))), shoulder)
    e = mat_vec(target_r, sub3(r, along))
    f = scale3(-1.0, mat_vec(target_r, cross3(w, r)))
    ce, cf = dot3(c, e), dot3(c, f)
    h = dot3(c, c) + dot3(e, e)
    amplitude = 2.0 * math.hypot(ce, cf)
    phase = math.atan2(cf, ce)
    out[0] = phase
    out[1] = phase + math.pi
    for i in range(2):
        reach = reach_high if i == 0 else reach_low
        k = (reach * reach - h) / amplitude if amplitude > 0.0 else 2.0
        half = math.acos(k) if abs(k) <= 1.0 else math.nan
        out[2 + 2 * i] = phase + half
        out[3 + 2 * i] = phase - half


def reach_samples(rows, lo7, hi7, m, reach, out):
    """Fill out with the target's reach values (reach_q7s) as q7 samples in (lo7, hi7).

    Returns how many. The extremes as they are, each reach edge 1e-7 rad to
    either side of it (REACH_NUDGE: the edge itself computes on either side
    by rounding), all shifted by 2 pi k into the range. ``reach`` (6) is
    scratch; ``out`` (REACH_SAMPLES) gets the samples.
    """
    reach_q7s(rows, m, reach)
    count = 0
    for i in range(6):
        for side in range(-1, 2):
            if (i < 2) != (side == 0):
                continue
            for k in range(-3, 4):
                v = reach[i] + 2.0 * math.pi * k + side * REACH_NUDGE
                if lo7 < v < hi7:   # False for NaN (no edge)
                    out[count] = v
                    count += 1
    return count


def parameter_geometry(target_r, target_p, q7, m):
    """Return (u, d, d_clamped, rotation with joint 7 undone, z6) of a target at q7.

    u: unit shoulder->wrist direction; d its distance, d_clamped clamped to
    the reach; z6 = R_06 w6, axis 6 in the base frame.
    """
    axes, shoulder, tip_rotation0 = m[AXES], m[SHOULDER], m[TIP_ROTATION_ZERO]
    reach_low, reach_high = m[REACH_LOW], m[REACH_HIGH]
    wrist, undone = undo_joint7(target_r, target_p, q7, m)
    u, d = unit3(sub3(wrist, shoulder))
    d_clamped = min(max(d, reach_low), reach_high)
    z6 = mat_vec(mat_mul_t(undone, tip_rotation0), vec3(axes[5]))
    return u, d, d_clamped, undone, z6


def cone_roots(u, v, z6, c):
    """Solve (Rot(u, psi) v) . z6 = c for psi: return (phi, half width, k).

    The roots are phi +- half width; k = cos(half width) before clamping:
    |k| > 1 means no root (the half width is then 0 or pi, the closest psi).
    """
    uv = dot3(u, v)
    uz = dot3(u, z6)
    a = dot3(v, z6) - uv * uz
    b = dot3(cross3(u, v), z6)
    rho = math.hypot(a, b)
    if rho < FLAT_CONE:
        return 0.0, 0.0, 1.0 if abs(c - uv * uz) < FLAT_CONE else 2.0
    k = (c - uv * uz) / rho
    return math.atan2(b, a), math.acos(min(max(k, -1.0), 1.0)), k


def elbow_roots(elbow_sign, u, e1, d_clamped, undone, z6, m):
    """Return (phi, half width, k, q4) of the cone condition for one elbow sign.

    See cone_roots; q4 is that elbow sign's joint 4. e1: the swivel basis'
    first vector (psi = 0).
    """
    axes = m[AXES]
    q4, r03, _ = elbow_part(elbow_sign, d_clamped, u, e1, undone, m)
    w4, w5 = vec3(axes[3]), vec3(axes[4])
    v = mat_vec(mat_mul(r03, rodrigues(w4[0], w4[1], w4[2], q4)), w5)
    phi, half, k = cone_roots(u, v, z6, m[AXIS5_DOT_AXIS6])
    return phi, half, k, q4


def root_solution(elbow_sign, psi, u, e1, e2, d_clamped, undone, fallback5, m):
    """Return (q4, R_03, q5, q6) of one elbow sign at swivel psi (a root of the cone)."""
    axes = m[AXES]
    w5, w6, x6 = vec3(axes[4]), vec3(axes[5]), vec3(m[NORMAL_TO_AXIS6])
    radial = add3(scale3(math.cos(psi), e1), scale3(math.sin(psi), e2))
    q4, r03, r_wrist = elbow_part(elbow_sign, d_clamped, u, radial, undone, m)
    q5 = sp1(w5, w6, mat_vec(r_wrist, w6), fallback5)
    q6 = sp1(w6, x6, mat_tvec(rodrigues(w5[0], w5[1], w5[2], q5), mat_vec(r_wrist, x6)), 0.0)
    return q4, r03, q5, q6


def solve_one(target_r, target_p, q7, elbow_sign, shoulder_sign, root_sign, fallback1,
              fallback5, m):
    """Return (q 7-tuple, gap) of one branch at q7.

    gap = max(|d - d_clamped|, |k| - 1): <= 0 (to rounding) when the branch
    reaches the pose exactly (then q is its solution, before limits).
    """
    axes, lower, upper = m[AXES], m[LOWER], m[UPPER]
    u, d, d_clamped, undone, z6 = parameter_geometry(target_r, target_p, q7, m)
    e1, e2 = swivel_basis(u, vec3(axes[0]), vec3(axes[1]))
    phi, half, k, _ = elbow_roots(elbow_sign, u, e1, d_clamped, undone, z6, m)
    q4, r03, q5, q6 = root_solution(elbow_sign, phi + root_sign * half, u, e1, e2, d_clamped,
                                    undone, fallback5, m)
    q1, q2, q3 = spherical_within(vec3(axes[0]), vec3(axes[1]), vec3(axes[2]), r03,
                                  shoulder_sign, fallback1, lower, upper, 0)
    return into_limits((q1, q2, q3, q4, q5, q6, q7), lower, upper), \
        max(abs(d - d_clamped), abs(k) - 1.0)


def all_branches(target_r, target_p, q7, fallback1, fallback5, m, out, gaps, prune=False):
    """Fill out (8 rows of 7) with every branch at q7, in BRANCHES order.

    ``gaps`` (2) gets each elbow sign's gap (see solve_one; > 0: out of reach
    or the cone condition has no root, the pose is then the closest the
    swivel gives), elbow +1 first. With ``prune`` (for the searches, which
    only need to know which rows are feasible with no gap at all) an elbow
    sign with a gap or its q4 beyond a limit gets rows holding only q4 and q7
    (zeros else).
    """
    axes, lower, upper = m[AXES], m[LOWER], m[UPPER]
    u, d, d_clamped, undone, z6 = parameter_geometry(target_r, target_p, q7, m)
    e1, e2 = swivel_basis(u, vec3(axes[0]), vec3(axes[1]))
    w1, w2, w3 = vec3(axes[0]), vec3(axes[1]), vec3(axes[2])
    for ei in range(2):
        elbow_sign = 1.0 - 2.0 * ei
        phi, half, k, q4 = elbow_roots(elbow_sign, u, e1, d_clamped, undone, z6, m)
        gaps[ei] = max(abs(d - d_clamped), abs(k) - 1.0)
        if prune and (gaps[ei] > 0.0 or q4 < lower[3] or q4 > upper[3]):
            for row in range(4 * ei, 4 * ei + 4):
                out[row] = (0.0, 0.0, 0.0, q4, 0.0, 0.0, q7)
            continue
        for ri in range(2):
            q4, r03, q5, q6 = root_solution(elbow_sign, phi + (1.0 - 2.0 * ri) * half, u, e1,
                                            e2, d_clamped, undone, fallback5, m)
            for si in range(2):
                q1, q2, q3 = spherical_within(w1, w2, w3, r03, 1.0 - 2.0 * si, fallback1,
                                              lower, upper, 0)
                out[4 * ei + 2 * si + ri] = into_limits((q1, q2, q3, q4, q5, q6, q7), lower,
                                                        upper)


def solve_many(targets, q7, branches, fallback1, fallback5, m, out, gaps):
    """Fill out (N rows of 7) and gaps (N) for 4x4 targets (N), q7 (N), branches (N rows of 3)."""
    for i in range(len(q7)):
        t = targets[i]
        b = branches[i]
        q, gap = solve_one((t[0][0], t[0][1], t[0][2], t[1][0], t[1][1], t[1][2], t[2][0],
                            t[2][1], t[2][2]), (t[0][3], t[1][3], t[2][3]), q7[i], b[0], b[1],
                           b[2], fallback1[i], fallback5[i], m)
        out[i] = q
        gaps[i] = gap


def limit_margin(q, lower, upper):
    """Smallest distance (rad) of q (7) from a limit: > 0 inside, < 0 beyond one."""
    worst = math.inf
    for j in range(7):
        worst = min(worst, q[j] - lower[j], upper[j] - q[j])
    return worst


def branch_margin(q, gap, gap_tol, lower, upper):
    """Feasibility margin of a branch's solution q (7): see margin_grid."""
    return NO_ROOT_MARGIN - gap if gap > gap_tol else limit_margin(q, lower, upper)


def margins_of(every, gaps, gap_tol, lower, upper):
    """Return the 8 branches' feasibility margins (see margin_grid) from all_branches' outputs."""
    g0, g1 = gaps[0], gaps[1]
    return (branch_margin(every[0], g0, gap_tol, lower, upper),
            branch_margin(every[1], g0, gap_tol, lower, upper),
            branch_margin(every[2], g0, gap_tol, lower, upper),
            branch_margin(every[3], g0, gap_tol, lower, upper),
            branch_margin(every[4], g1, gap_tol, lower, upper),
            branch_margin(every[5], g1, gap_tol, lower, upper),
            branch_margin(every[6], g1, gap_tol, lower, upper),
            branch_margin(every[7], g1, gap_tol, lower, upper))


def margin_grid(rows, q7s, gap_tol, m, every, gaps, out):
    """Fill out (len(q7s) rows of 8) with each branch's feasibility margin at each q7.

    The margin is the limit margin (rad) of the branch's solution, or
    NO_ROOT_MARGIN minus the gap where the gap exceeds ``gap_tol`` (out of
    reach, or no root of the cone condition): >= 0 exactly when that branch
    is a solution within the limits. ``every`` (8 rows of 7) and ``gaps`` (2)
    are scratch.
    """
    target_r, target_p = rotation_of_rows(rows), translation_of_rows(rows)
    for g in range(len(q7s)):
        all_branches(target_r, target_p, q7s[g], 0.0, 0.0, m, every, gaps, True)
        out[g] = margins_of(every, gaps, gap_tol, m[LOWER], m[UPPER])


def branch_grid(rows, q7s, gap_tol, m, every, gaps, qs, margins):
    """Every branch's solution and margin at each q7 of ``q7s`` (K).

    Fills qs (8 K rows of 7: row 8 k + branch row) and margins (K rows of
    8, see margin_grid). ``every`` (8 rows of 7) and ``gaps`` (2) are scratch.
    """
    target_r, target_p = rotation_of_rows(rows), translation_of_rows(rows)
    for g in range(len(q7s)):
        all_branches(target_r, target_p, q7s[g], 0.0, 0.0, m, every, gaps)
        for row in range(8):
            qs[8 * g + row] = (every[row][0], every[row][1], every[row][2], every[row][3],
                               every[row][4], every[row][5], every[row][6])
        margins[g] = margins_of(every, gaps, gap_tol, m[LOWER], m[UPPER])


def root_edge(rows, elbow_sign, valid, invalid, gap_tol, steps, m):
    """Bisect ``steps`` times the q7 where an elbow sign's gap crosses ``gap_tol``.

    ``valid`` is a q7 where its gap is at most gap_tol (the branches of that
    elbow sign have solutions), ``invalid`` one where not; returns the last
    valid q7 found. At such an edge the two roots of the cone condition meet
    (a fold), or the wrist leaves the reach.
    """
    target_r, target_p = rotation_of_rows(rows), translation_of_rows(rows)
    return _valid_edge(target_r, target_p, valid, invalid, elbow_sign, 1.0, gap_tol, steps, m)


def margin_edge(rows, row, inside, outside, gap_tol, steps, m):
    """Bisect ``steps`` times the feasibility edge of branch ``row`` (see margin_grid).

    ``inside`` is a q7 where the branch is feasible, ``outside`` one where it
    is not; returns the last feasible q7 found. Only that branch is solved.
    """
    target_r, target_p = rotation_of_rows(rows), translation_of_rows(rows)
    for _ in range(steps):
        mid = 0.5 * (inside + outside)
        if row_margin(target_r, target_p, mid, row, gap_tol, m) >= 0.0:
            inside = mid
        else:
            outside = mid
    return inside


def row_margin(target_r, target_p, q7, row, gap_tol, m):
    """Feasibility margin (see margin_grid) of branch ``row`` alone at q7."""
    q, gap = solve_one(target_r, target_p, q7, 1.0 if row < 4 else -1.0,
                       1.0 if row % 4 < 2 else -1.0, 1.0 if row % 2 == 0 else -1.0, 0.0, 0.0,
                       m)
    return branch_margin(q, gap, gap_tol, m[LOWER], m[UPPER])


def _coarse_cost(q, q_ref, use_ref, q7, wanted):
    """Cost of a feasible solution q (7) at q7: joint distance to q_ref, or |q7 - wanted|."""
    if not use_ref:
        return abs(q7 - wanted)
    cost = 0.0
    for j in range(7):
        d = (q[j] - q_ref[j] + math.pi) % (2.0 * math.pi) - math.pi
        cost += d * d
    return cost


def _coarse_candidate(target_r, target_p, q7, q_ref, use_ref, wanted, gap_tol, m, every,
                      gaps, best_cost, best_q7, best_row):
    """Fold the branches at q7 into the best (cost, q7, row) so far (see coarse_move)."""
    lower, upper = m[LOWER], m[UPPER]
    all_branches(target_r, target_p, q7, 0.0, 0.0, m, every, gaps, True)
    for row in range(8):
        if branch_margin(every[row], gaps[row // 4], gap_tol, lower, upper) >= 0.0:
            cost = _coarse_cost(every[row], q_ref, use_ref, q7, wanted)
            if cost < best_cost:
                best_cost, best_q7, best_row = cost, q7, row
    return best_cost, best_q7, best_row


def coarse_move(rows, wanted, q_ref, use_ref, lo7, hi7, count, ring, gap_tol, steps, m, every,
                gaps, reach, special):
    """q7 (rad) to move to when no branch reaches the pose at ``wanted``; NaN if none found.

    ``count`` points evenly over [lo7, hi7] are searched outward from
    ``wanted`` ``ring`` steps at a time, each ring with the target's reach
    samples (reach_samples) as far from wanted; within the first ring with a
    feasible solution the one nearest q_ref in joint space wins (without
    ``use_ref``: the q7 nearest wanted); its branch is followed toward
    ``wanted`` to its feasibility edge (bisected ``steps`` times) when the next
    point that way is infeasible. ``every`` (8 rows of 7), ``gaps`` (2),
    ``reach`` (6) and ``special`` (REACH_SAMPLES) are scratch.
    """
    target_r, target_p = rotation_of_rows(rows), translation_of_rows(rows)
    spacing = (hi7 - lo7) / (count - 1)
    centre = int(round((min(max(wanted, lo7), hi7) - lo7) / spacing))
    specials = reach_samples(rows, lo7, hi7, m, reach, special)
    best_cost, best_q7, best_row = math.inf, math.nan, -1
    step = 0
    while step < count and best_row < 0:
        near, far = (step - 0.5) * spacing, (step + ring - 0.5) * spacing
        for i in range(specials):
            if near <= abs(special[i] - wanted) < far:
                best_cost, best_q7, best_row = _coarse_candidate(
                    target_r, target_p, special[i], q_ref, use_ref, wanted, gap_tol, m, every,
                    gaps, best_cost, best_q7, best_row)
        for d in range(step, step + ring):
            if d > 0 and centre - d >= 0:
                best_cost, best_q7, best_row = _coarse_candidate(
                    target_r, target_p, lo7 + (centre - d) * spacing, q_ref, use_ref, wanted,
                    gap_tol, m, every, gaps, best_cost, best_q7, best_row)
            if centre + d < count:
                best_cost, best_q7, best_row = _coarse_candidate(
                    target_r, target_p, lo7 + (centre + d) * spacing, q_ref, use_ref, wanted,
                    gap_tol, m, every, gaps, best_cost, best_q7, best_row)
        step += ring
    if best_row < 0:
        return math.nan
    toward = best_q7 - spacing if best_q7 > wanted else best_q7 + spacing
    if (toward - wanted) * (best_q7 - wanted) <= 0.0:
        toward = wanted
    if toward == best_q7 or row_margin(target_r, target_p, toward, best_row, gap_tol, m) >= 0.0:
        return best_q7
    return margin_edge(rows, best_row, best_q7, toward, gap_tol, steps, m)


def _toward(v, ref, lo, hi):
    """Shift the angle v by 2 pi k toward ref (within pi of it) while it stays in [lo, hi]."""
    while v - ref > math.pi and v - 2.0 * math.pi >= lo:
        v -= 2.0 * math.pi
    while ref - v > math.pi and v + 2.0 * math.pi <= hi:
        v += 2.0 * math.pi
    return v


def toward_reference(q, q_ref, lower, upper):
    """Return q (7) with each angle shifted by 2 pi k nearest q_ref within its limits.

    Matters for joints whose range is wider than 2 pi (continuous tracking).
    """
    return (_toward(q[0], q_ref[0], lower[0], upper[0]),
            _toward(q[1], q_ref[1], lower[1], upper[1]),
            _toward(q[2], q_ref[2], lower[2], upper[2]),
            _toward(q[3], q_ref[3], lower[3], upper[3]),
            _toward(q[4], q_ref[4], lower[4], upper[4]),
            _toward(q[5], q_ref[5], lower[5], upper[5]),
            _toward(q[6], q_ref[6], lower[6], upper[6]))


def solve_ordered(target_r, target_p, q7, branches, fallback1, fallback5, m, fk, q_ref,
                  use_ref, gap_tol, every, gaps, frames):
    """Solve every branch at q7 and pick one that reaches the pose within the limits.

    A branch qualifies when its gap (solve_one) is at most ``gap_tol`` and
    its solution is within the limits. Without ``use_ref`` the first of
    ``branches`` (rows of 3 signs) that qualifies wins; with it, the one
    nearest ``q_ref`` (7) in joint space. ``every`` (8 rows of 7), ``gaps``
    (2) and ``frames`` (7 rows of 12) are scratch.

    Returns:
        (q 7-tuple, status, position error m, orientation error rad, gap of
        its elbow sign). Status WITHIN_LIMITS, or NO_BRANCH_WITHIN_LIMITS
        (then q is the first branch's).

    """
    lower, upper = m[LOWER], m[UPPER]
    all_branches(target_r, target_p, q7, fallback1, fallback5, m, every, gaps)
    best, best_cost = -1, 0.0
    for i in range(len(branches)):
        row = branch_row(branches[i])
        cand = every[row]
        if use_ref:
            every[row] = toward_reference(cand, q_ref, lower, upper)
            cand = every[row]
        cost = 0.0
        for j in range(7):
            cost += (cand[j] - q_ref[j]) ** 2
        better = best < 0 or (use_ref and cost < best_cost)
        if better and gaps[row // 4] <= gap_tol and limit_margin(cand, lower, upper) >= 0.0:
            best, best_cost = row, cost
            if not use_ref:
                break
    status = WITHIN_LIMITS
    if best < 0:
        best, status = branch_row(branches[0]), NO_BRANCH_WITHIN_LIMITS
    chosen = every[best]
    q = (chosen[0], chosen[1], chosen[2], chosen[3], chosen[4], chosen[5], chosen[6])
    tip_r, tip_p = chain_frames(q, fk, frames)
    pos, ang = pose_error(target_r, target_p, tip_r, tip_p)
    return q, status, pos, ang, gaps[best // 4]


def solve_ordered_rows(rows, q7, branches, fallback1, fallback5, m, fk, q_ref, use_ref,
                       gap_tol, every, gaps, frames):
    """solve_ordered for a 4x4 target given as ``rows`` (one call from the solver)."""
    return solve_ordered(rotation_of_rows(rows), translation_of_rows(rows), q7, branches,
                         fallback1, fallback5, m, fk, q_ref, use_ref, gap_tol, every, gaps,
                         frames)


def swivel_and_branch(q, m, fk, frames):
    """Swivel angle psi and (elbow, shoulder, root) signs of configuration q (7).

    psi: the elbow point (where S projects onto axis 4) about S-W, measured
    as on the SRS arm (srs_kernels.swivel_basis). The root sign is the side
    of phi (cone_roots) psi is on; elbow and shoulder signs as on the SRS arm.
    """
    axes, shoulder, phase = m[AXES], m[SHOULDER], m[ELBOW_PHASE]
    tip_r, tip_p = chain_frames(q, fk, frames)
    elbow = elbow_point(frames, fk, shoulder)
    u, _, d_clamped, undone, z6 = parameter_geometry(tip_r, tip_p, q[6], m)
    e1, e2 = swivel_basis(u, vec3(axes[0]), vec3(axes[1]))
    v = sub3(elbow, shoulder)
    psi = math.atan2(dot3(v, e2), dot3(v, e1))
    e = 1.0 if wrap_angle(q[3] - phase) >= 0.0 else -1.0
    phi, _, _, _ = elbow_roots(e, u, e1, d_clamped, undone, z6, m)
    r = 1.0 if wrap_angle(psi - phi) >= 0.0 else -1.0
    w1, w2, w3 = vec3(axes[0]), vec3(axes[1]), vec3(axes[2])
    s = 1.0 if dot3(mat_vec(rodrigues(w2[0], w2[1], w2[2], q[1]), w3),
                    cross3(w1, w2)) >= 0.0 else -1.0
    return psi, e, s, r


def swivel_miss(target_r, target_p, q7, elbow_sign, root_sign, psi, pole, use_pole, m):
    """Signed miss (rad) of a branch's swivel at q7 from the wanted one, and its gap.

    The wanted swivel is ``psi``, or with ``use_pole`` the angle of the point
    ``pole`` (3) about S-W at this q7 (the elbow turned toward the pole).
    """
    axes, shoulder = m[AXES], m[SHOULDER]
    u, d, d_clamped, undone, z6 = parameter_geometry(target_r, target_p, q7, m)
    e1, e2 = swivel_basis(u, vec3(axes[0]), vec3(axes[1]))
    phi, half, k, _ = elbow_roots(elbow_sign, u, e1, d_clamped, undone, z6, m)
    wanted = psi
    if use_pole:
        v = sub3(pole, shoulder)
        wanted = math.atan2(dot3(v, e2), dot3(v, e1))
    return wrap_angle(phi + root_sign * half - wanted), max(abs(d - d_clamped), abs(k) - 1.0)


def _crossing(target_r, target_p, a, fa, b, fb, e, r, psi, pole, use_pole, steps, m):
    """q7 where the miss (swivel_miss) of pair (e, r) crosses zero in [a, b], or NaN.

    fa, fb are the misses at a and b; a crossing counts only when both are
    within pi / 2 of zero (not the wrap at +-pi). Bisected ``steps`` times.
    """
    if (fa <= 0.0) == (fb <= 0.0) or abs(fa) >= 0.5 * math.pi or abs(fb) >= 0.5 * math.pi:
        return math.nan
    for _ in range(steps):
        mid = 0.5 * (a + b)
        fm, _ = swivel_miss(target_r, target_p, mid, e, r, psi, pole, use_pole, m)
        if (fm <= 0.0) == (fa <= 0.0):
            a, fa = mid, fm
        else:
            b = mid
    return 0.5 * (a + b)


def _valid_edge(target_r, target_p, valid, invalid, e, r, gap_tol, steps, m):
    """Bisect between a q7 where pair (e, r) has a root (gap <= gap_tol) and one where not."""
    for _ in range(steps):
        mid = 0.5 * (valid + invalid)
        _, gap = swivel_miss(target_r, target_p, mid, e, r, 0.0, (0.0, 0.0, 0.0), False, m)
        if gap <= gap_tol:
            valid = mid
        else:
            invalid = mid
    return valid


def swivel_parameter(rows, psi, pole, use_pole, q7s, gap_tol, steps, m, out):
    """Values of q7 (rad) where a branch's swivel equals the wanted one (see swivel_miss).

    The miss of each (elbow, root) pair is sampled on the grid ``q7s`` and
    each sign change (not the wrap at +-pi) is bisected ``steps`` times. A
    pair has a swivel only where its gap is at most ``gap_tol``; where a
    grid cell crosses that edge (the two roots meet there: a fold of the
    swivel over q7, where the wanted swivel is often met) the edge is
    bisected first and the valid part searched. Fills out (rows of 3: q7,
    elbow sign, root sign), at most len(out) rows; returns how many.
    """
    target_r, target_p = rotation_of_rows(rows), translation_of_rows(rows)
    count = 0
    for ei in range(2):
        e = 1.0 - 2.0 * ei
        for ri in range(2):
            r = 1.0 - 2.0 * ri
            prev, prev_gap = swivel_miss(target_r, target_p, q7s[0], e, r, psi, pole,
                                         use_pole, m)
            for g in range(1, len(q7s)):
                a, b = q7s[g - 1], q7s[g]
                cur, cur_gap = swivel_miss(target_r, target_p, b, e, r, psi, pole, use_pole, m)
                valid_a, valid_b = prev_gap <= gap_tol, cur_gap <= gap_tol
                found = math.nan
                if valid_a and valid_b:
                    found = _crossing(target_r, target_p, a, prev, b, cur, e, r, psi, pole,
                                      use_pole, steps, m)
                elif valid_a or valid_b:
                    edge = _valid_edge(target_r, target_p, a if valid_a else b,
                                       b if valid_a else a, e, r, gap_tol, steps, m)
                    f_edge, _ = swivel_miss(target_r, target_p, edge, e, r, psi, pole,
                                            use_pole, m)
                    if valid_a:
                        found = _crossing(target_r, target_p, a, prev, edge, f_edge, e, r, psi,
                                          pole, use_pole, steps, m)
                    else:
                        found = _crossing(target_r, target_p, edge, f_edge, b, cur, e, r, psi,
                                          pole, use_pole, steps, m)
                    if math.isnan(found) and abs(f_edge) < 1e-9:
                        found = edge
                if not math.isnan(found) and count < len(out):
                    out[count] = (found, e, r)
                    count += 1
                prev, prev_gap = cur, cur_gap
    return count
