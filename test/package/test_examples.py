# SPDX-License-Identifier: Apache-2.0

"""The suite's pinned examples: a test draws the same ones whatever ran before it.

test/conftest.py keeps hypothesis (6.131 and later) from mixing the literals
of the loaded local modules into its draws; with them, the derandomized
examples of a test changed with the tests that ran before it in the same
process (issue 30). Under scripts/sweep.sh the pool is on: fresh examples.
"""

import importlib
import os
import sys

from hypothesis import given, settings
from hypothesis import strategies as st
import pytest


def draws():
    """Return the values a derandomized test of one float draws."""
    seen = []

    @settings(derandomize=True, max_examples=300, database=None)
    @given(st.floats(0.0, 10.0))
    def collect(x):
        seen.append(x)

    collect()
    return seen


@pytest.mark.skipif(os.environ.get('IK_NODE_SWEEPS') == '1',
                    reason='the sweeps draw from the loaded modules on purpose')
def test_a_newly_loaded_module_does_not_change_the_examples(tmp_path, monkeypatch):
    before = draws()
    # A local module (not in site-packages) full of floats in the drawn range.
    probe = tmp_path / 'ik_node_constants_probe.py'
    probe.write_text('VALUES = (' + ', '.join(f'{0.37 + 0.113 * k!r}' for k in range(80)) + ')\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    importlib.import_module('ik_node_constants_probe')
    try:
        assert draws() == before
    finally:
        sys.modules.pop('ik_node_constants_probe', None)
