# SPDX-License-Identifier: Apache-2.0

"""Collision-free IK solutions: the free one nearest the reference, or the pair that is hit.

A pose usually has many joint solutions: the analytic solvers' branches
(shoulder, elbow, wrist flips) and swivel angles, the Jacobian solver's
basins. The solver returns the one nearest the reference; when that one
brings a checked pair inside the collision margin, :class:`FreeSolutions`
looks for others. A closed form with ``solve_batch`` gives every branch at
BRANCH_SAMPLES values of its free parameter (the swivel angle, or q7 on an
offset wrist); they are checked nearest the reference first (Euclidean in
joint space), and the first free one is the answer. When none is (a narrow
free band between samples), or for another solver (the Jacobian one), the
margin is a constraint of its answer first: from the
answer, the arm's self-motion is followed (steps in the null space of the
tip's Jacobian, the pose kept to first order, each solved again from where it
ends), first the way that opens the pairs inside the margin, then the other
way, until the margin is kept (:meth:`FreeSolutions.along_self_motion`): a
redundant arm swings its elbow off an obstacle and stays in its own basin.
When that finds nothing, the solver is asked again from other starting joints
(the reference with one joint turned half a turn, then seeded random joints
within the limits), and the successful, free answer nearest the reference is
kept.
When none is free the solver's answer stays, marked ``in_collision`` with
the closest pair: the target is reachable, but in collision, and the guard
stops the arm at the margin on its way there.

The search runs once per pose (its outcome remembered while the pose and
the world stay: a held arm's ticks at the same target do not search again).
Its cost is bounded: a closed form's candidates are checked up to
MAX_CHECKS of them (a count, so the answer does not depend on the machine's
load: ~7 ms quiet on the 2-core test machine); the self-motion is followed
for REPAIR_MOVES steps each way within REPAIR_BUDGET_S, and the seeded
solves stop at ``budget_s`` of wall-clock time after it (the Jacobian solver
is bounded by time anyway). All fit in the command lead. Seeds come from one
fixed generator per search.
"""

import dataclasses
import inspect
import math
import time as _time
from typing import Callable, List, Optional, Tuple

from ik_node.core.collision.guard import CollisionGuard, slide
from ik_node.core.ik.base import IKResult, IKSolver
from ik_node.core.ik.closed_form.base import BRANCHES
from ik_node.core.ik.task import POSE, Task
import numpy as np
import numpy.typing as npt

FloatArray = npt.NDArray[np.float64]

# Values of a closed form's free parameter (the swivel angle, or q7) sampled
# per search; every branch at each is a candidate.
BRANCH_SAMPLES = 24
# Seeded random starting joints tried per search (solvers without branches),
# after the reference with each joint turned half a turn.
RANDOM_SEEDS = 12
# Candidates of a closed form checked per search, nearest the reference first.
MAX_CHECKS = 24
# Wall-clock time the seeded solves of a search may take, s (a solve started
# before runs to its end).
SEARCH_BUDGET_S = 0.01
# Steps of self-motion followed each way from a Jacobian answer inside the
# margin, each solved again from where it ends.
REPAIR_MOVES = 16
# A step turns no joint more than this, rad (the null space is linearised).
REPAIR_STEP = 0.2
# Wall-clock time the self-motion may be followed, s (the seeded solves'
# SEARCH_BUDGET_S starts after it).
REPAIR_BUDGET_S = 0.02
# The closest free pose (closest_free_pose): iterations, the largest joint step
# (rad), the clearance kept beyond the margin (m), how far beyond it pairs are
# linearised (m), halvings of a step, the step that ends it (rad), the
# joints' own weight in the tip's metric (m^2 per rad^2), and the metres a
# radian of the tip's rotation weighs (arrival.ROT_WEIGHT_M's value).
CLOSEST_ITERATIONS = 200
CLOSEST_MAX_STEP = 0.1
CLOSEST_CLEARANCE = 5e-4
CLOSEST_REACH = 0.05
CLOSEST_HALVINGS = 6
CLOSEST_STEP_TOL = 1e-6
CLOSEST_DAMPING = 1e-4
ROT_WEIGHT = 0.1


def closest_pair(guard: CollisionGuard, q: FloatArray) -> Optional[Tuple[str, str]]:
    """Return the checked pair (two names) closest inside the margin at q (n,), or None."""
    near = guard.model.distances(q, guard.margin)
    # The pairs whose bounding spheres are inside the margin; their exact
    # distances may not be (a pair 12 mm apart was reported in collision).
    if not np.any(near.distance < guard.margin):
        return None
    return guard.model.pair_names(int(near.pairs[int(np.argmin(near.distance))]))


