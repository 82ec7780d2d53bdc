# SPDX-License-Identifier: Apache-2.0

"""Closed-form IK of 7-DoF SRS arms (seed 001): the scalar kernels.

One source for both backends, as :mod:`ik_node.core.kernels.base` (same
conventions). :class:`ik_node.core.ik.closed_form.srs.AnalyticSRS` holds the model, reads it
from the chain, and searches swivel angles and branches; these functions do
the geometry of one target at one swivel angle.

The model ``m`` is the tuple (axes (7 rows of 3: unit world axes at q = 0),
shoulder S (3), a = E0 - S (3), b = W0 - E0 (3), wrist centre in the tip
frame (3), tip rotation at q = 0 (9), upper arm L1, forearm L2, A1, A2,
elbow phase (q4 solves A1 cos q4 + A2 sin q4 = k), lower (7), upper (7),
reach_low, reach_high (shoulder-wrist distances the elbow's limits allow)).
A branch is (elbow, shoulder, wrist) signs, each +1 or -1; the 8 branches in
BRANCHES order are (e, s, w) for e, s, w in (1, -1) (row 4 i_e + 2 i_s + i_w).
"""

import math

from ik_node.core.kernels.base import add3, chain_frames, cross3, DEGENERATE, dot3, mat_mul, \
    mat_mul_t, mat_tvec, mat_vec, pose_error, rodrigues, rotation_of_rows, scale3, sub3, \
    translation_of_rows, transpose, unit3, vec3

# Fields of the model tuple ``m`` (module docstring), read as m[FIELD]: numba
# takes these module-level ints as constants (static indexing of a tuple of
# mixed types, no cost per call).
AXES = 0                 # 7 rows of 3: unit world axes at q = 0
SHOULDER = 1             # S (3)
UPPER_ARM_ZERO = 2       # a = E0 - S (3)
FOREARM_ZERO = 3         # b = W0 - E0 (3)
WRIST_IN_TIP = 4         # wrist centre in the tip frame (3)
TIP_ROTATION_ZERO = 5    # tip rotation at q = 0 (9)
UPPER_ARM = 6            # L1, m
FOREARM = 7              # L2, m
ELBOW_A1 = 8             # A1 of A1 cos q4 + A2 sin q4 = k
ELBOW_A2 = 9             # A2
ELBOW_PHASE = 10         # the elbow phase, rad
LOWER = 11               # joint lower limits (7)
UPPER = 12               # joint upper limits (7)
REACH_LOW = 13           # shortest shoulder-wrist distance the elbow's limits allow, m
REACH_HIGH = 14          # longest, m

# Below this length a projection onto the plane normal to an axis has no
# direction (subproblem 1 then returns its fallback angle).
SP1_DEGENERATE = 1e-12
# Below this |w3 x w1| the helper vector for the third angle is built from w2.
HELPER_PARALLEL = 1e-6
# Below this |(a x c3) . w4| the elbow triangle is flat (stretched or folded):
# the orientation sign then comes from the branch.
FLAT_TRIANGLE = 1e-12
# An elbow angle this close beyond its limit (rounding) is put on the limit.
LIMIT_SNAP = 1e-9
# Below this |t2| (rad; where subproblem 1 falls back) the first and third
# angles of a spherical joint whose first and third axes are in line are one
# degree of freedom (spherical_within).
SINGULAR_SPLIT = 1e-12
# Any angle this close beyond its limit (rounding of a solution at the limit,
# rad) is put on the limit. Rounding reached 1.4e-14 rad (a Panda's q5 at
# its limit, from atan2 of products of rotations) where this was 1e-14 and
# the pose's own branch was dropped; the snap moves the tip <= 1e-10 m per m
# of reach, well inside the solvers' tolerances.
ROUNDING_SNAP = 1e-10
# Below this the swivel basis falls back to the second joint's axis (the
# shoulder-wrist line is along the first joint's axis).
ON_FIRST_AXIS = 1e-9
# Status of solve_ordered.
WITHIN_LIMITS = 0
NO_BRANCH_WITHIN_LIMITS = 2


def wrap_angle(angle):
    """Return the angle wrapped into [-pi, pi)."""
    return (angle + math.pi) % (2.0 * math.pi) - math.pi


