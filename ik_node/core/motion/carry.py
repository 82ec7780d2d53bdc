# SPDX-License-Identifier: Apache-2.0

"""A tracker for a new model of the arm that carries on from the old one's motion (no jump)."""

from ik_node.core.errors import ModelError
from ik_node.core.ik.base import IKSolver
from ik_node.core.model.chain import Chain
from ik_node.core.motion.tracker import MotionTracker
import numpy as np


def carried_over(old: MotionTracker, chain: Chain, solver: IKSolver, q0,
                 time: float) -> MotionTracker:
    """Return a tracker for a new model of the arm, continuing the old one's motion.

    With the same joint names the command carries on from the old state
    (positions and velocities: no jump); the new model's limits must contain
    the current positions. A model with other joints is another robot: its
    tracker starts at rest at q0 (n,), rad.

    Raises:
        ModelError: same joints, but the current positions are outside the
            new model's limits (refuse the model: following it would jump),
            a joint is faster than its new speed limit, or braking from here
            would end beyond a new position limit.

    """
    worker = old.goals.worker
    if chain.joint_names != old.joint_names:
        return MotionTracker(chain, solver, old.config, q0, time, backend=old.backend,
                             worker=worker)
    q = old.q
    if not chain.within_limits(q):
        raise ModelError(f'the current joint positions {np.round(q, 6).tolist()} are outside '
                         "the new model's limits: following it would jump")
    if np.any(np.abs(old.v) > chain.velocity):
        raise ModelError(f'the joints move at {np.round(old.v, 3).tolist()} rad/s, faster than '
                         f"the new model's speed limits {chain.velocity.tolist()}: send the "
                         'model again when the arm is slower or at rest')
    stop = q + old.v * np.abs(old.v) / (2.0 * old.stepper.a_max)   # where braking now ends
    if not chain.within_limits(np.where(old.v == 0.0, q, stop)):
        raise ModelError(f'the joints moving at {np.round(old.v, 3).tolist()} rad/s would '
                         f"stop at {np.round(stop, 3).tolist()}, beyond the new model's limits: "
                         'send the model again when the arm is slower or at rest')
    tracker = MotionTracker(chain, solver, old.config, q, old.time, velocity=old.v,
                            backend=old.backend, worker=worker)
    tracker.q0 = chain.check_q(q0, 'q0').copy()
    # A stop under way goes on at the limits it had.
    tracker.stepper.a_max = old.stepper.a_max.copy()
    tracker.stepper.use_accelerations(np.minimum(tracker.accelerations, old.stepper.a_cap),
                                      tracker.at_rest())
    tracker.stop_first = old.stop_first
    tracker.set_pole(old.pole)
    return tracker