class FreeSolutions:
    """Turns a solver's answer for a pose into the free one nearest the reference (module doc).

    Args:
        guard: the collision guard (its model and margin, read at each search).
        budget_s: wall-clock time of a search's seeded solves, s.

    """

    def __init__(self, guard: CollisionGuard, budget_s: float = SEARCH_BUDGET_S,
                 repair_budget_s: float = REPAIR_BUDGET_S):
        """Nothing searched yet."""
        self.guard = guard
        self.budget_s = float(budget_s)
        self.repair_budget_s = float(repair_budget_s)
        self.searches = 0   # searches run (an answer inside the margin)
        #: Called between candidates, steps and solves (a worker thread waits
        #: there while a tick runs, and abandons a question a newer one replaced).
        self.checkpoint: Callable[[], None] = _nothing
        self._last: Optional[Tuple[tuple, IKResult]] = None
        self._searched: Optional[Tuple[tuple, IKResult]] = None

    def prefer_free(self, solver: IKSolver, pose: FloatArray, reference: FloatArray,
                    pole: Optional[FloatArray], res: IKResult) -> IKResult:
        """Return ``res`` if it is free, else the free solution of pose nearest reference.

        Args:
            solver: the solver that gave ``res`` (asked again from other joints).
            pose: (4, 4) the pose solved, base frame.
            reference: (n,) joints the answer should be near.
            pole: the elbow pole point (3,) the solve used, or None.
            res: the solver's answer for pose from reference.

        Returns:
            A successful IKResult whose joints keep the margin, or ``res``
            (with ``in_collision`` naming the closest pair when it is
            successful but no free answer was found).

        """
        if not res.success:
            return res
        generation = self.guard.generation
        key = (pose.tobytes(), res.q.tobytes(), generation)
        if self._last is not None and self._last[0] == key:   # the same answer again
            return self._last[1]
        hit = closest_pair(self.guard, res.q)
        if hit is None:
            chosen = res
        elif self._searched is not None and self._searched[0] == (pose.tobytes(), generation):
            # This pose was searched (from other joints): its outcome holds.
            chosen = self._searched[1] if not self._searched[1].in_collision else \
                dataclasses.replace(res, in_collision=f'{hit[0]} with {hit[1]}')
        else:
            chosen = self._search(solver, pose, reference, pole, res, hit)
            self._searched = ((pose.tobytes(), generation), chosen)
        self._last = (key, chosen)
        return chosen

    def _search(self, solver: IKSolver, pose: FloatArray, reference: FloatArray,
                pole: Optional[FloatArray], res: IKResult, hit: Tuple[str, str]) -> IKResult:
        """Look for other solutions; return the free one nearest reference, else res marked."""
        self.searches += 1
        start = _time.perf_counter()
        best = None
        if _branch_parameter(solver) is not None:
            best = self._nearest_free(self._branches(solver, pose), reference)
        if best is None:   # (a closed form's samples may all miss a narrow free band)
            best = self.along_self_motion(solver, pose, res.q, pole, start + self.repair_budget_s)
        if best is None:
            best = self.restarted(solver, pose, reference, pole, _time.perf_counter())
        if best is None:
            return dataclasses.replace(res, in_collision=f'{hit[0]} with {hit[1]}')
        pos, rot = solver.task.error(pose, self.guard.model.chain.forward(best))
        return IKResult(best, True, pos, rot, res.iterations, res.restarts,
                        res.elapsed_s + _time.perf_counter() - start)

    def _branches(self, solver: IKSolver, pose: FloatArray) -> List[FloatArray]:
        """Return every valid branch at BRANCH_SAMPLES values of the solver's free parameter."""
        return branch_solutions(solver, pose)

    def _nearest_free(self, candidates: List[FloatArray],
                      reference: FloatArray) -> Optional[FloatArray]:
        """Return the free candidate nearest reference among the MAX_CHECKS nearest, or None."""
        order = sorted(range(len(candidates)),
                       key=lambda k: float(np.sum((candidates[k] - reference) ** 2)))
        for k in order[:MAX_CHECKS]:
            self.checkpoint()
            if closest_pair(self.guard, candidates[k]) is None:
                return candidates[k]
        return None

    def along_self_motion(self, solver: IKSolver, pose: FloatArray, q: FloatArray,
                          pole: Optional[FloatArray], deadline: float = math.inf
                          ) -> Optional[FloatArray]:
        """Return joints (n,) on q's self-motion that reach pose and keep the margin, or None.

        The first way: the null-space part of the gradients of the pairs
        inside the margin (each weighted by how far inside it is); then the
        opposite way. None for an arm without a null space, or when
        ``deadline`` (time.perf_counter(), s) passes first.
        """
        guard = self.guard
        if closest_pair(guard, q) is None:
            return q
        near = guard.model.distances(q, guard.margin)
        inside = near.distance < guard.margin
        grads = guard.model.gradients(q, near)[inside]
        way = _null_part(self._null_space(q, solver, pose),
                         grads.T @ (guard.margin - near.distance[inside]))
        if way is None:
            return None
        for sign in (1.0, -1.0):
            found = self._follow(solver, pose, q, sign * way, pole, deadline)
            if found is not None:
                return found
        return None

    def _follow(self, solver: IKSolver, pose: FloatArray, q: FloatArray, way: FloatArray,
                pole: Optional[FloatArray], deadline: float) -> Optional[FloatArray]:
        """Step along the self-motion from q, first along ``way`` (n,); return the first free q.

        Each step turns the joints by REPAIR_STEP along the way (largest
        joint), within the limits, and is solved again for pose; the way is
        then carried into the null space where the step ended.
        """
        chain = self.guard.model.chain
        for _ in range(REPAIR_MOVES):
            self.checkpoint()
            if _time.perf_counter() > deadline:
                return None
            seed = np.clip(q + REPAIR_STEP * way, chain.lower, chain.upper)
            again = solver.solve(pose, seed, pole=pole)
            if not again.success:
                return None
            q = again.q
            if closest_pair(self.guard, q) is None:
                return q
            carried = _null_part(self._null_space(q, solver, pose), way)
            if carried is None:
                return None
            way = carried
        return None

    def _null_space(self, q: FloatArray, solver: IKSolver, pose: FloatArray) -> FloatArray:
        """Return (n, n) the projector on the null space of the task's rows at q (n,).

        The rows of the solver's task toward ``pose`` (4, 4): the tip's
        Jacobian for the full pose.
        """
        chain = self.guard.model.chain
        tip, jac = chain.forward_and_jacobian(q)
        rows = solver.task.task_rows(jac, pose, tip)[0]
        return np.eye(len(q)) - np.linalg.pinv(rows) @ rows

    def restarted(self, solver: IKSolver, pose: FloatArray, reference: FloatArray,
                  pole: Optional[FloatArray], start: float) -> Optional[FloatArray]:
        """Solve from other starting joints; return the free answer nearest reference.

        The starts: the reference's half-turn flips, then seeded random joints;
        until ``budget_s`` after ``start`` (time.perf_counter(), s).
        """
        best, best_cost = None, np.inf
        for seed in self._seeds(reference):
            self.checkpoint()
            if _time.perf_counter() - start > self.budget_s:
                break
            alt = solver.solve(pose, seed, pole=pole)
            cost = float(np.sum((alt.q - reference) ** 2)) if alt.success else np.inf
            if cost < best_cost and closest_pair(self.guard, alt.q) is None:
                best, best_cost = alt.q, cost
        return best

    def _seeds(self, reference: FloatArray):
        """Yield (n,) starting joints: the reference's flips, then seeded random joints."""
        chain = self.guard.model.chain
        lower = np.where(np.isfinite(chain.lower), chain.lower, -np.pi)
        upper = np.where(np.isfinite(chain.upper), chain.upper, np.pi)
        for i in range(chain.n):
            flipped = reference.copy()
            flipped[i] += np.pi if reference[i] + np.pi <= upper[i] else -np.pi
            if lower[i] <= flipped[i] <= upper[i]:
                yield flipped
        rng = np.random.default_rng(0)
        for _ in range(RANDOM_SEEDS):
            yield rng.uniform(lower, upper)