def sp1(w, p, q, fallback):
    """Paden-Kahan subproblem 1: the angle t with Rot(w, t) p = q (projections normal to w).

    ``fallback`` where either projection has no direction (p or q on the axis).
    """
    pp = sub3(p, scale3(dot3(p, w), w))
    qq = sub3(q, scale3(dot3(q, w), w))
    if math.sqrt(dot3(pp, pp)) < SP1_DEGENERATE or math.sqrt(dot3(qq, qq)) < SP1_DEGENERATE:
        return fallback
    return math.atan2(dot3(cross3(pp, qq), w), dot3(pp, qq))


def spherical(w1, w2, w3, rotation, sign, fallback1):
    """Split rotation = Rot(w1, t1) Rot(w2, t2) Rot(w3, t3) into (t1, t2, t3).

    Subproblem 2 for (t1, t2) on the unit vector w3 (``sign`` picks the side
    of the (w1, w2) plane of the intermediate point z), then subproblem 1 for
    t3. z's out-of-plane part uses 1 - (q . w1)^2 = |q x w1|^2 (exact near
    q = w1) instead of the textbook alpha/beta form, whose rounding near the
    singular t2 = 0 grows to sqrt(eps) ~ 1.5e-8 rad.
    """
    p = w3
    q = mat_vec(rotation, w3)
    c12 = dot3(w1, w2)
    s12 = math.sqrt(max(1.0 - c12 * c12, 0.0))
    t = scale3(1.0 / s12, sub3(w2, scale3(c12, w1)))
    normal = scale3(1.0 / s12, cross3(w1, w2))
    a1 = dot3(q, w1)
    zt = (dot3(p, w2) - a1 * c12) / s12
    qw = cross3(q, w1)
    qx = math.sqrt(dot3(qw, qw))
    g2 = (qx - abs(zt)) * (qx + abs(zt))
    g = sign * math.sqrt(max(g2, 0.0))
    z = add3(add3(scale3(a1, w1), scale3(zt, t)), scale3(g, normal))
    t2 = sp1(w2, p, z, 0.0)
    t1 = sp1(w1, z, q, fallback1)
    helper = cross3(w3, w1)
    if math.sqrt(dot3(helper, helper)) <= HELPER_PARALLEL:
        helper = cross3(w3, w2)
    x = scale3(1.0 / math.sqrt(dot3(helper, helper)), helper)
    rest = mat_tvec(mat_mul(rodrigues(w1[0], w1[1], w1[2], t1),
                            rodrigues(w2[0], w2[1], w2[2], t2)), mat_vec(rotation, x))
    t3 = sp1(w3, x, rest, 0.0)
    return t1, t2, t3


def spherical_within(w1, w2, w3, rotation, sign, fallback1, lower, upper, first):
    """spherical, with the split of a singular middle joint moved toward the limits.

    At t2 = 0 with w3 = +-w1 only t1 +- t3 is fixed and spherical returns
    t1 = fallback1; when that leaves t3 beyond its limits (even shifted by
    2 pi), t3 goes to its nearest limit and t1 takes up the rest (the
    rotation is unchanged). ``lower`` / ``upper`` are the 7 limits, ``first``
    the index of t1 (0 for a shoulder, 4 for a wrist).
    """
    t1, t2, t3 = spherical(w1, w2, w3, rotation, sign, fallback1)
    c13 = dot3(w1, w3)
    if abs(t2) > SINGULAR_SPLIT or abs(abs(c13) - 1.0) > SINGULAR_SPLIT:
        return t1, t2, t3
    lo3, hi3 = lower[first + 2], upper[first + 2]
    t3 = _into_range(t3, lo3, hi3)
    t3_in = min(max(t3, lo3), hi3)
    return t1 + c13 * (t3 - t3_in), t2, t3_in


def frame_of(x, y):
    """Orthonormal frame (9-tuple) with columns x^, y^ (y made normal to x), x^ x y^."""
    xh, _ = unit3(x)
    yh, _ = unit3(sub3(y, scale3(dot3(y, xh), xh)))
    zh = cross3(xh, yh)
    return (xh[0], yh[0], zh[0], xh[1], yh[1], zh[1], xh[2], yh[2], zh[2])


def wrist_geometry(target_r, target_p, m):
    """Return (u, d, d_clamped) of a target: the wrist centre as seen from the shoulder.

    u is the unit shoulder->wrist-centre direction, d its distance, d_clamped
    that distance clamped to the reach (a target exactly at the shoulder has no
    direction: the first joint's axis is used).
    """
    axes, shoulder, wrist_in_tip = m[AXES], m[SHOULDER], m[WRIST_IN_TIP]
    reach_low, reach_high = m[REACH_LOW], m[REACH_HIGH]
    w_t = add3(target_p, mat_vec(target_r, wrist_in_tip))
    u, d = unit3(sub3(w_t, shoulder))
    d_clamped = min(max(d, reach_low), reach_high)
    if not d > DEGENERATE:
        u = vec3(axes[0])
    return u, d, d_clamped


