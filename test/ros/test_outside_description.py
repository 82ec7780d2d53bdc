# SPDX-License-Identifier: Apache-2.0

"""A description with real collision meshes, from a package a user would have (issue 31).

The Franka Panda of **example-robot-data 6.0.0** (PyPI, BSD-3-Clause; the
panda from franka_ros, Apache-2.0; also ros-<distro>-example-robot-data):
its URDF names STL collision meshes by
``package://example-robot-data/robots/panda_description/meshes/...``, found
through the ament index as ROS finds them (the package installs its own
index entry; here its pip prefix is put on AMENT_PREFIX_PATH, extended), and
its SRDF (MoveIt's, with the setup assistant's disabled pairs) is read.
Nothing of it is written or changed here.

Judged independently of the node's collision model: the meshes are read by
the tests' own STL reader (geometry_oracle) and posed by the tests' own forward kinematics
(oracle.RawModel); distances come from python-fcl on the exact meshes (a
second library), and each distance the model reports is checked against a
separating direction computed from the mesh vertices.
"""

import os
from pathlib import Path
import sysconfig
from xml.etree import ElementTree

from geometry_oracle import read_stl
import numpy as np
from oracle import RawModel
import pytest
import transforms3d

coal = pytest.importorskip('coal', reason='coal is not installed: collision is off without it')
fcl = pytest.importorskip('fcl', reason='python-fcl (the second library) is not installed')

from ik_node.core.collision.guard import CollisionGuard  # noqa: E402,I100
from ik_node.core.ik.factory import make_solver  # noqa: E402
from ik_node.core.motion.session import MotionSession  # noqa: E402
from ik_node.core.motion.stream import controller_lead  # noqa: E402
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig  # noqa: E402
from ik_node.description.geometry import collision_model, read_srdf_pairs  # noqa: E402
from ik_node.description.urdf import chain_from_urdf_string, link_frames  # noqa: E402


def _locate():
    """Return (a prefix to add to AMENT_PREFIX_PATH or None, the package's share folder).

    As ROS finds it (ros-<distro>-example-robot-data, or a sourced
    workspace); else where pip installs it (its cmeel prefix, which holds
    the package's own ament index entry).
    """
    from ament_index_python.packages import get_package_share_directory, \
        PackageNotFoundError
    try:
        return None, Path(get_package_share_directory('example-robot-data'))
    except PackageNotFoundError:
        prefix = Path(sysconfig.get_paths()['purelib']) / 'cmeel.prefix'
        return prefix, prefix / 'share' / 'example-robot-data'


PREFIX, PACKAGE = _locate()
SHARE = PACKAGE / 'robots' / 'panda_description'
URDF, SRDF = SHARE / 'urdf' / 'panda.urdf', SHARE / 'srdf' / 'panda.srdf'
BASE, TIP = 'panda_link0', 'panda_hand'
# The SRDF's group state "default" (the ready pose), arm joints.
READY = [0.0, -0.785398, 0.0, -2.35619, 0.0, 1.5707, 0.785398]
MARGIN, SLACK = 0.01, 1e-3
PERIOD, HARDWARE = 0.004, 0.001

pytestmark = pytest.mark.skipif(not URDF.is_file(), reason=(
    f'example-robot-data is not installed ({URDF} missing): pip install '
    'example-robot-data==6.0.0 (requirements/test.txt)'))


@pytest.fixture(autouse=True)
def ament_prefix(monkeypatch):
    """Put the pip prefix on AMENT_PREFIX_PATH when needed (extended, as sourcing does)."""
    if PREFIX is not None:
        current = os.environ.get('AMENT_PREFIX_PATH', '')
        monkeypatch.setenv('AMENT_PREFIX_PATH', f'{current}:{PREFIX}' if current else
                           str(PREFIX))


MODEL = {}


