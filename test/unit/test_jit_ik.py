# SPDX-License-Identifier: Apache-2.0

"""The IK kernels, interpreted and compiled, against each other and the numpy reference.

Every kernel (ik_node.core.kernels: the forward kinematics, Jacobian,
residual, the Levenberg-Marquardt descent, ...) is one source, run by
CPython for the numpy backend and compiled by numba: the compiled results
must equal the interpreted ones. The descent's task rows, its damped step
with the active set and its whole attempts are also held to the numpy
reference written apart (test/helpers/ik_reference.py).
"""

import ast
from pathlib import Path
import sys
import types

from hypothesis import given
from hypothesis import settings
from hypothesis import strategies as st
from ik_node import Chain, InvalidInputError, JacobianIK
from ik_node.core.ik import jacobian as jik
from ik_node.core.kernels import base as kernels
from ik_node.core.kernels import compile as _compiled
from ik_node.core.kernels import follow as follow_kernels
from ik_node.core.kernels import lm as lm_kernels
from ik_node.core.kernels import offset_wrist as offset_kernels
from ik_node.core.kernels import srs as srs_kernels
from ik_node.core.poses import pose_residual, split_pose
from ik_reference import ReferenceDescent
from models import ARMS as MODELS, MIXED_URDF, random_q
import numpy as np
import pytest

ARMS = {name: MODELS[name] for name in ('iiwa14', 'ur5e')}
CHAINS = {name: Chain.from_urdf_file(str(p), b, t) for name, (p, b, t) in ARMS.items()}
CHAINS['mixed'] = Chain.from_urdf_string(MIXED_URDF, 'base', 'tip')
PACKAGE = Path(jik.__file__).parents[2]
# The hand-written compiled modules (the seed article's reproduction, calling the kernels).
COMPILED_TWINS = (PACKAGE / 'bench' / 'seed000' / 'jit.py',)
# The interpreted kernels of the descent and the local steps, and their compiled namespaces.
LM = {'numpy': lm_kernels, 'numba': _compiled.LM}


def test_every_kernel_has_a_compiled_twin_of_the_same_code():
    for module, space in ((kernels, _compiled.K), (srs_kernels, _compiled.S),
                          (offset_kernels, _compiled.OW), (lm_kernels, _compiled.LM),
                          (follow_kernels, _compiled.F)):
        functions = {n: f for n, f in vars(module).items()
                     if isinstance(f, types.FunctionType) and f.__module__ == module.__name__}
        assert len(functions) >= 4
        for name, fn in functions.items():
            assert getattr(space, name).py_func.__code__ is fn.__code__, name


def test_compiled_modules_retype_no_constant_and_redefine_no_kernel():
    kernel_names = {n for m in (kernels, srs_kernels, offset_kernels) for n, f in vars(m).items()
                    if isinstance(f, types.FunctionType)}
    for path in COMPILED_TWINS:
        tree = ast.parse(path.read_text())
        for node in tree.body:
            if isinstance(node, ast.Assign) and isinstance(node.value, ast.Constant):
                assert not isinstance(node.value.value, (int, float)), \
                    f'{path.name}: constant {ast.unparse(node)} (import it instead)'
            if isinstance(node, ast.FunctionDef):
                assert node.name not in kernel_names, f'{path.name} redefines {node.name}'


