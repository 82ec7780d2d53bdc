# SPDX-License-Identifier: Apache-2.0

"""The choice of IK solver for a chain, by name (the node's ``solver`` parameter).

Every solver implements :class:`ik_node.core.ik.base.IKSolver`; the motion
tracker and the node call only that interface.
"""

from typing import Optional

from ik_node.core.errors import InvalidInputError, ModelError
from ik_node.core.ik.base import IKSolver
from ik_node.core.ik.closed_form.offset_wrist import AnalyticOffsetWrist
from ik_node.core.ik.closed_form.srs import AnalyticSRS
from ik_node.core.ik.jacobian import JacobianIK
from ik_node.core.ik.task import POSE, Task
from ik_node.core.model.chain import Chain

SOLVER_NAMES = ('auto', 'analytic', 'jacobian')


def make_solver(chain: Chain, name: str = 'auto', budget_s: Optional[float] = None,
                backend: str = 'auto', task: Task = POSE) -> IKSolver:
    """Build the solver ``name`` for ``chain``.

    Args:
        chain: the chain.
        name: 'analytic' (a closed form: a 7-DoF SRS, offset-wrist or near-SRS
            arm; ModelError otherwise), 'jacobian' (any chain) or 'auto'
            (analytic when the chain has one, else jacobian, the reasons in
            its ``model_note``).
        budget_s: the Jacobian solver's budget per solve, seconds (None: its
            backend's default).
        backend: 'auto', 'numpy' or 'numba'.
        task: what of a target counts (ik.task). The closed forms solve the
            full pose; another task is the Jacobian solver's ('auto').

    Raises:
        InvalidInputError: an unknown name.
        ModelError: 'analytic' for a chain with no closed form (the reasons
            say why), or for a task other than the full pose.

    """
    if name not in SOLVER_NAMES:
        raise InvalidInputError(f"solver: expected one of {', '.join(SOLVER_NAMES)}, received "
                                f'{name!r}')
    why = ''
    if not task.full_pose and name == 'analytic':
        raise ModelError(f'the closed forms solve the full pose, not the task {task.name!r}: '
                         "use solver 'jacobian' or 'auto'")
    name = serving_solver(name, task)
    if name in ('auto', 'analytic'):
        try:
            return analytic_solver(chain, backend)
        except ModelError as exc:
            if name == 'analytic':
                raise
            why = str(exc)
    solver = JacobianIK(chain, timeout_s=budget_s, backend=backend, task=task)
    if why:
        solver.model_note = f'not solved in closed form: {why}'
    return solver


def serving_solver(name: str, task: Task) -> str:
    """Return the solver name that serves ``task`` when ``name`` is asked.

    The closed forms solve the full pose: any other task is the Jacobian
    solver's ('jacobian'); a full pose keeps ``name``.
    """
    return name if task.full_pose else 'jacobian'


def analytic_solver(chain: Chain, backend: str = 'auto') -> IKSolver:
    """Return the closed-form solver of ``chain``: exact SRS, offset-wrist, then near-SRS.

    An exact closed form goes before the near-SRS model (which polishes every
    solution on the chain).

    Raises:
        ModelError: none applies; the message gives each class's reason.

    """
    builders = (lambda: AnalyticSRS.from_chain(chain, backend=backend, near_bound=0.0),
                lambda: AnalyticOffsetWrist.from_chain(chain, backend=backend),
                lambda: AnalyticSRS.from_chain(chain, backend=backend))
    reasons = []
    for build in builders:
        try:
            return build()
        except ModelError as exc:
            reasons.append(str(exc))
    # The near-SRS reason repeats the exact one and adds the deviation.
    raise ModelError(f'{reasons[2]}; {reasons[1]}')