def panda():
    """Return (xml, chain, model with the SRDF's pairs disabled) (cached: building samples)."""
    if not MODEL:
        xml = URDF.read_text()
        chain = chain_from_urdf_string(xml, BASE, TIP)
        frames = link_frames(xml, chain)
        # The arm's own links (the fingers a joint the chain does not drive moves: the
        # node places them too, test_the_node_loads_it...; their boxes are not meshes).
        model, notes = collision_model(xml, chain, frames, disabled=read_srdf_pairs(str(SRDF)),
                                       home=np.array(READY), place_undriven=False)
        MODEL.update(xml=xml, chain=chain, frames=frames, model=model, notes=notes)
    return MODEL['xml'], MODEL['chain'], MODEL['model']


# -- the tests' own reading of the description ---------------------------------------------

def mesh_collisions(xml, prefix, root):
    """Return {link: [(mesh file, origin, scale)]} of a URDF's <collision> meshes.

    URIs must start with ``prefix`` and are found under ``root``. The origin is
    its (4, 4) pose in the link (None: no <origin> element); the scale its
    attribute text (None: absent). Other geometry (the fingers' boxes) is skipped.
    """
    out = {}
    for link in ElementTree.fromstring(xml).findall('link'):
        for collision in link.findall('collision'):
            mesh = collision.find('geometry/mesh')
            if mesh is None:
                continue
            uri = mesh.get('filename')
            assert uri.startswith(prefix), uri
            origin, pose = collision.find('origin'), None
            if origin is not None:
                pose = np.eye(4)
                pose[:3, 3] = [float(v) for v in origin.get('xyz', '0 0 0').split()]
                pose[:3, :3] = transforms3d.euler.euler2mat(
                    *[float(v) for v in origin.get('rpy', '0 0 0').split()], 'sxyz')
            out.setdefault(link.get('name'), []).append(
                (root / uri[len(prefix):], pose, mesh.get('scale')))
    return out


def collision_meshes(xml):
    """Return {link: triangles (T, 3, 3) in the link frame} of every <collision> mesh."""
    meshes = {}
    for link, entries in mesh_collisions(xml, 'package://example-robot-data/', PACKAGE).items():
        for path, pose, scale in entries:
            assert pose is None and scale is None, \
                'this description: meshes at the link origin, unscaled'
            meshes.setdefault(link, []).append(read_stl(path))
    return {name: np.concatenate(parts) for name, parts in meshes.items()}


class Meshes:
    """The arm's collision meshes posed by the tests' FK; python-fcl distances between them."""

    def __init__(self, xml, chain, links):
        """Read the meshes of ``links`` and build fcl's BVH models of them."""
        self.raw, self.chain = RawModel(xml), chain
        triangles = collision_meshes(xml)
        self.vertices, self.objects = {}, {}
        for link in links:
            tri = triangles[link]
            verts = tri.reshape(-1, 3)
            bvh = fcl.BVHModel()
            bvh.beginModel(len(verts), len(tri))
            bvh.addSubModel(verts, np.arange(len(verts)).reshape(-1, 3))
            bvh.endModel()
            self.vertices[link] = np.unique(verts, axis=0)
            self.objects[link] = fcl.CollisionObject(bvh, fcl.Transform())

    def pose(self, link, q):
        """Return the (4, 4) pose of ``link`` in the base frame at joints q (tests' FK)."""
        return self.raw.pose(BASE, link, dict(zip(self.chain.joint_names, q)))

    def place(self, q):
        """Pose every mesh at joints q (the tests' FK)."""
        for link, obj in self.objects.items():
            t = self.pose(link, q)
            obj.setTransform(fcl.Transform(t[:3, :3], t[:3, 3]))

    def distance(self, a, b):
        """Return python-fcl's distance between the placed meshes of links a and b, m."""
        result = fcl.DistanceResult()
        return fcl.distance(self.objects[a], self.objects[b], fcl.DistanceRequest(), result)

    def lowest(self, pairs, q):
        """Return the smallest distance over ``pairs`` (link names) at joints q, m."""
        self.place(q)
        return min(self.distance(a, b) for a, b in pairs)

    def separation(self, a, b, q, normal):
        """Return how far apart the vertices of a and b lie along ``normal`` (a lower bound)."""
        ta, tb = self.pose(a, q), self.pose(b, q)
        va = self.vertices[a] @ ta[:3, :3].T + ta[:3, 3]
        vb = self.vertices[b] @ tb[:3, :3].T + tb[:3, 3]
        return float(np.min(vb @ normal) - np.max(va @ normal))