def closest_free_pose(guard: CollisionGuard, start: FloatArray, aim: FloatArray,
                      checkpoint: Optional[Callable[[], None]] = None,
                      task: Task = POSE) -> FloatArray:
    """Return joints (n,) whose tip is closest to ``aim`` (4, 4) keeping the margin, from start.

    Closest for ``task`` (ik.task: its rows, radians weighing ROT_WEIGHT m).

    For a target reachable only inside the collision margin (issue 50: the
    arm should end at the closest free pose in task space, not wherever the
    local step stopped). Projected Gauss-Newton from ``start`` (n,), a free
    configuration (the arm's): each step is the damped step toward the pose
    (:func:`ik_node.core.ik.local.damped_step`), projected on the near pairs'
    linearised distances (at least the margin plus CLOSEST_CLEARANCE) and on
    the joint limits (a joint at its limit would stop every step) in the
    tip's metric J^T W J + CLOSEST_DAMPING I (CollisionGuard.slid_goal's), so
    the tip slides along the surface; a step that leaves the margin or does
    not lower the pose error is halved. Stops after CLOSEST_ITERATIONS or
    when the step is below CLOSEST_STEP_TOL. What it returns is free (start
    itself at worst) and connected to start by free steps.
    """
    from ik_node.core.ik.local import damped_step
    wait = _nothing if checkpoint is None else checkpoint
    model, chain = guard.model, guard.model.chain
    weight = task.row_weights(ROT_WEIGHT)
    need = guard.margin + CLOSEST_CLEARANCE
    q = np.clip(np.asarray(start, dtype=np.float64), chain.lower, chain.upper)

    def cost(x: FloatArray) -> float:
        r = task.counted(task.residual(aim, chain.forward(x))) * weight
        return float(r @ r)

    best = cost(q)
    for _ in range(CLOSEST_ITERATIONS):
        wait()
        pose, jac = chain.forward_and_jacobian(q)
        task_rows, error = task.task_rows(jac, aim, pose)
        step = damped_step(task_rows, error)
        largest = float(np.max(np.abs(step)))
        if largest > CLOSEST_MAX_STEP:
            step *= CLOSEST_MAX_STEP / largest
        # Rows: the near pairs' distances, and the joint limits (x within them).
        near = model.distances(q, need + CLOSEST_REACH)
        eye = np.eye(chain.n)
        rows = [eye, -eye]
        needs = [chain.lower - q, q - chain.upper]
        if near.pairs.size:
            rows.append(model.gradients(q, near))
            needs.append(need - near.distance)
        grads, floors = np.vstack(rows), np.concatenate(needs)
        finite = np.isfinite(floors)
        weighted = task_rows * weight[:, None]
        metric = weighted.T @ weighted + CLOSEST_DAMPING * eye
        lower = np.linalg.cholesky(metric).astype(np.float64)
        y = slide(model.kernels, lower.T @ step, np.linalg.solve(lower, grads[finite].T).T,
                  floors[finite])
        step = np.linalg.solve(lower.T, y).astype(np.float64)
        for _ in range(CLOSEST_HALVINGS):
            trial = np.clip(q + step, chain.lower, chain.upper)
            value = cost(trial)
            if value < best and model.distances(trial, guard.margin).lowest >= guard.margin:
                break
            step = 0.5 * step
        else:
            break
        q, best = trial, value
        if float(np.max(np.abs(step))) < CLOSEST_STEP_TOL:
            break
    return q


