# SPDX-License-Identifier: Apache-2.0

"""Layers: the core is pure numpy, and every layer imports only the layers below it.

The core imports and runs with ROS and URDF libraries absent.
"""

import ast
from pathlib import Path
import subprocess
import sys
import textwrap

ROOT = Path(__file__).resolve().parents[2]
BLOCKER = textwrap.dedent("""
    import importlib.abc, pkgutil, sys

    BLOCKED = ('rclpy', 'rosidl', 'rmw', 'urdf_parser_py', 'launch', 'ament_index_python')

    class Block(importlib.abc.MetaPathFinder):
        def find_spec(self, name, path=None, target=None):
            root = name.split('.')[0]
            if root in BLOCKED or root.endswith('_msgs') or root.endswith('_srvs'):
                raise ImportError(f'{name} is blocked in this test')
            return None

    sys.meta_path.insert(0, Block())
    import ik_node.core
    names = [m.name for m in pkgutil.walk_packages(ik_node.core.__path__, 'ik_node.core.')]
    for name in names:
        __import__(name)
    from ik_node.core import rotations
    assert abs(rotations.exp([0.0, 0.0, 0.1])[3] - 0.99500416527802582) < 1e-15
    print(len(names))
""")


def test_core_imports_and_runs_without_ros_or_urdf_libraries():
    result = subprocess.run([sys.executable, '-c', BLOCKER], capture_output=True, text=True,
                            timeout=60)
    assert result.returncode == 0, result.stderr
    assert int(result.stdout.strip().splitlines()[-1]) >= 2  # errors, rotations, ...


# Each layer may import only the layers below it (doc/development.md, Layout): module prefix
# -> the ik_node modules it must not import. Inside the core the folders follow
# the data flow: kernels (everything numba compiles) -> model -> ik -> motion.
ABOVE_THE_CORE = ('ik_node.description', 'ik_node.ros', 'ik_node.bench')
LAYERS = {
    'ik_node.core': ABOVE_THE_CORE,
    'ik_node.core.kernels': ('ik_node.core.model', 'ik_node.core.ik', 'ik_node.core.motion',
                             'ik_node.core.rotations', 'ik_node.core.warm'),
    'ik_node.core.model': ('ik_node.core.ik', 'ik_node.core.motion', 'ik_node.core.warm'),
    'ik_node.core.ik': ('ik_node.core.motion', 'ik_node.core.warm'),
    'ik_node.description': ('ik_node.ros', 'ik_node.bench'),
    'ik_node.ros': ('ik_node.bench',),
}


def imports_of(path):
    """Absolute module names a file imports (anywhere in it, functions included)."""
    found = set()
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.Import):
            found |= {alias.name for alias in node.names}
        elif isinstance(node, ast.ImportFrom) and node.module:
            base = node.module if node.level == 0 else None
            if base is not None:
                found.add(base)
                found |= {f'{base}.{alias.name}' for alias in node.names}
    return found


def test_imports_point_down_the_layers_only():
    package = ROOT / 'ik_node'
    checked = 0
    for path in sorted(package.rglob('*.py')):
        module = '.'.join(path.relative_to(ROOT).with_suffix('').parts)
        for layer, forbidden in LAYERS.items():
            if module == layer or module.startswith(layer + '.'):
                bad = sorted(m for m in imports_of(path)
                             if any(m == f or m.startswith(f + '.') for f in forbidden))
                assert not bad, f'{module} imports {bad}, above its layer'
                checked += 1
    assert checked >= 25


def test_the_layer_check_sees_a_violation(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text('def f():\n    from ik_node.description.urdf import chain_from_urdf_file\n')
    assert 'ik_node.description.urdf' in imports_of(bad)


def test_the_package_has_no_import_cycle():
    """No module reaches itself through imports (any import, functions included)."""
    package = ROOT / 'ik_node'
    modules = {}
    for path in sorted(package.rglob('*.py')):
        parts = path.relative_to(ROOT).with_suffix('').parts
        name = '.'.join(parts[:-1] if parts[-1] == '__init__' else parts)
        modules[name] = path
    graph = {name: sorted(m for m in imports_of(path) if m in modules and m != name)
             for name, path in modules.items()}
    done, on_path = set(), []

    def visit(name):
        if name in on_path:
            return on_path[on_path.index(name):] + [name]
        if name in done:
            return None
        on_path.append(name)
        for dep in graph[name]:
            cycle = visit(dep)
            if cycle:
                return cycle
        on_path.pop()
        done.add(name)
        return None

    for name in graph:
        cycle = visit(name)
        assert cycle is None, ' -> '.join(cycle)
    assert len(graph) >= 50


def test_no_module_of_the_package_imports_a_private_name_of_another():
    """``from x import _y`` across modules: the closed forms once shared seven such names."""
    found = []
    for path in sorted((ROOT / 'ik_node').rglob('*.py')):
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.ImportFrom) and (node.module or '').startswith('ik_node'):
                found += [f'{path.name}: {node.module}.{a.name}' for a in node.names
                          if a.name.startswith('_')]
    assert found == []


# What changes the motion: only MotionSession (ik_node.core.motion.session) may
# call these on the tracker, the stream or the feedback policy. The ROS layer
# hands every input to the session (issue 31: one owner of the tick).
STEPPING_CALLS = ('add_target', 'set_twist', 'set_pole', 'reset', 'configure', 'set_solver',
                  'set_backend', 'advance', 'restart', 'set_jerk', 'use_tracker', 'decide',
                  'take', 'sync', 'command', 'brake', 'check_reachability')


def stepping_calls_of(path, receivers=('tracker', 'stream', 'feedback', 'policy')):
    """(line, receiver.method) of each call of a stepping method on one of ``receivers``."""
    found = []
    for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
        if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute) \
                and node.func.attr in STEPPING_CALLS:
            owner = node.func.value
            name = owner.attr if isinstance(owner, ast.Attribute) else \
                owner.id if isinstance(owner, ast.Name) else ''
            if name in receivers:
                found.append((node.lineno, f'{name}.{node.func.attr}'))
    return found


def test_the_ros_layer_leaves_every_motion_step_to_the_session():
    checked = 0
    for path in sorted((ROOT / 'ik_node' / 'ros').glob('*.py')):
        calls = stepping_calls_of(path)
        assert not calls, f'{path.name} steps the motion itself: {calls}'
        checked += 1
    assert checked >= 10


def test_the_stepping_check_sees_a_tracker_driven_from_outside(tmp_path):
    bad = tmp_path / 'bad.py'
    bad.write_text('def f(self):\n    self.tracker.add_target(0.0, None)\n'
                   '    stream.advance(1.0)\n')
    assert [c for _, c in stepping_calls_of(bad)] == ['tracker.add_target', 'stream.advance']
