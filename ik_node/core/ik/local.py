# SPDX-License-Identifier: Apache-2.0

"""Following a moving pose: a few singularity-robust damped least-squares steps.

A pose that moves a little per command (a sampled trajectory, an integrated
twist) is best followed by the least joint motion from where the joints are,
not by a fresh solve that may land on another branch. :func:`follow` takes a
few Gauss-Newton steps from the reference; near a singular configuration the
smallest singular value of the Jacobian falls below SIGMA_FLOOR and the step
is damped (Nakamura & Hanafusa's singularity-robust inverse, the damping
growing as the singular value shrinks), so the joints move a bounded amount
in the direction the arm cannot follow instead of spinning: the tip lags a
little there and catches up after. A step that does not lower the error is
shortened (halved, a few times) and otherwise not taken. Units: metres,
radians; poses 4x4 in the chain's base frame.
"""

from typing import Optional, Tuple

from ik_node.core.ik.task import POSE, Task
from ik_node.core.kernels import follow as follow_kernel
from ik_node.core.kernels.backend import Backend, NUMPY
from ik_node.core.model.chain import Chain
from ik_node.core.poses import pose_residual_of_matrices
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Below this smallest singular value (m or rad per rad) the step is damped,
# with damping rising to MAX_DAMPING at a singular value of 0.
SIGMA_FLOOR = 0.03
MAX_DAMPING = 0.1
# Converged (position, orientation): the Jacobian solver's default tolerances.
TOLERANCE = (1e-6, 1e-6)
# Step lengths tried per iteration: 1, 1/2, ..., 1/2^(BACKTRACKS - 1).
BACKTRACKS = 4


def damped_step(jacobian: FloatArray, residual: FloatArray) -> FloatArray:
    """Joint step (n,) toward ``residual`` (6,) with the singularity-robust inverse of J (6, n).

    ``dq = sum_i s_i / (s_i^2 + l^2) v_i u_i^T e`` over the singular values
    s_i, with ``l^2 = (1 - (s_min / SIGMA_FLOOR)^2) MAX_DAMPING^2`` when
    s_min < SIGMA_FLOOR, else 0 (the plain pseudo-inverse): the follow
    kernel's step (kernels.follow.damped_step), run by CPython.
    """
    return follow_kernel.damped_step(np.ascontiguousarray(jacobian, dtype=np.float64),
                                     np.ascontiguousarray(residual, dtype=np.float64),
                                     SIGMA_FLOOR, MAX_DAMPING)


def follow(chain: Chain, reference: FloatArray, target: FloatArray,
           iterations: int = 3, kernels: Optional[Backend] = None, task: Task = POSE
           ) -> Tuple[FloatArray, float, bool]:
    """Move joints from ``reference`` (n,) toward the tip pose ``target`` (4x4), a little.

    ``kernels``: the Backend whose follow kernel runs (kernels.follow: the
    numpy backend's under CPython, numba's compiled); None: the numpy backend.
    ``task``: what of the target counts (ik.task; an axis' position first).

    Returns:
        (q (n,) within the limits, the fraction of the reference's squared
        error left (0 converged or 1 no progress), converged) after at most
        ``iterations`` damped steps; each step (or a shortened one) is taken
        only if it lowers the error (so the result is never farther than the
        reference).

    """
    backend = NUMPY if kernels is None else kernels
    q, start, errors, converged = backend.follow.follow(
        backend.fk(chain), chain.lower, chain.upper,
        np.ascontiguousarray(target, dtype=np.float64),
        np.ascontiguousarray(reference, dtype=np.float64), task.code, task.tool_axis,
        iterations, TOLERANCE[0], TOLERANCE[1], SIGMA_FLOOR, MAX_DAMPING, BACKTRACKS,
        backend.rows(chain.movable, 12), backend.rows(chain.n, 6))
    before = task.cost(*start)
    left = 0.0 if converged or before == 0.0 else task.cost(*errors) / before
    return q, left, bool(converged)


