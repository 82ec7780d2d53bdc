# SPDX-License-Identifier: Apache-2.0

"""Hypothesis strategies shared by the tests: rotations with their edge cases."""

import os

from hypothesis import strategies as st
import numpy as np


def sweeping():
    """Return True in scripts/sweep.sh (IK_NODE_SWEEPS=1): fresh examples, more of them."""
    return os.environ.get('IK_NODE_SWEEPS') == '1'


def examples(per_run, sweep_factor=5):
    """Return a property test's example count: ``per_run`` in a test run, more in a sweep.

    The heaviest property tests draw a few examples per run (derandomized:
    the same ones each run) and sweep_factor times as many fresh ones in
    scripts/sweep.sh (IK_NODE_SWEEPS=1).
    """
    return per_run * sweep_factor if sweeping() else per_run


finite = st.floats(min_value=-1.0, max_value=1.0, allow_nan=False, allow_infinity=False)


@st.composite
def unit_quaternions(draw):
    """Draw unit quaternions (x, y, z, w): random, identity, tiny, half and full turns."""
    kind = draw(st.sampled_from(['random', 'random', 'random', 'identity', 'tiny',
                                 'half_turn', 'near_full_turn', 'negated_tiny']))
    if kind == 'identity':
        return np.array([0.0, 0.0, 0.0, 1.0])
    axis = np.array([draw(finite), draw(finite), draw(finite)])
    if np.linalg.norm(axis) < 1e-3:
        axis = np.array([0.0, 0.0, 1.0])
    axis /= np.linalg.norm(axis)
    if kind == 'random':
        v = np.array([draw(finite) for _ in range(4)])
        if np.linalg.norm(v) < 1e-3:
            v = np.array([0.1, 0.2, 0.3, 0.9])
        return v / np.linalg.norm(v)
    if kind in ('tiny', 'negated_tiny'):
        half = draw(st.sampled_from([0.0, 1e-300, 1e-12, 1e-8, 1e-6, 1e-4, 1e-2]))
        q = np.concatenate((np.sin(half) * axis, [np.cos(half)]))
        return -q if kind == 'negated_tiny' else q
    if kind == 'half_turn':
        eps = draw(st.sampled_from([0.0, 1e-12, -1e-12, 1e-6, -1e-6]))
        half = np.pi / 2 + eps
    else:
        half = np.pi - draw(st.sampled_from([1e-3, 1e-6, 1e-9]))
    return np.concatenate((np.sin(half) * axis, [np.cos(half)]))


@st.composite
def log_vectors(draw, max_norm=np.pi - 1e-6):
    """Draw log-quaternions u, |u| < max_norm, with tiny and series-boundary norms."""
    direction = np.array([draw(finite), draw(finite), draw(finite)])
    if np.linalg.norm(direction) < 1e-3:
        direction = np.array([1.0, -2.0, 0.5])
    direction /= np.linalg.norm(direction)
    norm = draw(st.one_of(
        st.sampled_from([0.0, 1e-300, 1e-12, 1e-8, 1e-4 * 0.999, 1e-4 * 1.001,
                         1e-2 * 0.999, 1e-2 * 1.001, np.pi / 2, max_norm]),
        st.floats(min_value=0.0, max_value=max_norm)))
    return norm * direction


def vectors3(bound=10.0):
    """Draw finite 3-vectors in [-bound, bound]^3."""
    comp = st.floats(min_value=-bound, max_value=bound, allow_nan=False)
    return st.tuples(comp, comp, comp).map(np.array)


def same_rotation(q1, q2, atol=1e-12):
    """Return True when q1 and q2 are the same rotation (q or -q)."""
    return bool(np.allclose(q1, q2, atol=atol) or np.allclose(q1, -q2, atol=atol))