def branch_solutions(solver: IKSolver, pose: FloatArray) -> List[FloatArray]:
    """Return (n,) solutions of pose (4, 4): every valid branch at BRANCH_SAMPLES values.

    Of a closed form's free parameter (the swivel angle, or q7 within its
    limits); [] for a solver without one (``solve_batch``).
    """
    if _branch_parameter(solver) is None:
        return []
    chain = solver.chain
    if _branch_parameter(solver) == 'swivel':
        values = np.linspace(-np.pi, np.pi, BRANCH_SAMPLES, endpoint=False)
    else:   # q7, within its limits
        lo, hi = (float(x) if np.isfinite(x) else float(np.copysign(np.pi, x))
                  for x in (chain.lower[-1], chain.upper[-1]))
        values = np.linspace(lo, hi, BRANCH_SAMPLES)
    rows = len(values) * len(BRANCHES)
    q, valid = solver.solve_batch(   # type: ignore[attr-defined]
        np.broadcast_to(pose, (rows, 4, 4)), np.repeat(values, len(BRANCHES)),
        np.tile(BRANCHES, (len(values), 1)))
    return list(q[valid])


def _nothing() -> None:
    """Wait for nothing (the default checkpoint)."""


def _null_part(null: FloatArray, vector: FloatArray) -> Optional[FloatArray]:
    """Return ``null @ vector`` (n,) scaled to 1 on its largest joint, or None when ~0."""
    part = null @ vector
    largest = float(np.max(np.abs(part))) if part.size else 0.0
    if not np.isfinite(largest) or largest < 1e-9 * max(1.0, float(np.max(np.abs(vector)))):
        return None
    return part / largest


def _branch_parameter(solver: IKSolver) -> Optional[str]:
    """Return the closed form's free parameter ('swivel' or 'q7'), None without solve_batch."""
    solve_batch = getattr(solver, 'solve_batch', None)
    if solve_batch is None:
        return None
    names = list(inspect.signature(solve_batch).parameters)
    return names[1] if len(names) >= 2 and names[1] in ('swivel', 'q7') else None