def swivel_basis(u, w1, w2):
    """Return e1, e2 spanning the plane normal to u; psi = 0 along e1 (w1's side)."""
    e1, n1 = unit3(sub3(w1, scale3(dot3(u, w1), u)))
    if not n1 > ON_FIRST_AXIS:
        e1, _ = unit3(sub3(w2, scale3(dot3(u, w2), u)))
    return e1, cross3(u, e1)


def elbow_part(elbow_sign, d, u, radial, target_r, m):
    """Return q4, the shoulder rotation R_03 and the wrist rotation of one elbow sign.

    q4 by the law of cosines (A1 cos q4 + A2 sin q4 = k, two signs); R_03 maps
    the zero-configuration shoulder->wrist vector c3 and elbow axis w4 onto u
    and the elbow axis of the swivel plane, +-(radial x u), with the sign that
    keeps the triangle's orientation for this q4 (so the elbow lands on the
    +radial side). Mapping c3 itself onto u puts the wrist exactly on target
    also near a stretched elbow, where two separate acos would disagree by
    ~sqrt(eps).
    """
    axes, a, b, tip_rotation0 = m[AXES], m[UPPER_ARM_ZERO], m[FOREARM_ZERO], m[TIP_ROTATION_ZERO]
    upper_arm, forearm, a1, a2 = m[UPPER_ARM], m[FOREARM], m[ELBOW_A1], m[ELBOW_A2]
    phase, lower4, upper4 = m[ELBOW_PHASE], m[LOWER][3], m[UPPER][3]
    w4 = vec3(axes[3])
    k = 0.5 * (d * d - upper_arm ** 2 - forearm ** 2)
    rho = math.hypot(a1, a2)
    q4 = wrap_angle(phase + elbow_sign * math.acos(min(max(k / rho, -1.0), 1.0)))
    if lower4 - LIMIT_SNAP < q4 < lower4:
        q4 = lower4
    elif upper4 < q4 < upper4 + LIMIT_SNAP:
        q4 = upper4
    rot4 = rodrigues(w4[0], w4[1], w4[2], q4)
    c3 = add3(a, mat_vec(rot4, b))
    orient = dot3(cross3(a, c3), w4)
    sigma = elbow_sign
    if abs(orient) > FLAT_TRIANGLE:
        sigma = 1.0 if orient > 0.0 else -1.0
    axis4 = scale3(sigma, cross3(radial, u))
    r03 = mat_mul_t(frame_of(u, axis4), frame_of(c3, w4))
    r_wrist = mat_mul_t(mat_mul(transpose(mat_mul(r03, rot4)), target_r), tip_rotation0)
    return q4, r03, r_wrist


def _into_range(v, lo, hi):
    """Shift the angle v by 2 pi k into [lo, hi] where possible, else return it unchanged.

    An angle beyond a limit by at most ROUNDING_SNAP (a solution exactly at a
    limit, computed), before or after its shift by 2 pi, is put on the limit:
    a joint at its limit of pi + 0.61 rad is computed as its wrapped value
    near -pi + 0.61, and + 2 pi lands a few ulps beyond the limit.
    """
    if v < lo or v > hi:
        for moved in (v, v + 2.0 * math.pi, v - 2.0 * math.pi):
            if lo <= moved <= hi:
                return moved
            if lo - ROUNDING_SNAP <= moved < lo:
                return lo
            if hi < moved <= hi + ROUNDING_SNAP:
                return hi
    return v


def into_limits(q, lower, upper):
    """Shift each angle of the 7-tuple q by 2 pi k into its limits where possible."""
    return (_into_range(q[0], lower[0], upper[0]), _into_range(q[1], lower[1], upper[1]),
            _into_range(q[2], lower[2], upper[2]), _into_range(q[3], lower[3], upper[3]),
            _into_range(q[4], lower[4], upper[4]), _into_range(q[5], lower[5], upper[5]),
            _into_range(q[6], lower[6], upper[6]))


def _radial(psi, u, m):
    axes = m[AXES]
    e1, e2 = swivel_basis(u, vec3(axes[0]), vec3(axes[1]))
    return add3(scale3(math.cos(psi), e1), scale3(math.sin(psi), e2))