def checked_pairs(model):
    """Return the checked pairs' link names, each sorted."""
    return {tuple(sorted(model.pair_names(k))) for k in range(len(model.pairs))}


# -- tests ---------------------------------------------------------------------------------

def test_the_meshes_are_found_through_package_uris_and_every_link_is_checked():
    xml, chain, model = panda()
    meshes = collision_meshes(xml)
    # Every link the chain moves or holds still, with a mesh: a body (fingers are
    # moved by a joint the chain does not drive, and the start-up notes say so).
    expected = {link for link in meshes if link not in ('panda_leftfinger', 'panda_rightfinger')}
    assert {b.link for b in model.bodies} == expected
    assert any('panda_leftfinger' in n for n in MODEL['notes']), MODEL['notes']
    assert not [n for n in MODEL['notes'] if n.warn], MODEL['notes']
    # Each body is its mesh, read from the file the URI names: the vertices the model
    # loaded (assimp, through coal) are the ones the test's own STL reader finds.
    for body in model.bodies:
        assert len(body.shapes) == 1 and body.shapes[0].kind == 'mesh', body
        ours = {tuple(v) for v in np.round(body.shapes[0].vertices, 6)}
        theirs = {tuple(v) for v in np.round(meshes[body.link].reshape(-1, 3), 6)}
        assert ours == theirs, body.link


@pytest.mark.skipif(PREFIX is None, reason='example-robot-data is in the ament index here')
def test_meshes_are_found_on_ros_package_path_too_and_each_missing_file_is_one_warning(
        monkeypatch, tmp_path):
    """Off the ament index: ROS_PACKAGE_PATH finds the package (issue 50), else one WARN a file."""
    xml, chain, _ = panda()
    bare = os.pathsep.join(p for p in os.environ['AMENT_PREFIX_PATH'].split(os.pathsep)
                           if Path(p) != PREFIX)
    monkeypatch.setenv('AMENT_PREFIX_PATH', bare)
    # A workspace with the package two folders down, and an unrelated root first.
    (tmp_path / 'ws' / 'src').mkdir(parents=True)
    (tmp_path / 'ws' / 'src' / 'example-robot-data').symlink_to(PACKAGE)
    monkeypatch.setenv('ROS_PACKAGE_PATH', f'{tmp_path / "nothing"}{os.pathsep}{tmp_path / "ws"}')
    model, notes = collision_model(xml, chain, sample_contacts=False, place_undriven=False)
    assert {b.link for b in model.bodies} == {b.link for b in panda()[2].bodies}
    assert not [n for n in notes if n.warn], notes
    monkeypatch.delenv('ROS_PACKAGE_PATH')
    model, notes = collision_model(xml, chain, sample_contacts=False, place_undriven=False)
    warned = [n for n in notes if n.warn]
    files = sorted(set(collision_meshes(xml)))
    assert len(warned) == len(files) and not [b for b in model.bodies if b.shapes], notes
    for note in warned:
        assert 'ROS_PACKAGE_PATH' in note and 'ament index' in note and \
            'package://example-robot-data/' in note, note


