# Copyright 2026 The ik_node Authors
#
# Licensed under the Apache License, Version 2.0 (the "License");
# you may not use this file except in compliance with the License.
# You may obtain a copy of the License at
#
#     http://www.apache.org/licenses/LICENSE-2.0
#
# Unless required by applicable law or agreed to in writing, software
# distributed under the License is distributed on an "AS IS" BASIS,
# WITHOUT WARRANTIES OR CONDITIONS OF ANY KIND, either express or implied.
# See the License for the specific language governing permissions and
# limitations under the License.

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