@pytest.mark.parametrize('name', sorted(CHAINS))
@settings(max_examples=50)
@given(seed=st.integers(0, 2**32 - 1))
def test_compiled_kernels_equal_the_interpreted_ones(name, seed):
    chain = CHAINS[name]
    rng = np.random.default_rng(seed)
    q = random_q(chain, rng)
    target = chain.forward(random_q(chain, rng))
    frames, tip_r, tip_p = chain.frames(q.tolist())
    frames_c = np.empty((chain.movable, 12))
    tip_r_c, tip_p_c = _compiled.K.chain_frames(q, chain.fk_arrays, frames_c)
    np.testing.assert_allclose(frames_c, np.array(frames), atol=1e-14)
    np.testing.assert_allclose(tip_r_c, tip_r, atol=1e-14)
    np.testing.assert_allclose(tip_p_c, tip_p, atol=1e-14)
    target_r, target_p = split_pose(target)
    solver = JacobianIK(chain, backend='numpy', position_weight=2.0, orientation_weight=0.5)
    reference = ReferenceDescent(solver)
    expected_jac = chain.jacobian_of_frames(frames, tip_p)
    expected_r = pose_residual(target, chain.forward(q))
    for backend, space in LM.items():
        scratch = np.empty((chain.movable, 12)) if backend == 'numba' else [None] * chain.movable
        columns = np.empty((chain.n, 6)) if backend == 'numba' else [None] * chain.n
        fk = chain.fk_arrays if backend == 'numba' else chain.fk_tables
        r, tip_r, tip = space.evaluate(q, fk, 0, (0.0, 0.0, 1.0), target_r, target_p, scratch)
        np.testing.assert_allclose(r, expected_r, atol=1e-12)
        jac = space.jacobian(scratch, fk, tip, chain.n, columns)
        np.testing.assert_allclose(jac, expected_jac, atol=1e-13)
        a, rhs = space.task_rows(jac, r, 0, (0.0, 0.0, 1.0), tip_r, tip, target_p, solver._w6)
        np.testing.assert_allclose(a, reference.task_matrix(jac, r), atol=1e-12)
        np.testing.assert_allclose(rhs, reference.weighted(r), atol=1e-15)


@pytest.mark.parametrize('name', sorted(CHAINS))
@settings(max_examples=50)
@given(seed=st.integers(0, 2**32 - 1), damping=st.sampled_from([1e-6, 1e-3, 0.1, 10.0]),
       biased=st.booleans())
def test_step_matches_the_reference_including_the_active_set(name, seed, damping, biased):
    chain = CHAINS[name]
    rng = np.random.default_rng(seed)
    q = random_q(chain, rng)
    # Put some joints near a limit so that steps cross it.
    near = rng.random(chain.n) < 0.3
    q = np.where(near & np.isfinite(chain.upper), chain.upper - 1e-3, q)
    solver = JacobianIK(chain, backend='numpy')
    reference = ReferenceDescent(solver)
    frames, _, tip_p = chain.frames(q.tolist())
    r = pose_residual(chain.forward(random_q(chain, rng)), chain.forward(q))
    a = reference.task_matrix(chain.jacobian_of_frames(frames, tip_p), r)
    rhs = reference.weighted(r)
    q_ref = random_q(chain, rng)
    expected = reference.step(a, rhs, q, q_ref if biased else None, damping)
    on_limit = np.isclose(q + expected, chain.lower, atol=0, rtol=0) | \
        np.isclose(q + expected, chain.upper, atol=0, rtol=0)
    for space in LM.values():
        got = space.step(a, rhs, q, q_ref, biased, solver.nullspace_gain, chain.lower,
                         chain.upper, damping, solver.max_step)
        # The same LU solves round alike, but summation order differs between
        # numpy's and numba's matrix products, by up to eps / damping^2 when
        # the active set leaves a (near-)singular sub-problem (pinning one joint
        # of a 7-DoF arm can): tight where the damping bounds the conditioning,
        # loose at 1e-6; the same joints end on their limits.
        np.testing.assert_allclose(got, expected, atol=1e-9 if damping >= 1e-3 else 1e-3)
        assert np.array_equal(on_limit, np.isclose(q + got, chain.lower, atol=0, rtol=0)
                              | np.isclose(q + got, chain.upper, atol=0, rtol=0))
        assert chain.within_limits(q + got)


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_single_attempts_match_the_reference(name):
    """One descent, both backends, against the reference: same verdict, same joints (1e-6).

    From starts within ~0.3 rad of a solution (the tick's and the polish's
    use): from far ones the rounding differences grow along the path, and a
    redundant arm may settle elsewhere in its null space (test_whole_solves_agree).
    """
    chain = CHAINS[name]
    rng = np.random.default_rng(5)
    solvers = {b: JacobianIK(chain, backend=b) for b in ('numpy', 'numba')}
    reference = ReferenceDescent(solvers['numpy'])
    for _ in range(40):
        goal = random_q(chain, rng)
        target = chain.forward(goal)
        start = np.clip(goal + rng.normal(0.0, 0.3, chain.n), chain.lower, chain.upper)
        q, ok, _, _, _ = reference.descend(target, start, start)
        for solver in solvers.values():
            got, got_ok, _, _, _ = solver._descend(target, start, start)
            assert got_ok == ok
            if ok:
                np.testing.assert_allclose(got, q, atol=1e-6)


