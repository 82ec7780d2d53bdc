# SPDX-License-Identifier: Apache-2.0

"""The standard ament flake8 check over the package's Python files."""

from pathlib import Path

from ament_flake8.main import main_with_errors
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.flake8
@pytest.mark.linter
def test_flake8():
    paths = [str(ROOT / d) for d in ('ik_node', 'test', 'launch', 'setup.py')
             if (ROOT / d).exists()]
    rc, errors = main_with_errors(argv=['--config', str(ROOT / 'ament_flake8.ini')] + paths)
    assert rc == 0, 'Found %d code style errors / warnings:\n' % len(errors) + \
        '\n'.join(errors)
