# SPDX-License-Identifier: Apache-2.0

"""mypy passes on the pure-numpy core (inline annotations are checked, not decoration)."""

from pathlib import Path
import subprocess
import sys

import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.slow
def test_mypy_on_core():
    result = subprocess.run(
        [sys.executable, '-m', 'mypy', '--config-file', str(ROOT / 'setup.cfg'),
         '--cache-dir', str(ROOT / '.mypy_cache'), str(ROOT / 'ik_node' / 'core')],
        capture_output=True, text=True, timeout=600, cwd=ROOT)
    assert result.returncode == 0, result.stdout + result.stderr
