# SPDX-License-Identifier: Apache-2.0

"""The <visual> reader the viewer draws from: shapes, origins, colours, meshes, bad ones left out.

Expected values are read from the description text with lxml here (its
<material> table, each <visual>'s origin), not from the code under test.
"""

import math

from geometry_oracle import read_stl
from ik_node.core.model.chain import Chain
from ik_node.description.urdf import link_frames
from ik_node.description.visuals import GREY, load_visual_mesh, read_visuals
from lxml import etree
from models import ARMS
import numpy as np
import pytest
import transforms3d

pytest.importorskip('trimesh', reason='trimesh (a dependency of viser) loads the meshes')


@pytest.mark.parametrize('arm', sorted(ARMS))
def test_every_visual_of_a_bundled_arm_is_read_with_its_origin_and_colour(arm):
    path, base, tip = ARMS[arm]
    xml = path.read_text()
    chain = Chain.from_urdf_file(str(path), base, tip)
    visuals, skipped = read_visuals(xml, link_frames(xml, chain))
    assert skipped == []
    root = etree.fromstring(xml.encode())
    named = {m.get('name'): [float(v) for v in m.find('color').get('rgba').split()]
             for m in root.findall('material')}
    expected = [(link.get('name'), v) for link in root.findall('link')
                for v in link.findall('visual')]
    assert len(visuals) == len(expected)
    for visual, (link, element) in zip(visuals, expected):
        assert visual.link == link
        origin = element.find('origin')
        xyz = [0.0] * 3 if origin is None else [float(v) for v in origin.get('xyz').split()]
        rpy = [0.0] * 3 if origin is None else [float(v) for v in origin.get('rpy').split()]
        assert np.allclose(visual.origin[:3, 3], xyz)
        assert np.allclose(visual.origin[:3, :3], transforms3d.euler.euler2mat(*rpy, 'sxyz'))
        material = element.find('material')
        want = GREY if material is None else named[material.get('name')]
        assert np.allclose(visual.rgba, want)
        if visual.kind == 'mesh':
            vertices, faces = load_visual_mesh(visual)
            assert len(faces) > 0 and faces.max() < len(vertices)
            assert np.all(np.isfinite(vertices)) and np.ptp(vertices, axis=0).max() < 1.0


def test_primitives_inline_colours_and_a_missing_mesh_left_out_with_one_line():
    xml = """<robot name="r">
      <link name="base">
        <visual><origin xyz="0 0 0.1" rpy="0 0 1.5707963"/><geometry><box size="0.1 0.2 0.3"/>
          </geometry><material name="inline"><color rgba="0.1 0.2 0.3 1"/></material></visual>
        <visual><geometry><mesh filename="file:///no/such/mesh.stl"/></geometry></visual>
      </link>
      <link name="arm">
        <visual><geometry><cylinder radius="0.05" length="0.4"/></geometry></visual>
        <visual><geometry><sphere radius="0.07"/></geometry><material name="unknown"/></visual>
        <visual><geometry><capsule radius="0.05" length="0.4"/></geometry></visual>
      </link>
      <link name="elsewhere"><visual><geometry><sphere radius="1"/></geometry></visual></link>
      <joint name="j" type="revolute"><parent link="base"/><child link="arm"/>
        <axis xyz="0 0 1"/><limit lower="-1" upper="1" effort="1" velocity="1"/></joint>
      <joint name="k" type="floating"><parent link="base"/><child link="elsewhere"/></joint>
    </robot>"""
    chain = Chain.from_urdf_string(xml, 'base', 'arm')
    visuals, skipped = read_visuals(xml, link_frames(xml, chain))
    kinds = [(v.link, v.kind) for v in visuals]
    assert kinds == [('base', 'box'), ('base', 'mesh'), ('arm', 'cylinder'), ('arm', 'sphere')]
    box = visuals[0]
    assert box.size == (0.1, 0.2, 0.3) and box.rgba == (0.1, 0.2, 0.3, 1.0)
    assert math.isclose(box.origin[1, 0], 1.0, abs_tol=1e-6) and box.origin[2, 3] == 0.1
    assert visuals[2].size == (0.05, 0.4) and visuals[3].rgba == GREY
    assert len(skipped) == 1 and 'capsule' in skipped[0] and '\n' not in skipped[0]
    with pytest.raises(Exception) as failure:
        load_visual_mesh(visuals[1])
    assert 'mesh.stl' in str(failure.value)


def test_the_bundled_pandas_visual_meshes_are_frankas_and_sit_on_its_collision_meshes():
    """Franka's visual .dae files are read (assimp) and cover what its collision STLs do."""
    path, base, tip = ARMS['panda']
    xml = path.read_text()
    chain = Chain.from_urdf_file(str(path), base, tip)
    visuals, skipped = read_visuals(xml, link_frames(xml, chain))
    assert skipped == [] and len(visuals) == 8
    for visual in visuals:
        assert visual.path.endswith(f'meshes/panda/visual/{visual.link[len("panda_"):]}.dae')
        vertices, faces = load_visual_mesh(visual)
        assert len(faces) > 5000   # the detailed meshes, not the hulls
        triangles = read_stl(visual.path.replace('/visual/', '/collision/')
                             .replace('.dae', '.stl')).reshape(-1, 3)
        assert np.allclose(vertices.min(axis=0), triangles.min(axis=0), atol=0.01), visual.link
        assert np.allclose(vertices.max(axis=0), triangles.max(axis=0), atol=0.01), visual.link