def all_branches(target_r, target_p, psi, fallback1, fallback5, m, out):
    """Fill out (8 rows of 7) with every branch at swivel angle psi, in BRANCHES order.

    The 2 elbow solutions, 4 shoulder and 4 wrist splits are shared among the
    8 branches instead of being computed 8 times. ``fallback1`` / ``fallback5``
    are q1 / q5 where the shoulder / wrist is singular (q2 = 0 / q6 = 0).
    """
    axes, lower, upper = m[AXES], m[LOWER], m[UPPER]
    u, _, d = wrist_geometry(target_r, target_p, m)
    radial = _radial(psi, u, m)
    w1, w2, w3 = vec3(axes[0]), vec3(axes[1]), vec3(axes[2])
    w5, w6, w7 = vec3(axes[4]), vec3(axes[5]), vec3(axes[6])
    for ei in range(2):
        q4, r03, r_wrist = elbow_part(1.0 - 2.0 * ei, d, u, radial, target_r, m)
        wrist_up = spherical_within(w5, w6, w7, r_wrist, 1.0, fallback5, lower, upper, 4)
        wrist_down = spherical_within(w5, w6, w7, r_wrist, -1.0, fallback5, lower, upper, 4)
        for si in range(2):
            q1, q2, q3 = spherical_within(w1, w2, w3, r03, 1.0 - 2.0 * si, fallback1, lower,
                                          upper, 0)
            for wi in range(2):
                q5, q6, q7 = wrist_up if wi == 0 else wrist_down
                out[4 * ei + 2 * si + wi] = into_limits((q1, q2, q3, q4, q5, q6, q7), lower,
                                                        upper)


def solve_one(target_r, target_p, psi, elbow_sign, shoulder_sign, wrist_sign, fallback1,
              fallback5, m):
    """Return the joints (7-tuple) of one target at swivel angle psi on one branch."""
    axes, lower, upper = m[AXES], m[LOWER], m[UPPER]
    u, _, d = wrist_geometry(target_r, target_p, m)
    q4, r03, r_wrist = elbow_part(elbow_sign, d, u, _radial(psi, u, m), target_r, m)
    q1, q2, q3 = spherical_within(vec3(axes[0]), vec3(axes[1]), vec3(axes[2]), r03,
                                  shoulder_sign, fallback1, lower, upper, 0)
    q5, q6, q7 = spherical_within(vec3(axes[4]), vec3(axes[5]), vec3(axes[6]), r_wrist,
                                  wrist_sign, fallback5, lower, upper, 4)
    return into_limits((q1, q2, q3, q4, q5, q6, q7), lower, upper)


def solve_many(targets, psi, branches, fallback1, fallback5, m, out):
    """Fill out (N rows of 7) for 4x4 targets (N), swivel angles (N), branches (N rows of 3)."""
    for i in range(len(psi)):
        t = targets[i]
        out[i] = solve_one((t[0][0], t[0][1], t[0][2], t[1][0], t[1][1], t[1][2], t[2][0],
                            t[2][1], t[2][2]), (t[0][3], t[1][3], t[2][3]), psi[i],
                           branches[i][0], branches[i][1], branches[i][2], fallback1[i],
                           fallback5[i], m)


def branch_row(branch):
    """Row of a branch (3 signs) in BRANCHES order."""
    return (0 if branch[0] > 0 else 4) + (0 if branch[1] > 0 else 2) + \
        (0 if branch[2] > 0 else 1)


