# SPDX-License-Identifier: Apache-2.0

"""package.xml declares what the code imports, so `rosdep install` brings it all.

Every import of ik_node/ and launch/ (also the ones inside functions, as
numba's and matplotlib's are) must be an exec_depend; every import of test/
an exec_depend or test_depend; every package the launch file starts, an
exec_depend. And nothing is declared that nothing uses.
"""

import ast
from pathlib import Path
import re
import sys

from catkin_pkg.package import parse_package

ROOT = Path(__file__).resolve().parents[2]
# rosdep keys of the Python libraries imported; a ROS package's key is its name.
PYTHON_KEYS = {
    'numpy': 'python3-numpy', 'numba': 'python3-numba', 'matplotlib': 'python3-matplotlib',
    'hypothesis': 'python3-hypothesis', 'urdf_parser_py': 'urdfdom_py',
    'transforms3d': 'python3-transforms3d', 'yaml': 'python3-yaml', 'lxml': 'python3-lxml',
    'catkin_pkg': 'python3-catkin-pkg', 'pytest': 'python3-pytest', 'scipy': 'python3-scipy',
    'PIL': 'python3-pil',
}
# Optional peers of `ik_bench ik --compare`, imported only when installed
# (importlib.util.find_spec guards them); not dependencies.
# ik_bench's comparison peers (python-fcl: fcl).
# ik_viewer's viser (pip install viser; no rosdep key) and what it brings (trimesh
# for meshes, websockets, msgspec and zstandard: its wire protocol, which the
# viewer's tests and ik_bench viewer speak): the viewer is optional.
# OMPL's Python bindings (pip install ompl; the distro's ompl package has none):
# the planner's own RRT-Connect runs without them.
OPTIONAL = {'pytracik', 'trac_ik', 'roboticstoolbox', 'ruckig', 'fcl', 'viser', 'trimesh',
            'websockets', 'msgspec', 'zstandard', 'ompl'}
# Tools the tests run as programs, and packages they find by name (a description
# with meshes), with the text that shows each is still used.
TEST_TOOLS = {'python3-mypy': "'-m', 'mypy'", 'python3-colcon-common-extensions': "'colcon'",
              'python3-pip': "'-m', 'pip'",
              'example-robot-data': "get_package_share_directory('example-robot-data')"}


def imported_modules(folder):
    """Top-level names of every absolute import in the .py files under ``folder``."""
    local = {p.stem for p in (ROOT / 'test').rglob('*.py')} | {'ik_node'}
    found = set()
    for path in (ROOT / folder).rglob('*.py'):
        for node in ast.walk(ast.parse(path.read_text(encoding='utf-8'))):
            if isinstance(node, ast.Import):
                found |= {alias.name.split('.')[0] for alias in node.names}
            elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
                found.add(node.module.split('.')[0])
    return found - set(sys.stdlib_module_names) - local - OPTIONAL


def keys_of(modules):
    """Rosdep keys of the imported modules."""
    return {PYTHON_KEYS.get(name, name) for name in modules}


def declared():
    """Return (exec_depend keys, test_depend keys) of package.xml."""
    package = parse_package(str(ROOT / 'package.xml'))
    return ({d.name for d in package.exec_depends}, {d.name for d in package.test_depends})


def launched_packages():
    """Return the packages whose executables the launch files start (Node(package=...))."""
    text = ''.join(p.read_text() for p in (ROOT / 'launch').glob('*.py'))
    return set(re.findall(r"package='(\w+)'", text)) - {'ik_node'}


def test_every_run_time_import_and_launched_package_is_an_exec_depend():
    run_time, _ = declared()
    needed = keys_of(imported_modules('ik_node') | imported_modules('launch'))
    needed |= launched_packages()
    assert {'python3-numba', 'python3-matplotlib', 'rcl_interfaces', 'launch',
            'ament_index_python', 'robot_state_publisher', 'rviz2'} <= needed
    missing = needed - run_time
    assert not missing, f'imported or launched but not an exec_depend of package.xml: {missing}'


def test_every_test_import_and_tool_is_declared():
    run_time, test = declared()
    needed = keys_of(imported_modules('test')) | set(TEST_TOOLS)
    missing = needed - run_time - test
    assert not missing, f'used by test/ but not declared in package.xml: {missing}'


def test_nothing_is_declared_that_nothing_uses():
    run_time, test = declared()
    used = keys_of(imported_modules('ik_node') | imported_modules('launch')) | launched_packages()
    tests = (ROOT / 'test').rglob('*.py')
    sources = ''.join(p.read_text(encoding='utf-8') for p in tests)
    used_tools = {key for key, text in TEST_TOOLS.items() if text in sources}
    assert used_tools == set(TEST_TOOLS), 'a tool of TEST_TOOLS is no longer run by test/'
    unused = run_time - used
    assert not unused, f'exec_depend that ik_node/ and launch/ never use: {unused}'
    unused_tests = test - used - keys_of(imported_modules('test')) - used_tools
    assert not unused_tests, f'test_depend that test/ never uses: {unused_tests}'


def test_the_import_scan_sees_conditional_imports():
    # numba is imported only by the compiled twins and matplotlib only inside
    # ik_demo's plot function: the scan must find both.
    modules = imported_modules('ik_node')
    assert {'numba', 'matplotlib', 'urdf_parser_py', 'rclpy'} <= modules
    assert 'test_packaging' in {p.stem for p in (ROOT / 'test').rglob('*.py')}
    assert 'test_packaging' not in imported_modules('test')
