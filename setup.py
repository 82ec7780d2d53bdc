"""Install ik_node as an ament_python package (colcon) or a plain pip package."""

from glob import glob
import os

from setuptools import find_packages
from setuptools import setup

PACKAGE = 'ik_node'
SHARED_DIRS = ('launch', 'config', 'urdf', 'rviz', 'meshes')


def shared_files():
    """Return data_files entries: the ament marker, package.xml, share dirs."""
    entries = [
        ('share/ament_index/resource_index/packages', [f'resource/{PACKAGE}']),
        (f'share/{PACKAGE}', ['package.xml']),
    ]
    for folder in SHARED_DIRS:
        files = sorted(f for f in glob(f'{folder}/**/*', recursive=True) if os.path.isfile(f))
        by_dir = {}
        for path in files:
            by_dir.setdefault(os.path.dirname(path), []).append(path)
        entries += [(f'share/{PACKAGE}/{d}', paths) for d, paths in sorted(by_dir.items())]
    return entries


setup(
    name=PACKAGE,
    version='0.1.0',
    packages=find_packages(exclude=['test', 'test.*']),
    data_files=shared_files(),
    # Lowest: Ubuntu 24.04's (ROS 2 Jazzy, Kilted), tested by scripts/python-tier.sh noble;
    # newest: requirements/. urdf_parser_py is ROS 2's urdfdom_py (PyPI urdfdom-py).
    install_requires=['setuptools', 'numpy>=1.26.4,<3', 'urdfdom-py>=1.2.1'],
    # colcon runs pytest only when the package declares it here (else
    # `python -m unittest`: 0 tests, success); tests_require is ignored.
    extras_require={'test': ['pytest>=7.4.4', 'hypothesis>=6.98'],
                    'numba': ['numba>=0.59'], 'demo': ['matplotlib>=3.6.3'],
                    'collision': ['coal>=3.0'],
                    # OMPL's Python bindings (PyPI only: the distro's ompl has none);
                    # without them the worker plans with its own RRT-Connect.
                    'planning': ['ompl>=2.0.1']},
    zip_safe=True,
    maintainer='ik_node maintainers',
    maintainer_email='maintainers@ik-node.invalid',
    description='Inverse kinematics node: analytic SRS and log-quaternion Jacobian '
                'solvers, exp-map cubic trajectory smoothing.',
    license='Apache-2.0',
    python_requires='>=3.10',
    entry_points={
        'console_scripts': [
            'ik_bench = ik_node.bench.cli:console_main',
            'ik_node = ik_node.ros.entry:main',
            'ik_demo = ik_node.ros.demo:main',
            'ik_target = ik_node.ros.target_cli:main',
            'ik_viewer = ik_node.ros.viewer:main',
        ],
    },
)
