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


"""The core is pure numpy: it imports and runs with ROS and URDF libraries absent."""

import subprocess
import sys
import textwrap

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