@pytest.mark.parametrize('name', sorted(CHAINS))
def test_whole_solves_agree(name):
    # The answers are judged, not the path: summation order differs between
    # the two and with the CPU's vector width (AVX2 / AVX-512) and the numpy
    # version, so an attempt may take a few iterations more or less (73 vs 77
    # seen) and a redundant arm may settle elsewhere in its null space.
    chain = CHAINS[name]
    numba_ik = JacobianIK(chain, backend='numba', timeout_s=10.0)
    numpy_ik = JacobianIK(chain, backend='numpy', timeout_s=10.0)
    rng = np.random.default_rng(21)
    solved = 0
    for _ in range(60):
        target = chain.forward(random_q(chain, rng))
        a = numba_ik.solve(target, chain.mid_limits())
        b = numpy_ik.solve(target, chain.mid_limits())
        assert a.success == b.success
        for res in (a, b):
            assert chain.within_limits(res.q)
            error = pose_residual(target, chain.forward(res.q))
            if res.success:
                assert np.linalg.norm(error[:3]) < 1e-5 and np.linalg.norm(error[3:]) < 1e-5
        solved += a.success
    assert solved >= 55


def test_without_scipy_the_numpy_backend_runs(monkeypatch):
    """Without scipy numba imports but its np.linalg cannot compile: 'auto' must not pick it.

    (A distro's python3-numba does not pull python3-scipy; the compiled local
    step's SVD would fail inside the warm-up, as it did in the distro venv.)
    """
    from ik_node.core.kernels.backend import compiled_status, resolve
    monkeypatch.setitem(sys.modules, 'scipy.linalg.cython_lapack', None)
    backend, why = compiled_status()
    assert backend == 'numpy' and 'scipy' in why
    assert resolve('auto').name == 'numpy'
    assert JacobianIK(CHAINS['ur5e']).backend == 'numpy'
    with pytest.raises(InvalidInputError, match='scipy'):
        resolve('numba')


def test_numba_cache_is_dropped_when_any_core_source_changes(tmp_path):
    """A kernel's cache must not outlive a change in a kernel it calls from another file."""
    (tmp_path / 'kernels.py').write_text('X = 1\n')
    cache = tmp_path / '__pycache__'
    cache.mkdir()
    (cache / 'offset_kernels.solve-10.py311.nbi').write_text('index')
    assert _compiled.drop_stale_cache(tmp_path, cache)      # no stamp yet: dropped
    assert not list(cache.glob('*.nbi'))
    (cache / 'offset_kernels.solve-10.py311.nbc').write_text('code')
    assert not _compiled.drop_stale_cache(tmp_path, cache)  # same sources: kept
    assert list(cache.glob('*.nbc'))
    (tmp_path / 'kernels.py').write_text('X = 2\n')
    assert _compiled.drop_stale_cache(tmp_path, cache)      # another file changed: dropped
    assert not list(cache.glob('*.nbc'))


def test_the_background_compile_runs_without_coal(monkeypatch):
    """compile_kernels (the node's background compile) on an install without coal.

    coal is optional (collision checking needs it; Ubuntu's numba 0.59 venv has
    none): the collision kernels are then skipped, the IK and tracker kernels
    still compiled. Before, the child died on `import coal` and the node never
    left the numpy reference.
    """
    pytest.importorskip('numba', reason='numba is not installed: nothing to compile')
    from ik_node.core.motion.tracker import TrackerConfig
    from ik_node.core.warm import compile_kernels
    monkeypatch.setitem(sys.modules, 'coal', None)   # `import coal` fails
    chain = CHAINS['iiwa14']
    compile_kernels(chain, 'analytic', chain.mid_limits(), TrackerConfig())