def solve_ordered(target_r, target_p, psi, branches, fallback1, fallback5, m, fk, q_ref,
                  use_ref, every, frames):
    """Solve every branch at swivel psi and pick one within the limits.

    Without ``use_ref`` the first of ``branches`` (rows of 3 signs) within the
    limits wins; with it, the one within limits nearest ``q_ref`` (7) in joint
    space. ``every`` (8 rows of 7) and ``frames`` (7 rows of 12) are scratch.

    Returns:
        (q 7-tuple, status, index in branches, position error m, orientation
        error rad, distance, clamped distance). Status WITHIN_LIMITS, or
        NO_BRANCH_WITHIN_LIMITS (then q is the first branch's). Out of reach
        shows as distance != clamped distance.

    """
    lower, upper = m[LOWER], m[UPPER]
    _, d, d_clamped = wrist_geometry(target_r, target_p, m)
    all_branches(target_r, target_p, psi, fallback1, fallback5, m, every)
    best, best_i, best_cost = -1, 0, 0.0
    for i in range(len(branches)):
        row = branch_row(branches[i])
        cand = every[row]
        inside = True
        cost = 0.0
        for j in range(7):
            if cand[j] < lower[j] or cand[j] > upper[j]:
                inside = False
            cost += (cand[j] - q_ref[j]) ** 2
        if inside and (best < 0 or (use_ref and cost < best_cost)):
            best, best_i, best_cost = row, i, cost
            if not use_ref:
                break
    status = WITHIN_LIMITS
    if best < 0:
        best, best_i, status = branch_row(branches[0]), 0, NO_BRANCH_WITHIN_LIMITS
    chosen = every[best]
    q = (chosen[0], chosen[1], chosen[2], chosen[3], chosen[4], chosen[5], chosen[6])
    tip_r, tip_p = chain_frames(q, fk, frames)
    pos, ang = pose_error(target_r, target_p, tip_r, tip_p)
    return q, status, best_i, pos, ang, d, d_clamped


def solve_ordered_rows(rows, psi, branches, fallback1, fallback5, m, fk, q_ref, use_ref,
                       every, frames):
    """solve_ordered for a 4x4 target given as ``rows`` (one call from the solver)."""
    return solve_ordered(rotation_of_rows(rows), translation_of_rows(rows), psi, branches,
                         fallback1, fallback5, m, fk, q_ref, use_ref, every, frames)


def swivel_of_pose(tip_r, tip_p, elbow, m):
    """Swivel angle (rad, in (-pi, pi]) of an elbow point for a tip pose."""
    axes, shoulder = m[AXES], m[SHOULDER]
    u, _, _ = wrist_geometry(tip_r, tip_p, m)
    e1, e2 = swivel_basis(u, vec3(axes[0]), vec3(axes[1]))
    v = sub3(elbow, shoulder)
    return math.atan2(dot3(v, e2), dot3(v, e1))


def elbow_point(frames, fk, shoulder):
    """Where the shoulder point (3) projects onto axis 4, from chain_frames' ``frames``."""
    f4 = frames[3]
    axis4 = fk.axis[3]
    z4 = mat_vec(f4, (axis4[0], axis4[1], axis4[2]))
    o4 = (f4[9], f4[10], f4[11])
    return add3(o4, scale3(dot3(sub3(shoulder, o4), z4), z4))


def reference_swivel_branch(q, m, fk, frames):
    """Swivel angle and (elbow, shoulder, wrist) signs of configuration q (7).

    The elbow point is where the shoulder point projects onto axis 4 (joint
    4's frame origin on the iiwa, not on every SRS arm). The branch signs are
    the ones solve_one uses: the elbow's side of the phase, and of Rot(w2, q2)
    w3 (Rot(w6, q6) w7) along w1 x w2 (w5 x w6).
    """
    axes, shoulder, phase = m[AXES], m[SHOULDER], m[ELBOW_PHASE]
    tip_r, tip_p = chain_frames(q, fk, frames)
    psi = swivel_of_pose(tip_r, tip_p, elbow_point(frames, fk, shoulder), m)
    w1, w2, w3 = vec3(axes[0]), vec3(axes[1]), vec3(axes[2])
    w5, w6, w7 = vec3(axes[4]), vec3(axes[5]), vec3(axes[6])
    e = 1.0 if wrap_angle(q[3] - phase) >= 0.0 else -1.0
    s = 1.0 if dot3(mat_vec(rodrigues(w2[0], w2[1], w2[2], q[1]), w3),
                    cross3(w1, w2)) >= 0.0 else -1.0
    w = 1.0 if dot3(mat_vec(rodrigues(w6[0], w6[1], w6[2], q[5]), w7),
                    cross3(w5, w6)) >= 0.0 else -1.0
    return psi, e, s, w


def reach_gaps(targets, m, out):
    """Fill out (N) with d - d_clamped of 4x4 targets (N).

    0 within reach, > 0 beyond it, < 0 inside the fold the elbow's limits leave.
    """
    for i in range(len(out)):
        t = targets[i]
        _, d, d_clamped = wrist_geometry(
            (t[0][0], t[0][1], t[0][2], t[1][0], t[1][1], t[1][2], t[2][0], t[2][1], t[2][2]),
            (t[0][3], t[1][3], t[2][3]), m)
        out[i] = d - d_clamped
