# SPDX-License-Identifier: Apache-2.0
"""Arms, worlds and targets the ``ticks`` and ``arrival`` benchmarks share.

An :class:`Arm` is a description as the node loads it (the bundled arms at
their config's start pose; the corpus of others' descriptions at a seeded
pose inside their limits) with its collision model; :func:`scene` puts
seeded obstacles around it, clear of its start; :func:`free_targets` draws
targets whose configurations keep a clearance from everything.
"""

from dataclasses import dataclass
import gc
import math
from typing import List, Optional, Tuple

from ik_node.bench.collision import HOME, MARGIN, random_obstacles
from ik_node.bench.corpus import CORPUS, corpus_path
from ik_node.bench.ik import BUNDLED
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.collision.model import CollisionModel
from ik_node.core.ik.factory import make_solver, serving_solver
from ik_node.core.ik.task import default_task, Task
from ik_node.core.model.chain import Chain
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.core.warm import compile_kernels
from ik_node.description.urdf import bundled_urdf
import numpy as np

# The node's period at its default publish_rate, s.
PERIOD = 0.01
# Targets are drawn with their configuration this far from everything, m.
TARGET_CLEARANCE = 0.02


@dataclass
class Arm:
    """A description loaded as the node loads it.

    Attributes:
        name: the bundled arm's name, or 'file:base->tip' of the corpus.
        chain: its chain.
        model: its collision model (no bodies when its meshes cannot be read).
        q0: (n,) the start pose (a bundled config's initial_positions).

    """

    name: str
    chain: Chain
    model: CollisionModel
    q0: np.ndarray


def bundled(name: str) -> Arm:
    """Return a bundled arm at its config's start pose."""
    from ik_node.description.geometry import collision_model
    file, base, tip = BUNDLED[name]
    with open(bundled_urdf(file), encoding='utf-8') as handle:
        xml = handle.read()
    chain = Chain.from_urdf_string(xml, base, tip)
    q0 = np.array(HOME[name], dtype=np.float64)
    model, _ = collision_model(xml, chain, home=q0)
    return Arm(name, chain, model, q0)


def from_corpus(file: str, base: str, tip: str, seed: int = 0) -> Arm:
    """Return a description of the corpus at a seeded pose within its limits (away from them)."""
    from ik_node.description.geometry import collision_model
    with open(corpus_path(file), encoding='utf-8') as handle:
        xml = handle.read()
    chain = Chain.from_urdf_string(xml, base, tip)
    lo, hi = bounded(chain)
    q0 = np.random.default_rng(seed).uniform(lo + 0.3 * (hi - lo), hi - 0.3 * (hi - lo))
    model, _ = collision_model(xml, chain, home=q0)
    return Arm(f'{file}:{base}->{tip}', chain, model, q0)


def arms(names: List[str], corpus: bool) -> List[Arm]:
    """Return the bundled arms named, then (``corpus``) every chain of the corpus."""
    out = [bundled(name) for name in names]
    if corpus:
        out += [from_corpus(*entry) for entry in CORPUS]
    return out


def bounded(chain: Chain) -> Tuple[np.ndarray, np.ndarray]:
    """Return (lower, upper) with unbounded joints given one turn around zero."""
    return (np.where(np.isfinite(chain.lower), chain.lower, -math.pi),
            np.where(np.isfinite(chain.upper), chain.upper, math.pi))


def scene(arm: Arm, count: int, rng: np.random.Generator) -> dict:
    """Put ``count`` seeded obstacles around the arm, clear of its start; return them."""
    return random_obstacles(arm.model, arm.q0, rng, count) if count else \
        _no_obstacles(arm.model)


def _no_obstacles(model: CollisionModel) -> dict:
    model.set_obstacles({})
    return {}


def clear(model: CollisionModel, q: np.ndarray, clearance: float = TARGET_CLEARANCE) -> bool:
    """Return True when every checked pair is at least ``clearance`` apart at q (n,)."""
    return model.distances(q, clearance).lowest >= clearance


def free_target(arm: Arm, rng: np.random.Generator, spread: float = 1.0,
                near: Optional[np.ndarray] = None,
                tries: int = 200) -> Optional[Tuple[np.ndarray, np.ndarray]]:
    """Return (configuration (n,), its tip pose (4, 4)), free by TARGET_CLEARANCE, or None.

    Joints within ``spread`` rad of ``near`` (default the start), inside the limits.
    """
    lo, hi = bounded(arm.chain)
    centre = arm.q0 if near is None else near
    for _ in range(tries):
        q = np.clip(centre + rng.uniform(-spread, spread, arm.chain.n), lo, hi)
        if clear(arm.model, q):
            return q, arm.chain.forward(q)
    return None


def session(arm: Arm, worker=None, margin: float = MARGIN,
            guarded: bool = True, backend: str = 'auto',
            task: Optional[Task] = None) -> MotionSession:
    """Return the node's motion session on the arm (joint_states output, its default rate).

    ``task``: what of a target counts (default: the node's for the arm,
    ik.task.default_task).

    The kernels are loaded (compiled, from the cache) and the solver warmed
    up at the start pose, and what was built is kept out of the garbage
    collector's passes, as the node does before its first tick. ``backend``
    'numpy': the kernels' sources run by CPython (a node while its first
    compile runs, or without numba).
    """
    task = default_task(arm.chain.n) if task is None else task
    name = serving_solver('auto', task)
    if backend != 'numpy':
        compile_kernels(arm.chain, name, arm.q0, TrackerConfig())
    arm.model.set_backend(backend)
    solver = make_solver(arm.chain, name, backend=backend, task=task)
    solver.warm_up(arm.q0)
    tracker = MotionTracker(arm.chain, solver, TrackerConfig(), arm.q0, 0.0, worker=worker,
                            backend=backend)
    if guarded:
        tracker.guard = CollisionGuard(arm.model, margin)
    out = MotionSession(tracker, PERIOD, 2.0 * PERIOD, 500.0, own_robot=True)
    gc.collect()
    gc.freeze()
    return out