WARMED_TICK = r"""
import json, sys
import numpy as np
from ik_node.core.collision.guard import CollisionGuard
from ik_node.core.collision.shapes import checked_shape
from ik_node.core.ik.local import follow
from ik_node.core.kernels import compile as compiled
from ik_node.core.kernels.backend import resolve
from ik_node.core.model.chain import Chain
from ik_node.core.motion.tracker import TrackerConfig
from ik_node.core.warm import compile_kernels
from ik_node.description.geometry import collision_model
xml = open(sys.argv[1], encoding='utf-8').read()
chain = Chain.from_urdf_string(xml, sys.argv[2], sys.argv[3])
q = chain.mid_limits()
compile_kernels(chain, 'auto', q, TrackerConfig())
def signatures():
    out = {name: len(f.signatures) for name, f in vars(compiled.P).items()
           if hasattr(f, 'signatures')}
    out['follow'] = len(compiled.F.follow.signatures)
    return out
before = signatures()
model, _ = collision_model(xml, chain, home=q)
ball = np.eye(4)
ball[:3, 3] = chain.forward(q)[:3, 3] + [0.0, 0.0, -0.12]
model.set_obstacles({'ball': (checked_shape('sphere', (0.05,), ball, source='ball'),)})
guard = CollisionGuard(model, 0.01)
rng = np.random.default_rng(3)
a = np.full(chain.n, 5.0)
for _ in range(40):   # steps of every size near the ball: admitted, refused, slid
    v = rng.uniform(-1.0, 1.0, chain.n)
    q1 = q + 0.004 * v
    refusal = guard.judge(q, q1, v, a, chain.lower, chain.upper)
    if refusal is None:
        q = q1
    else:
        guard.slid_goal(q, q1, refusal)
        jac = chain.jacobian(q)   # a pose goal is slid in the tip's metric
        guard.slid_goal(q, q1, refusal, jac.T @ jac + 1e-4 * np.eye(chain.n))
    follow(chain, q, chain.forward(q1), 3, resolve('numba'))   # the local steps of a tick
# Witnesses as the exact query makes them (column slices) and as a merge of
# queries does (whole arrays): one machine code for both.
from dataclasses import replace
near = model.distances(q, 1.0)
whole = replace(near, point_a=near.point_a.copy(), point_b=near.point_b.copy(),
                normal=near.normal.copy())
for pairs in (near, whole):
    model.gradients(q, pairs)
    model.gradients_and_dip(q, pairs, np.full(chain.n, 0.5), a)
print(json.dumps({'before': before, 'after': signatures(), 'backend': model.backend}))
"""


def test_a_guarded_tick_compiles_nothing_after_the_warm_up(tmp_path):
    """Every collision kernel a guarded step calls was compiled by the node's warm-up.

    In a fresh process (numba's per-process dispatchers): compile_collision_kernels
    on one chain (compile_kernels: the solver, the tracker, the collision
    kernels), then a guard's steps on a bundled arm's real model near a ball,
    slid in joint space and in the tip's metric, and the compiled local steps;
    no kernel gains a signature (a compile inside a tick takes seconds).
    """
    pytest.importorskip('numba', reason='numba is not installed: nothing to compile')
    pytest.importorskip('coal', reason='coal is not installed: no collision kernels')
    import json
    import os
    import subprocess
    path, base, tip = ARMS['iiwa14']
    env = dict(os.environ)
    env['PYTHONPATH'] = os.pathsep.join(
        [str(Path(__file__).resolve().parents[2])] + [p for p in [env.get('PYTHONPATH')] if p])
    out = subprocess.run([sys.executable, '-c', WARMED_TICK, str(path), base, tip],
                         capture_output=True, text=True, timeout=600, env=env)
    assert out.returncode == 0, out.stderr[-2000:]
    report = json.loads(out.stdout.strip().splitlines()[-1])
    assert report['backend'] == 'numba'
    assert report['after'] == report['before']
    # The kernels a guarded tick calls from Python (distance_rates and
    # braking_dip run inside distance_gradients and gradients_and_dip).
    for name in ('posed_bounds', 'near_pairs', 'known_floors', 'distance_gradients',
                 'gradients_and_dip', 'stop_and_need', 'slide_projection', 'sphere_witnesses',
                 'remember', 'path_sweep', 'braking_path', 'follow'):
        assert report['before'][name] >= 1, name
