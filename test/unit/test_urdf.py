# SPDX-License-Identifier: Apache-2.0

"""Malformed robot models: each gives a ModelError naming the problem."""

from ik_node import Chain, IKError, ModelError
import ik_node.description.urdf
import pytest
from urdf_cases import CASES, CORPUS, ROOT, XACRO


@pytest.mark.parametrize('name, base, tip, pattern', CASES, ids=[c[0] for c in CASES])
def test_malformed_urdf_is_refused_with_the_reason(name, base, tip, pattern):
    with pytest.raises(ModelError, match=pattern):
        Chain.from_urdf_file(str(CORPUS / name), base, tip)
    with pytest.raises(ModelError, match=pattern):
        Chain.from_urdf_string((CORPUS / name).read_text(), base, tip)


def test_every_corpus_file_has_a_case():
    assert sorted(p.name for p in CORPUS.glob('*.urdf')) == sorted(c[0] for c in CASES)


def test_external_entity_file_is_never_read(tmp_path):
    secret = tmp_path / 'secret.txt'
    secret.write_text('TOP-SECRET-7f3a')
    xml = (f'<?xml version="1.0"?><!DOCTYPE r [<!ENTITY s SYSTEM "file://{secret}">]>'
           '<robot name="&s;"><link name="base"/></robot>')
    with pytest.raises(ModelError) as info:
        Chain.from_urdf_string(xml, 'base', 'base')
    assert 'TOP-SECRET' not in str(info.value)


def test_oversized_urdf_is_refused_before_parsing(tmp_path):
    big = tmp_path / 'big.urdf'
    padding = '<!-- ' + 'x' * 10_000_000 + ' -->'
    big.write_text(f'<?xml version="1.0"?><robot name="big">{padding}<link name="b"/></robot>')
    with pytest.raises(ModelError, match='above the 4,000,000-byte limit'):
        Chain.from_urdf_file(str(big), 'b', 'b')
    with pytest.raises(ModelError, match='above the 4,000,000-byte limit'):
        Chain.from_urdf_string(big.read_text(), 'b', 'b')


def test_missing_links_list_the_valid_choices():
    path = str(ROOT / 'urdf' / 'ur5e.urdf')
    with pytest.raises(ModelError, match="base_link 'nowhere' is not a link of robot 'ur5e'; "
                                         'links: base_link, forearm_link'):
        Chain.from_urdf_file(path, 'nowhere', 'tool0')
    with pytest.raises(ModelError, match="tip_link 'flange' is not a link"):
        Chain.from_urdf_file(path, 'base_link', 'flange')


def test_unreadable_inputs():
    with pytest.raises(ModelError, match='cannot read it'):
        Chain.from_urdf_file('/nonexistent/robot.urdf', 'a', 'b')
    with pytest.raises(ModelError, match='the text is empty'):
        Chain.from_urdf_string('   ', 'a', 'b')
    with pytest.raises(ModelError, match='expected text, received int'):
        Chain.from_urdf_string(42, 'a', 'b')
    assert issubclass(ik_node.description.urdf.UrdfError, IKError)


# -- xacro files and mesh URIs ---------------------------------------------------------------

# The same arm written out by hand (no meshes).
PLAIN = """<robot name="two_link">
  <link name="base"/><link name="upper_arm"/><link name="tool"/>
  <joint name="shoulder" type="revolute"><parent link="base"/><child link="upper_arm"/>
    <origin xyz="0 0 0.1" rpy="0 0 0"/><axis xyz="0 0 1"/>
    <limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
  <joint name="elbow" type="revolute"><parent link="upper_arm"/><child link="tool"/>
    <origin xyz="0.4 0 0" rpy="0 1.5707963267948966 0"/><axis xyz="0 1 0"/>
    <limit lower="-2" upper="2" velocity="1" effort="1"/></joint>
</robot>
"""


def test_a_xacro_file_is_expanded_and_its_meshes_are_never_opened(tmp_path):
    path = tmp_path / 'two_link.urdf.xacro'
    path.write_text(XACRO)
    chain = Chain.from_urdf_file(str(path), 'base', 'tool')
    plain = Chain.from_urdf_string(PLAIN, 'base', 'tool')
    assert chain.joint_names == ['shoulder', 'elbow']
    for q in ([0.0, 0.0], [0.3, -1.1], [-1.7, 1.9]):
        assert abs(chain.forward(q) - plain.forward(q)).max() < 1e-15
    # Arguments as on xacro's command line.
    text = ik_node.description.urdf.read_urdf_file(str(path), ['prefix:=left_'])
    assert Chain.from_urdf_string(text, 'left_base', 'left_tool').joint_names == \
        ['left_shoulder', 'left_elbow']
    assert 'package://no_such_package/meshes/base.stl' in text   # kept as text, not fetched


@pytest.mark.parametrize('edit, pattern', [
    (('<robot name', '<!DOCTYPE robot [<!ENTITY x "y">]>\n<robot name'), 'DOCTYPE / ENTITY'),
    (('${upper}', '${no_such_property}'), r'xacro .*two_link\.urdf\.xacro: .*no_such_property'),
    (('</robot>', ''), r'xacro .*two_link\.urdf\.xacro: ExpatError'),
])
def test_a_bad_xacro_file_is_refused_with_the_reason(tmp_path, edit, pattern):
    path = tmp_path / 'two_link.urdf.xacro'
    assert edit[0] in XACRO
    path.write_text(XACRO.replace(edit[0], edit[1], 1))
    with pytest.raises(ModelError, match=pattern):
        Chain.from_urdf_file(str(path), 'base', 'tool')


def test_xacro_arguments_must_be_name_value_and_only_for_xacro_files(tmp_path):
    xacro_file, urdf_file = tmp_path / 'a.xacro', tmp_path / 'a.urdf'
    xacro_file.write_text(XACRO)
    urdf_file.write_text(PLAIN)
    with pytest.raises(ModelError, match="xacro argument 'prefix': expected name:=value"):
        ik_node.description.urdf.read_urdf_file(str(xacro_file), ['prefix'])
    with pytest.raises(ModelError, match='not a .xacro file'):
        ik_node.description.urdf.read_urdf_file(str(urdf_file), ['prefix:=a'])


def test_bundled_files_are_found_and_a_missing_one_is_named():
    """bundled_file: the shipped URDFs and configs resolve; a missing file's error names it."""
    from ik_node.description.urdf import bundled_file, bundled_urdf
    assert bundled_urdf('panda.urdf') == bundled_file('urdf/panda.urdf')
    with open(bundled_file('config/obstacles/floor.yaml'), encoding='utf-8') as handle:
        assert 'halfspace' in handle.read()
    with pytest.raises(FileNotFoundError, match='config/nothing.yaml'):
        bundled_file('config/nothing.yaml')
