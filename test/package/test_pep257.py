# SPDX-License-Identifier: Apache-2.0

"""The standard ament pep257 check; the one docstring convention is Google's."""

from pathlib import Path

from ament_pep257.main import main
import pytest

ROOT = Path(__file__).resolve().parents[2]


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257_package():
    rc = main(argv=['--convention', 'google', str(ROOT / 'ik_node')])
    assert rc == 0, 'Found code style errors / warnings'


@pytest.mark.linter
@pytest.mark.pep257
def test_pep257_tests():
    # Same convention; test functions are exempt from D103 (their names say
    # what they check), everything else in test/ is held to it.
    rc = main(argv=[str(ROOT / 'test'), '--convention', 'google', '--add-ignore', 'D103'])
    assert rc == 0, 'Found code style errors / warnings'