def test_the_srdf_disables_its_pairs_and_the_others_stay_checked():
    _, chain, model = panda()
    srdf = {tuple(sorted(p)) for p in read_srdf_pairs(str(SRDF))}
    bodies = {b.link for b in model.bodies}
    checked = checked_pairs(model)
    assert checked and not (checked & srdf)
    # What the SRDF leaves enabled between links two or more joints apart, and not
    # in contact over the samples, stays checked: the base against the forearm's end.
    assert ('panda_link0', 'panda_link5') in checked
    assert ('panda_hand', 'panda_link0') in checked
    # Without the SRDF the model keeps more pairs (its own sampling is more careful
    # than the setup assistant's "Never").
    xml = MODEL['xml']
    alone, _ = collision_model(xml, chain, MODEL['frames'], home=np.array(READY))
    assert checked < checked_pairs(alone)
    assert {p for p in srdf if set(p) <= bodies} & checked_pairs(alone)


def test_distances_between_the_meshes_agree_with_a_second_library():
    xml, chain, model = panda()
    meshes = Meshes(xml, chain, [b.link for b in model.bodies])
    rng = np.random.default_rng(7)
    compared = 0
    for _ in range(12):
        q = rng.uniform(chain.lower, chain.upper)
        near = model.distances(q, np.inf)
        meshes.place(q)
        for k, d, normal in zip(near.pairs, near.distance, near.normal):
            a, b = model.pair_names(int(k))
            exact = meshes.distance(a, b)
            if exact <= 0.0:    # in contact: the model says so too
                assert d <= 1e-6, (a, b, d, exact)
                continue
            # The hull is never farther than the mesh ...
            assert d <= exact + 1e-6, (a, b, d, exact)
            # ... and the vertices, apart by d along the model's normal, prove
            # the hulls at least that far apart.
            assert meshes.separation(a, b, q, normal) >= d - 1e-6, (a, b, d)
            compared += 1
    assert compared >= 50


def session_on_the_panda(q0):
    """Return (session, guard) of the panda with its SRDF, at rest at q0 (250 Hz grid)."""
    _, chain, model = panda()
    solver = make_solver(chain, 'auto')
    solver.warm_up(np.asarray(q0))
    tracker = MotionTracker(chain, solver, TrackerConfig(ik_timeout=0.005), q0, 0.0)
    guard = CollisionGuard(model, MARGIN)
    tracker.guard = guard
    return MotionSession(tracker, PERIOD, controller_lead(PERIOD, 0.03), 500.0,
                         budget_s=0.03), guard


@pytest.mark.parametrize('where', [
    (0.1, 0.0, 0.05),     # 0.1 m from its base axis, 5 cm above the plane it stands on
    (0.0, 0.1, 0.2),      # into its own shoulder
    (-0.15, 0.0, 0.4)])   # behind it, through the upper arm
def test_targets_into_itself_keep_the_meshes_apart_at_the_hardware_rate(where):
    xml, chain, model = panda()
    meshes = Meshes(xml, chain, [b.link for b in model.bodies])
    pairs = sorted(checked_pairs(model))
    q0 = np.array(READY)
    session, guard = session_on_the_panda(q0)
    target = chain.forward(q0)
    target[:3, 3] = where
    session.target(0.0, target)
    now, lowest, near = 0.0, np.inf, True
    while now < 4.0:
        now += PERIOD
        session.tick(now)
        # The committed command at each grid instant, and at 1 kHz (as a controller
        # plays it) between two instants when either end has meshes within 5 cm.
        at_grid = meshes.lowest(pairs, session.plan.sample(now)[0])
        if near or at_grid < 0.05:
            for k in range(1, int(round(PERIOD / HARDWARE))):
                q = session.plan.sample(now - PERIOD + k * HARDWARE)[0]
                lowest = min(lowest, meshes.lowest(pairs, q))
        near = at_grid < 0.05
        lowest = min(lowest, at_grid)
    assert lowest >= MARGIN - SLACK, lowest
    assert lowest < 0.05, 'the target was meant to bring the arm near itself'
    # The pair that keeps the arm from the target is named: by the guard's last
    # hold (held at the margin), or by the status of a target in collision (the
    # arm heads for its closest free pose, where the guard need not hold it).
    last = session.tracker.stepper.report.last_hold
    arrival = session.arrival(now)
    assert (last is not None and all(name.startswith('panda_') for name in last.pair)) or \
        arrival.reason.count('panda_') >= 2, (last, arrival)


