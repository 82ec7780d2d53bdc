# SPDX-License-Identifier: Apache-2.0

"""What Python 3.12, 3.13 and 3.14 removed is scanned for in every source.

The whole suite runs on 3.12 (CI) and the fast tier on 3.13; the ROS layer,
the launch file and the scripts do not run on 3.13 and 3.14 here, so every
source of the package, its tests, launch file and scripts is checked for
what those versions removed (What's New in Python 3.12, 3.13 and 3.14,
"Removed"):

* modules removed: distutils, imp, asynchat, asyncore, smtpd (3.12); the
  "dead batteries" of PEP 594 and lib2to3 (3.13);
* names removed: the unittest aliases (assertEquals...), configparser's
  SafeConfigParser and readfp, ssl.wrap_socket, locale.format,
  pkgutil.ImpImporter / ImpLoader, typing.io / typing.re (3.12); ast.Num,
  ast.Str, ast.Bytes, ast.NameConstant, pkgutil.find_loader / get_loader
  (3.14);
* invalid escape sequences in strings: a SyntaxWarning since 3.12.

At run time, setup.cfg turns every DeprecationWarning issued from ik_node
into an error in the tests: each version warns about what the next removes.
"""

import ast
from pathlib import Path
import warnings

import pytest

ROOT = Path(__file__).resolve().parents[2]
REMOVED_MODULES = {'distutils', 'imp', 'asynchat', 'asyncore', 'smtpd',
                   'aifc', 'audioop', 'cgi', 'cgitb', 'chunk', 'crypt', 'imghdr', 'mailcap',
                   'msilib', 'nis', 'nntplib', 'ossaudiodev', 'pipes', 'sndhdr', 'spwd',
                   'sunau', 'telnetlib', 'uu', 'xdrlib', 'lib2to3'}
REMOVED_ATTRIBUTES = {'assertEquals', 'assertNotEquals', 'assert_', 'failUnless', 'failIf',
                      'failUnlessEqual', 'assertDictContainsSubset', 'assertRegexpMatches',
                      'assertRaisesRegexp', 'SafeConfigParser', 'readfp', 'wrap_socket',
                      'ImpImporter', 'ImpLoader'}
REMOVED_FROM = {('locale', 'format'), ('typing', 'io'), ('typing', 're'),
                ('ast', 'Num'), ('ast', 'Str'), ('ast', 'Bytes'), ('ast', 'NameConstant'),
                ('pkgutil', 'find_loader'), ('pkgutil', 'get_loader')}


def sources():
    """Return every Python file of the package, tests, launch files and scripts."""
    found = [ROOT / 'setup.py']
    for folder in ('ik_node', 'test', 'launch', 'scripts'):
        found += sorted((ROOT / folder).rglob('*.py'))
    return found


def problems(path):
    """Return what 3.12-3.14 no longer accept in one file: [(line, what)]."""
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


def test_no_source_uses_what_python_3_12_to_3_14_removed():
    found = {str(p.relative_to(ROOT)): problems(p) for p in sources()}
    found = {name: issues for name, issues in found.items() if issues}
    assert not found, found
    assert len(sources()) > 100


@pytest.mark.parametrize('snippet, expected', [
    ('import imp\n', 'import imp'),
    ('from distutils.version import LooseVersion\n', 'from distutils.version import'),
    ('self.assertEquals(1, 1)\n', '.assertEquals'),
    ('import locale\nlocale.format("%d", 1)\n', '.format'),
    ('import telnetlib\n', 'import telnetlib'),
    ('import ast\nast.Num(1)\n', '.Num'),
    ("x = '\\d'\n", 'does not compile cleanly'),
])
def test_the_scan_finds_each_kind(tmp_path, snippet, expected):
    path = tmp_path / 'sample.py'
    path.write_text(snippet)
    assert any(expected in what for _, what in problems(path)), problems(path)
