# SPDX-License-Identifier: Apache-2.0

"""XML lint: ament_xmllint where installed, else an equivalent local check.

``ament_xmllint`` has no PyPI wheel, so on a bare machine this test checks the
same things itself: every XML file of the package is well-formed (parsed
with entity resolution and network access off) and package.xml is a valid
format-3 manifest according to catkin_pkg, the library rosdep and colcon use
to read it. On a ROS 2 install with ament_xmllint, the standard check runs.
"""

import importlib.util
from pathlib import Path

from catkin_pkg.package import parse_package
from lxml import etree
import pytest

ROOT = Path(__file__).resolve().parents[2]
XML_SUFFIXES = ('.xml', '.urdf', '.xacro', '.launch', '.sdf')


def package_xml_files():
    """List the XML files the package ships (not test fixtures, not the venv)."""
    files = [ROOT / 'package.xml']
    for folder in ('urdf', 'launch', 'config', 'rviz'):
        files += sorted(p for p in (ROOT / folder).rglob('*') if p.suffix in XML_SUFFIXES)
    return files


@pytest.mark.linter
@pytest.mark.xmllint
def test_xmllint():
    if importlib.util.find_spec('ament_xmllint') is not None:
        from ament_xmllint.main import main
        assert main(argv=[str(p) for p in package_xml_files()]) == 0
        return
    parser = etree.XMLParser(resolve_entities=False, no_network=True, load_dtd=False)
    for path in package_xml_files():
        etree.parse(str(path), parser)  # raises XMLSyntaxError with line and column
    package = parse_package(str(ROOT / 'package.xml'))
    package.validate()
    assert package.package_format == 3
    assert package.get_build_type() == 'ament_python'
