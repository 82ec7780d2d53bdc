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
