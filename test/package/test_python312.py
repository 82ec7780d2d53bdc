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

"""Python 3.12 (Ubuntu 24.04's Python) cannot run here: what it removed or changed is scanned.

The ROS 2 Kilted wheels here are built for 3.11 only. Every source of the
package, its tests, launch file and scripts is checked for what 3.12 broke
(What's New in Python 3.12, "Removed" and "Changes in the Python API"):

* modules removed: distutils, imp, asynchat, asyncore, smtpd;
* names removed: the unittest aliases (assertEquals...), configparser's
  SafeConfigParser and readfp, ssl.wrap_socket, locale.format,
  pkgutil.ImpImporter / ImpLoader, typing.io / typing.re;
* invalid escape sequences in strings: a SyntaxWarning in 3.12 (compiled
  here with DeprecationWarning, their 3.11 warning, as an error).

At run time, setup.cfg turns every DeprecationWarning issued from ik_node
into an error in the tests: 3.11 warns about what 3.12 and 3.13 remove.
"""

import ast
from pathlib import Path
import warnings

import pytest

ROOT = Path(__file__).resolve().parents[2]
REMOVED_MODULES = {'distutils', 'imp', 'asynchat', 'asyncore', 'smtpd'}
REMOVED_ATTRIBUTES = {'assertEquals', 'assertNotEquals', 'assert_', 'failUnless', 'failIf',
                      'failUnlessEqual', 'assertDictContainsSubset', 'assertRegexpMatches',
                      'assertRaisesRegexp', 'SafeConfigParser', 'readfp', 'wrap_socket',
                      'ImpImporter', 'ImpLoader'}
REMOVED_FROM = {('locale', 'format'), ('typing', 'io'), ('typing', 're')}


def sources():
    """Return every Python file of the package, tests, launch files and scripts."""
    found = [ROOT / 'setup.py']
    for folder in ('ik_node', 'test', 'launch', 'scripts'):
        found += sorted((ROOT / folder).rglob('*.py'))
    return found


def problems(path):
    """Return what 3.12 no longer accepts in one file: [(line, what)]."""
    text = path.read_text(encoding='utf-8')
    out = []
    with warnings.catch_warnings():
        warnings.simplefilter('error', DeprecationWarning)
        warnings.simplefilter('error', SyntaxWarning)
        try:
            tree = compile(text, str(path), 'exec', ast.PyCF_ONLY_AST)
        except (SyntaxError, DeprecationWarning, SyntaxWarning) as exc:
            return [(getattr(exc, 'lineno', 0), f'does not compile cleanly: {exc}')]
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            out += [(node.lineno, f'import {a.name}') for a in node.names
                    if a.name.split('.')[0] in REMOVED_MODULES]
        elif isinstance(node, ast.ImportFrom) and node.module:
            if node.module.split('.')[0] in REMOVED_MODULES:
                out.append((node.lineno, f'from {node.module} import'))
            out += [(node.lineno, f'from {node.module} import {a.name}') for a in node.names
                    if (node.module, a.name) in REMOVED_FROM or a.name in REMOVED_ATTRIBUTES]
        elif isinstance(node, ast.Attribute):
            base = node.value.id if isinstance(node.value, ast.Name) else None
            if node.attr in REMOVED_ATTRIBUTES or (base, node.attr) in REMOVED_FROM:
                out.append((node.lineno, f'.{node.attr}'))
    return out


def test_no_source_uses_what_python_3_12_removed():
    found = {str(p.relative_to(ROOT)): problems(p) for p in sources()}
    found = {name: issues for name, issues in found.items() if issues}
    assert not found, found
    assert len(sources()) > 100


@pytest.mark.parametrize('snippet, expected', [
    ('import imp\n', 'import imp'),
    ('from distutils.version import LooseVersion\n', 'from distutils.version import'),
    ('self.assertEquals(1, 1)\n', '.assertEquals'),
    ('import locale\nlocale.format("%d", 1)\n', '.format'),
    ("x = '\\d'\n", 'does not compile cleanly'),
])
def test_the_scan_finds_each_kind(tmp_path, snippet, expected):
    path = tmp_path / 'sample.py'
    path.write_text(snippet)
    assert any(expected in what for _, what in problems(path)), problems(path)
