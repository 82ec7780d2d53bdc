# SPDX-License-Identifier: Apache-2.0

"""The package installs both ways the README promises: colcon and pip."""

import os
from pathlib import Path
import shutil
import subprocess
import sys
import zipfile

import pytest
from sources import copy_sources

ROOT = Path(__file__).resolve().parents[2]
BIN = Path(sys.executable).parent


@pytest.fixture(scope='module')
def workspace(tmp_path_factory):
    """Return a colcon workspace holding a copy of the package in src/ik_node."""
    ws = tmp_path_factory.mktemp('ws')
    copy_sources(ws / 'src' / 'ik_node')
    return ws


@pytest.mark.slow
def test_colcon_build_installs_ament_python_layout(workspace):
    result = subprocess.run(
        [shutil.which('colcon') or str(BIN / 'colcon'), 'build', '--event-handlers',
         'console_direct-'],
        cwd=workspace, capture_output=True, text=True, timeout=300,
        env=dict(os.environ, COLCON_HOME=str(workspace / '.colcon')))
    assert result.returncode == 0, result.stdout + result.stderr
    install = workspace / 'install' / 'ik_node'
    marker = install / 'share' / 'ament_index' / 'resource_index' / 'packages' / 'ik_node'
    assert marker.is_file()
    assert (install / 'share' / 'ik_node' / 'package.xml').is_file()
    # Executables where `ros2 run ik_node ...` and launch_ros look for them.
    bench = install / 'lib' / 'ik_node' / 'ik_bench'
    assert bench.is_file() and os.access(bench, os.X_OK)
    for folder in ('launch', 'config', 'urdf', 'rviz'):
        shipped = sorted(p.relative_to(ROOT) for p in (ROOT / folder).rglob('*') if p.is_file())
        for rel in shipped:
            assert (install / 'share' / 'ik_node' / rel).is_file(), rel
    # The installed console script runs from the colcon install tree.
    run = subprocess.run([str(bench), '--help'], capture_output=True, text=True, timeout=60)
    assert run.returncode == 0, run.stderr
    assert 'rotations' in run.stdout


@pytest.mark.slow
def test_pip_builds_a_wheel_with_code_data_and_console_script(tmp_path):
    src = copy_sources(tmp_path / 'src')
    result = subprocess.run(
        [sys.executable, '-m', 'pip', 'wheel', '--no-deps', '--no-build-isolation',
         '-w', str(tmp_path / 'dist'), str(src)],
        capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout + result.stderr
    (wheel,) = (tmp_path / 'dist').glob('ik_node-*.whl')
    names = zipfile.ZipFile(wheel).namelist()
    assert 'ik_node/core/rotations.py' in names
    data = 'ik_node-0.1.0.data/data/share/'
    assert data + 'ik_node/package.xml' in names
    assert data + 'ament_index/resource_index/packages/ik_node' in names
    entry_points = zipfile.ZipFile(wheel).read('ik_node-0.1.0.dist-info/entry_points.txt')
    assert b'ik_bench = ik_node.bench.cli:console_main' in entry_points
    assert not any(n.startswith('test/') for n in names)
