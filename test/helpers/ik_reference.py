# SPDX-License-Identifier: Apache-2.0
"""Numpy references of the IK kernels, written apart from them: the tests' oracles.

:class:`ReferenceDescent` is one Levenberg-Marquardt attempt of JacobianIK
(kernels/lm.py) written with numpy's matrix calls (LU solves, boolean
masks), and :func:`reference_follow` the local steps toward a moving pose
(kernels/follow.py) with numpy's SVD. Both were the package's numpy
backends until the kernels became one source run by both backends
(issue 51); the tests hold the kernels, interpreted and compiled, to them.
Joints in rad (m), poses 4x4 in the chain's base frame.
"""

from ik_node.core.kernels import base as kernels
from ik_node.core.kernels.lm_constants import BIAS_FULL_ABOVE, DAMPING_DOWN, DAMPING_MAX, \
    DAMPING_MIN, DAMPING_START, DAMPING_UP, STALL_FRACTION, STALL_WINDOW
from ik_node.core.poses import pose_residual_of_matrices, split_pose
import numpy as np


def inverse_right_jacobian(phi):
    """Return the (3, 3) inverse right Jacobian of SO(3) at rotation vector phi (3,)."""
    return np.array(kernels.inverse_right_jacobian(phi)).reshape(3, 3)


class ReferenceDescent:
    """One LM attempt of a JacobianIK's settings, in numpy (module docstring)."""

    def __init__(self, solver):
        """Take the goal rows, weights, gain, step cap, iterations and tolerances of ``solver``."""
        self.chain = solver.chain
        self.rows = {'pose': slice(0, 6), 'position': slice(0, 3),
                     'orientation': slice(3, 6)}[solver.goal]
        self.w = solver._w6[self.rows]
        self.use_position = solver.goal != 'orientation'
        self.use_orientation = solver.goal != 'position'
        self.gain = solver.nullspace_gain
        self.max_step = solver.max_step
        self.max_iterations = solver.max_iterations
        self.tolerances = (solver.position_tolerance, solver.orientation_tolerance)

    def descend(self, target, q0, q_ref):
        """Return (q, converged, cost, iterations, residual (6,)) of one attempt from q0."""
        chain = self.chain
        target_r, target_p = split_pose(target)
        q = np.clip(q0, chain.lower, chain.upper)
        frames, tip_p, r = self.evaluate(target_r, target_p, q)
        cost = self.cost(r)
        damping = DAMPING_START
        history = [cost]
        for it in range(self.max_iterations):
            if self.converged(r):
                return q, True, cost, it, r
            a = self.task_matrix(chain.jacobian_of_frames(frames, tip_p), r)
            rhs = self.weighted(r)
            bias = self.gain > 0.0
            while True:
                dq = self.step(a, rhs, q, q_ref if bias else None, damping)
                q_new = np.clip(q + dq, chain.lower, chain.upper)
                frames_new, tip_p_new, r_new = self.evaluate(target_r, target_p, q_new)
                cost_new = self.cost(r_new)
                if cost_new < cost:
                    damping = max(damping * DAMPING_DOWN, DAMPING_MIN)
                    break
                bias = False
                damping *= DAMPING_UP
                if damping > DAMPING_MAX:
                    return q, self.converged(r), cost, it + 1, r
            q, frames, tip_p, r, cost = q_new, frames_new, tip_p_new, r_new, cost_new
            history.append(cost)
            if len(history) > STALL_WINDOW and \
                    cost > (1.0 - STALL_FRACTION) * history[-1 - STALL_WINDOW]:
                return q, self.converged(r), cost, it + 1, r
        return q, self.converged(r), cost, self.max_iterations, r

    def evaluate(self, target_r, target_p, q):
        """Return (frames, tip position, residual (6,)) at q."""
        frames, tip_r, tip_p = self.chain.frames(q.tolist())
        return frames, tip_p, np.array(kernels.pose_residual(target_r, target_p, tip_r, tip_p))

    def weighted(self, r):
        """Return the goal rows of r, weighted."""
        return self.w * r[self.rows]

    def cost(self, r):
        """Return the weighted squared residual."""
        wr = self.weighted(r)
        return float(wr @ wr)

    def converged(self, r):
        """Return True within the tolerances."""
        pos, rot = self.tolerances
        return not (self.use_position and np.linalg.norm(r[:3]) > pos or
                    self.use_orientation and np.linalg.norm(r[3:]) > rot)

    def task_matrix(self, jac, r):
        """Return A = [J_v; Jr^-1(phi) J_w], the goal rows, weighted."""
        a = np.vstack([jac[:3], inverse_right_jacobian(r[3:]) @ jac[3:]])[self.rows]
        return a * self.w[:, None]

    def step(self, a, rhs, q, q_ref, damping):
        """Return the damped step toward q_ref (None: no bias), joint limits as an active set."""
        chain = self.chain
        room_lo, room_hi = chain.lower - q, chain.upper - q
        if q_ref is None:
            z = np.zeros_like(q)
            dq = dls(a, rhs, damping)
        else:
            fade = min(1.0, float(np.linalg.norm(rhs)) / BIAS_FULL_ABOVE)
            z = np.clip(self.gain * fade * (q_ref - q), room_lo, room_hi)
            dq = z + dls(a, rhs - a @ z, damping)
        over = (dq < room_lo) | (dq > room_hi)
        if over.any():
            free = ~over
            dq = np.clip(dq, room_lo, room_hi)
            for _ in range(dq.shape[0]):
                if not free.any():
                    break
                resid = rhs - a[:, ~free] @ dq[~free] - a[:, free] @ z[free]
                dq_f = z[free] + dls(a[:, free], resid, damping)
                lo, hi = room_lo[free], room_hi[free]
                crossed = (dq_f < lo) | (dq_f > hi)
                idx = np.flatnonzero(free)
                dq[idx] = np.clip(dq_f, lo, hi)
                if not crossed.any():
                    break
                free[idx[crossed]] = False
        biggest = float(np.max(np.abs(dq)))
        if biggest > self.max_step:
            dq = dq * (self.max_step / biggest)
        return dq