def test_the_node_loads_it_and_holds_the_arm_off_itself_over_dds():
    """The node as a user starts it: the package's URDF and SRDF, meshes by package://.

    A target 0.1 m from its base axis, 5 cm above the plane it stands on:
    every joint state the node publishes keeps the meshes (python-fcl, the
    tests' FK) at least the margin apart, and /diagnostics says 'blocked'
    with a WARN naming two of the panda's links.
    """
    from diagnostic_msgs.msg import DiagnosticStatus
    from node_process import NodeUnderTest
    xml, chain, model = panda()
    meshes = Meshes(xml, chain, [b.link for b in model.bodies])
    pairs = sorted(checked_pairs(model))
    node = NodeUnderTest({'urdf_path': str(URDF), 'base_link': BASE, 'tip_link': TIP,
                          'srdf_path': str(SRDF), 'collision_checking': 'true',
                          'initial_positions': '[' + ', '.join(map(str, READY)) + ']'},
                         env={'AMENT_PREFIX_PATH': os.environ['AMENT_PREFIX_PATH']})
    try:
        node.ready(90.0)
        target = chain.forward(np.array(READY))
        target[:3, 3] = (0.1, 0.0, 0.05)
        node.send(target)
        # The target is reachable only in collision: the arm holds the closest free
        # pose, and the status says so, naming the pair (issue 50).

        def at_rest():   # the last 0.5 s of joint states the same, the status 'blocked'
            recent = [m.position for m in node.joints[-50:]]
            return len(recent) == 50 and np.ptp(np.array(recent), axis=0).max() == 0.0 and \
                node.diagnostic('arrival') == 'blocked'
        # (A pause while the closest free pose is sought again from where the arm
        # stalled says 'held', not 'blocked': it is not that pose yet.)
        assert node.wait(at_rest, 60.0), node.diagnostic('arrival_reason')
        node.spin(1.0)
        held = node.diagnostic('arrival_reason')
        assert held.count('panda_') >= 2, held
        assert DiagnosticStatus.WARN in {s.level for a in node.diagnostics[-2:]
                                         for s in a.status}
        index = [list(node.joints[0].name).index(j) for j in chain.joint_names]
        lowest = min(meshes.lowest(pairs, np.array(m.position)[index]) for m in node.joints)
        assert MARGIN - SLACK <= lowest < 0.05, (lowest, held)
    finally:
        assert node.stop() == 0
    out = node.output()
    # The arm's 9 links, and the left finger where its joint is (its zero: no
    # feedback; the right finger mimics a joint not on its own path: not checked).
    assert 'collision: 10 links with geometry' in out, out
    assert 'checked where those joints are' in out and 'panda_finger_joint1' in out, out


def test_the_bundled_panda_collides_with_frankas_own_meshes():
    """urdf/panda.urdf's links are Franka's published collision meshes, byte for byte.

    The copies shipped in meshes/panda/ equal franka_ros's (in this package
    from outside); the bundled description names them by package://ik_node/,
    and the model reads every one (source tree: no install needed) as a mesh
    with as many vertices as the test's own reader finds.
    """
    from ik_node.description.geometry import collision_model
    from models import ARMS, HOME
    path, base, tip = ARMS['panda']
    xml = path.read_text()
    shipped = {link: [f for f, _, _ in entries] for link, entries in
               mesh_collisions(xml, 'package://ik_node/', path.parents[1]).items()}
    franka = SHARE / 'meshes' / 'collision'
    assert sorted(shipped) == [f'panda_link{k}' for k in range(8)]
    for link, files in shipped.items():
        assert files == [path.parents[1] / 'meshes' / 'panda' / 'collision' /
                         f'{link[len("panda_"):]}.stl']
        assert files[0].read_bytes() == (franka / files[0].name).read_bytes(), link
    chain = chain_from_urdf_string(xml, base, tip)
    model, _ = collision_model(xml, chain, home=HOME['panda'])
    meshes = {b.link: b.shapes for b in model.bodies if b.shapes[0].kind == 'mesh'}
    assert sorted(meshes) == sorted(shipped)
    for link, shapes in meshes.items():
        triangles = read_stl(shipped[link][0])
        assert len(shapes) == 1 and len(shapes[0].vertices) == len(np.unique(
            triangles.reshape(-1, 3).astype(np.float32), axis=0)), link