def polish(chain: Chain, start: FloatArray, target: FloatArray, tolerance: float,
           iterations: int) -> Tuple[FloatArray, bool]:
    """Newton steps on the chain from a nearby solution ``start`` (n,) to ``tolerance``.

    For a solution of a slightly different model (a near-SRS arm's nearest
    exact SRS model): Gauss-Newton with the pseudo-inverse (the least joint
    change, so the solution keeps its branch and swivel), each step shortened
    until it lowers the error (:func:`_descend`), joints at a limit whose step
    points outward held there (their columns dropped: the others make up for
    them). Returns (q within the limits, converged to ``tolerance`` m and rad).
    """
    q, _, _, converged = _iterate(chain, start, target,
                                  lambda jac, r, q: _step_within_limits(chain, jac, r, q),
                                  (tolerance, tolerance), iterations)
    return q, converged


def _iterate(chain: Chain, start: FloatArray, target: FloatArray, step_of,
             tolerance: Tuple[float, float], iterations: int):
    """Take at most ``iterations`` descending steps ``step_of(jac, r, q)`` from ``start`` (n,).

    Each step (or a shortened one, :func:`_descend`) is taken only if it
    lowers the error; stops when within ``tolerance`` (m, rad) or stuck.

    Returns:
        (q (n,) within the limits, errors at the start, errors at q, converged).

    """
    q = np.clip(np.array(start, dtype=np.float64), chain.lower, chain.upper)
    pose, jac = chain.forward_and_jacobian(q)
    r = pose_residual_of_matrices(target, pose)
    errors = first = _errors(r)
    for _ in range(iterations):
        if errors[0] <= tolerance[0] and errors[1] <= tolerance[1]:
            break
        taken = _descend(chain, target, q, step_of(jac, r, q), errors)
        if taken is None:
            break
        q, jac, r, errors = taken
    return q, first, errors, errors[0] <= tolerance[0] and errors[1] <= tolerance[1]


def _step_within_limits(chain: Chain, jac: FloatArray, r: FloatArray,
                        q: FloatArray) -> FloatArray:
    """Least-squares joint step (n,) for residual r (6,), holding joints pushed past a limit."""
    free = np.ones(chain.n, dtype=bool)
    step = np.zeros(chain.n)
    for _ in range(chain.n):
        step[:] = 0.0
        step[free] = np.linalg.lstsq(jac[:, free], r, rcond=None)[0]
        out = ((q + step < chain.lower) | (q + step > chain.upper)) & free
        at_limit = out & ((q <= chain.lower) | (q >= chain.upper))
        if not at_limit.any():
            return step
        free &= ~at_limit
        if not free.any():
            break
    return step


def _descend(chain: Chain, target: FloatArray, q: FloatArray, step: FloatArray,
             errors: Tuple[float, float]):
    """Take ``step`` (n,), or its half, quarter, ..., the first that lowers the error.

    Far from the pose (an arm that lags) the full Gauss-Newton step can
    overshoot; a shorter one along it still descends. Returns (q, Jacobian,
    residual, errors) after the step, or None when none of BACKTRACKS does.
    """
    cost = errors[0] ** 2 + errors[1] ** 2
    for _ in range(BACKTRACKS):
        q_new = np.clip(q + step, chain.lower, chain.upper)
        pose_new, jac_new = chain.forward_and_jacobian(q_new)
        r_new = pose_residual_of_matrices(target, pose_new)
        errors_new = _errors(r_new)
        if errors_new[0] ** 2 + errors_new[1] ** 2 < cost:
            return q_new, jac_new, r_new, errors_new
        step = 0.5 * step
    return None


def _errors(residual: FloatArray) -> Tuple[float, float]:
    return float(np.linalg.norm(residual[:3])), float(np.linalg.norm(residual[3:]))