def dls(a, resid, damping):
    """Return argmin |resid - a x|^2 + damping^2 |x|^2 (minimum norm), by LU solves."""
    m, k = a.shape
    if k >= m:
        return a.T @ np.linalg.solve(a @ a.T + damping ** 2 * np.eye(m), resid)
    return np.linalg.solve(a.T @ a + damping ** 2 * np.eye(k), a.T @ resid)


def damped_step(jac, r, sigma_floor, max_damping):
    """Return the singularity-robust step (n,): the SVD's damped inverse of jac (6, n) on r."""
    u, s, vt = np.linalg.svd(jac, full_matrices=False)
    damping2 = 0.0 if s[-1] >= sigma_floor else \
        (1.0 - (s[-1] / sigma_floor) ** 2) * max_damping ** 2
    return vt.T @ ((s / (s * s + damping2)) * (u.T @ r))


def reference_follow(chain, reference, target, iterations, tolerance, sigma_floor, max_damping,
                     backtracks):
    """Return (q, errors at the start, errors at q, converged) of the local steps (numpy)."""
    def errors(r):
        return float(np.linalg.norm(r[:3])), float(np.linalg.norm(r[3:]))

    q = np.clip(np.array(reference, dtype=np.float64), chain.lower, chain.upper)
    pose, jac = chain.forward_and_jacobian(q)
    r = pose_residual_of_matrices(target, pose)
    now = first = errors(r)
    for _ in range(iterations):
        if now[0] <= tolerance[0] and now[1] <= tolerance[1]:
            break
        dq = damped_step(jac, r, sigma_floor, max_damping)
        cost = now[0] ** 2 + now[1] ** 2
        for _ in range(backtracks):
            q_new = np.clip(q + dq, chain.lower, chain.upper)
            pose_new, jac_new = chain.forward_and_jacobian(q_new)
            r_new = pose_residual_of_matrices(target, pose_new)
            e_new = errors(r_new)
            if e_new[0] ** 2 + e_new[1] ** 2 < cost:
                q, jac, r, now = q_new, jac_new, r_new, e_new
                break
            dq = 0.5 * dq
        else:
            break
    return q, first, now, now[0] <= tolerance[0] and now[1] <= tolerance[1]