def test_the_bundled_xarm7_collides_with_ufactorys_meshes_where_ufactory_puts_them():
    """urdf/xarm7.urdf's links are UFACTORY's meshes, byte for byte, where UFACTORY puts them.

    The bundled description's link frames are the DH frames of its
    kinematics, not UFACTORY's; each mesh carries the shift between the two.
    At random joints, every mesh vertex posed by the bundled description
    (the tests' own FK, RawModel) is where UFACTORY's own description
    (example-robot-data's copy) poses it, to its 1e-5 rad rounding of pi/2.
    """
    from models import ARMS
    path, base, _ = ARMS['xarm7']
    xml = path.read_text()
    shipped = mesh_collisions(xml, 'package://ik_node/', path.parents[1])
    share = PACKAGE / 'robots' / 'xarm_description'
    theirs_xml = (share / 'urdf' / 'xarm7.urdf').read_text()
    theirs = mesh_collisions(theirs_xml, 'package://example-robot-data/', PACKAGE)
    assert len(shipped) == 8
    ours_fk, theirs_fk = RawModel(xml), RawModel(theirs_xml)
    rng = np.random.default_rng(7)
    names = [f'joint{k}' for k in range(1, 8)]
    for _ in range(5):
        values = dict(zip(names, rng.uniform(-2.0, 2.0, 7)))
        values['joint4'] = rng.uniform(0.0, 3.0)    # within both descriptions' limits
        for link, [(file, origin, _)] in shipped.items():
            name = link.replace('xarm7_', '')
            match = [f for f, _, _ in theirs[name] if f.name.lower() == file.name]
            assert len(match) == 1, (link, theirs[name])
            assert file.read_bytes() == match[0].read_bytes(), link
            points = read_stl(file).reshape(-1, 3)
            ours = ours_fk.pose(base, link, values) @ (np.eye(4) if origin is None else origin)
            ufactory = theirs_fk.pose('link_base', name, values)
            here = points @ ours[:3, :3].T + ours[:3, 3]
            there = points @ ufactory[:3, :3].T + ufactory[:3, 3]
            assert np.max(np.abs(here - there)) < 2e-5, link


def test_its_visual_meshes_are_read_for_the_viewer():
    """Its visuals are COLLADA files (trimesh alone needs pycollada): every one is read."""
    pytest.importorskip('trimesh', reason='trimesh (a dependency of viser) reads the meshes')
    from ik_node.description.visuals import load_visual_mesh, read_visuals
    xml, chain, _ = panda()
    visuals, skipped = read_visuals(xml, MODEL['frames'])
    assert skipped == []
    arm = [v for v in visuals if v.link.startswith('panda_link') and v.kind == 'mesh']
    assert len(arm) >= 8 and all(v.path.endswith('.dae') for v in arm)
    collision = collision_meshes(xml)
    for visual in arm:
        vertices, faces = load_visual_mesh(visual)
        assert len(faces) > 100 and faces.max() < len(vertices)
        # The visual mesh covers about what the link's collision mesh does.
        extent = np.ptp(vertices, axis=0)
        hull = collision.get(visual.link)
        if hull is not None:
            assert np.all(np.abs(extent - np.ptp(hull.reshape(-1, 3), axis=0)) < 0.05), \
                (visual.link, extent)
