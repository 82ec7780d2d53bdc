# SPDX-License-Identifier: Apache-2.0

"""Robot descriptions written by others (test/urdf_corpus/external): load, resolve, reach.

Each description is an unmodified URDF from a PyPI package (the folder's
README says which, and the licences): hands with mimic fingers, mobile bases
and torsos above the base link, two arms, continuous and prismatic joints,
world / base_footprint roots, transmissions of every style. Every judge here
reads the raw XML itself (oracle.RawModel: xml.etree and transforms3d), never
ik_node's parser or tables.
"""


from ik_node.bench.corpus import CORPUS, corpus_path
from ik_node.core.ik.factory import make_solver
from ik_node.core.motion.tracker import MotionTracker, TrackerConfig
from ik_node.description.urdf import chain_from_urdf_string, link_frames
from models import URDF_CORPUS
import numpy as np
from oracle import RawModel
import pytest

# Next to this file, not next to the ik_node imported (under colcon test: the install space's).
HERE = str(URDF_CORPUS / 'external')
IDS = [f'{f}:{b}->{t}' for f, b, t in CORPUS]

# Reached: the tip within these of the target by the raw description's FK.
REACHED_M, REACHED_RAD = 1e-4, 1e-3


def text(name):
    """Return one description's URDF text."""
    with open(corpus_path(name, HERE), encoding='utf-8') as handle:
        return handle.read()


def bounded(chain):
    """Return (lower, upper) with unbounded joints given [-pi, pi]."""
    return (np.where(np.isfinite(chain.lower), chain.lower, -np.pi),
            np.where(np.isfinite(chain.upper), chain.upper, np.pi))


def random_q(chain, rng, margin=0.0):
    """Return joints drawn uniformly inside the limits (shrunk by ``margin`` of each range)."""
    lo, hi = bounded(chain)
    pad = margin * (hi - lo)
    return rng.uniform(lo + pad, hi - pad)


def expected_frames(raw, chain):
    """Return the links a target may be given in, by the rule read from the raw XML.

    A link is a target frame when only fixed joints lie between the base and
    the common ancestor, and every movable joint from there down to it is a
    free joint of the chain or a mimic of one.
    """
    free = {j['name'] for j in raw.joints_between(chain.base_link, chain.tip_link)[1]
            if j['type'] != 'fixed' and j['mimic'] is None}
    out = set()
    for link in raw.links:
        up, down = raw.joints_between(chain.base_link, link)
        if any(j['type'] != 'fixed' for j in up):
            continue
        if all(j['type'] == 'fixed' or (j['mimic'] is None and j['name'] in free)
               or (j['mimic'] is not None and j['mimic'][0] in free) for j in down):
            out.add(link)
    return out


def raw_values(raw, chain, q):
    """Return name -> value of every movable joint the chain drives at joints q."""
    return dict(zip(chain.joint_names, np.asarray(q, dtype=float)))


@pytest.mark.parametrize('name, base, tip', CORPUS, ids=IDS)
def test_the_chain_moves_as_the_raw_description_says(name, base, tip):
    """FK at random joints, and the Jacobian against central differences of the raw FK."""
    xml = text(name)
    chain, raw = chain_from_urdf_string(xml, base, tip), RawModel(xml)
    rng = np.random.default_rng(29)
    h = 1e-6
    for _ in range(10):
        q = random_q(chain, rng)
        expected = raw.pose(base, tip, raw_values(raw, chain, q))
        np.testing.assert_allclose(chain.forward(q), expected, atol=1e-12)
        jac = chain.jacobian(q)
        for k in range(chain.n):
            step = np.zeros(chain.n)
            step[k] = h
            plus = raw.pose(base, tip, raw_values(raw, chain, q + step))
            minus = raw.pose(base, tip, raw_values(raw, chain, q - step))
            linear = (plus[:3, 3] - minus[:3, 3]) / (2 * h)
            spin = (plus[:3, :3] @ minus[:3, :3].T - minus[:3, :3] @ plus[:3, :3].T) / (4 * h)
            angular = np.array([spin[2, 1], spin[0, 2], spin[1, 0]])
            np.testing.assert_allclose(jac[:, k], np.concatenate([linear, angular]), atol=1e-7)


@pytest.mark.parametrize('name, base, tip', CORPUS, ids=IDS)
def test_a_link_is_a_target_frame_exactly_when_the_chain_drives_it(name, base, tip):
    """The frames offered are the raw rule's; each resolves to the raw pose; the rest say why."""
    xml = text(name)
    chain, raw = chain_from_urdf_string(xml, base, tip), RawModel(xml)
    frames = link_frames(xml, chain)
    expected = expected_frames(raw, chain)
    assert set(frames.names()) | {base} == expected
    assert set(frames.refused()) == set(raw.links) - expected
    for reason in frames.refused().values():
        assert reason.startswith('joint ') and 'moves it' in reason, reason
    rng = np.random.default_rng(7)
    for _ in range(3):
        q = random_q(chain, rng)
        for link in sorted(expected):
            np.testing.assert_allclose(frames.pose(link, q),
                                       raw.pose(base, link, raw_values(raw, chain, q)),
                                       atol=1e-12, err_msg=link)


@pytest.mark.parametrize('name, base, tip', CORPUS, ids=IDS)
def test_the_tracker_reaches_random_reachable_targets_within_the_limits(name, base, tip):
    """Three targets (tip poses of random joints near the last) reached, commands in limits."""
    xml = text(name)
    chain, raw = chain_from_urdf_string(xml, base, tip), RawModel(xml)
    rng = np.random.default_rng(3)
    q = random_q(chain, rng, margin=0.2)
    solver = make_solver(chain, 'auto', budget_s=0.02)
    tracker = MotionTracker(chain, solver, TrackerConfig(), q, time=0.0)
    t, dt = 0.0, 0.01
    for _ in range(3):
        lo, hi = bounded(chain)
        goal = np.clip(q + rng.uniform(-0.4, 0.4, chain.n), lo + 0.05, hi - 0.05)
        target = raw.pose(base, tip, raw_values(raw, chain, goal))
        tracker.add_target(t, target)
        for _ in range(2000):
            t += dt
            command = tracker.command(t)
            assert np.all(np.isfinite(command.q)) and chain.within_limits(command.q, 1e-12)
            assert np.all(np.abs(command.v) <= chain.velocity * (1 + 1e-9))
            tip_pose = raw.pose(base, tip, raw_values(raw, chain, command.q))
            rotation = tip_pose[:3, :3].T @ target[:3, :3]
            angle = np.arccos(np.clip((np.trace(rotation) - 1) / 2, -1.0, 1.0))
            if np.linalg.norm(tip_pose[:3, 3] - target[:3, 3]) <= REACHED_M and \
                    angle <= REACHED_RAD and not np.any(command.v):
                break
        else:
            pytest.fail(f'{name}: target not reached in 20 s (tip {tip_pose[:3, 3]}, target '
                        f'{target[:3, 3]})')
        q = command.q


def corpus_node(xml, base, tip):
    """Run IKNode in this process on a description (numpy backend), with a client."""
    from ros_helpers import in_process_ik_node
    return in_process_ik_node({'robot_description': xml, 'base_link': base, 'tip_link': tip,
                               'target_queue_depth': 200},   # one burst: a target per frame
                              numpy_backend=True)


@pytest.mark.integration
@pytest.mark.parametrize('name, base, tip', CORPUS, ids=IDS)
def test_the_node_starts_takes_targets_in_every_target_frame_and_reaches_one(name, base, tip):
    """The node on the description: every resolvable frame accepted, a refused one counted.

    Targets go over DDS from a client in the same process: one in each
    target frame (the same base-frame pose, expressed in that link at the
    node's start joints), one in a refused link if there is one, and last a
    reachable target in the root frame, followed until the published
    joint_states put the tip on it by the raw FK (the base when a joint
    moves the base against the root).
    """
    from geometry_msgs.msg import PoseStamped
    from ik_node.ros.conversions import matrix_to_pose
    from ros_helpers import wait_until
    from sensor_msgs.msg import JointState
    xml = text(name)
    raw = RawModel(xml)
    with corpus_node(xml, base, tip) as (node, client, spin_once):
        chain = node.chain
        states = []
        client.create_subscription(JointState, 'joint_states', states.append, 50)
        publisher = client.create_publisher(PoseStamped, 'ik_node/target_pose', 50)
        assert wait_until(lambda: states and publisher.get_subscription_count(), 10.0,
                          spin_once)
        q0 = np.array(states[-1].position[:chain.n])
        values = raw_values(raw, chain, q0)
        target = raw.pose(base, tip, values)

        def send(frame, pose):
            msg = PoseStamped(pose=matrix_to_pose(pose))
            msg.header.frame_id = frame
            publisher.publish(msg)
        frames = sorted(expected_frames(raw, chain))
        root = raw.ancestors(base)[-1]
        root = root if root in frames else base    # a torso base moves against the root
        for frame in frames:
            send(frame, np.linalg.inv(raw.pose(base, frame, values)) @ target)
        refused = sorted(set(raw.links) - set(frames))
        if refused:
            send(refused[0], np.eye(4))
        rng = np.random.default_rng(11)
        lo, hi = bounded(chain)
        goal = np.clip(q0 + rng.uniform(-0.3, 0.3, chain.n), lo + 0.05, hi - 0.05)
        goal_in_root = raw.pose(root, tip, raw_values(raw, chain, goal))
        send(root, goal_in_root)
        expected_rejected = {'wrong_frame': 1} if refused else {}
        assert wait_until(lambda: node.targets_received == len(frames) + 1, 10.0, spin_once), \
            (node.targets_received, len(frames), dict(node.rejected))
        assert wait_until(lambda: dict(node.rejected) == expected_rejected, 5.0, spin_once), \
            dict(node.rejected)
        goal_in_base = raw.pose(base, tip, raw_values(raw, chain, goal))

        # Fewer than six joints: the node's task is the position by default (issue 52).
        full_pose = chain.n >= 6

        def arrived():
            """Return True once the last joint state puts the tip on the goal (raw FK)."""
            pose = raw.pose(base, tip, raw_values(raw, chain, states[-1].position[:chain.n]))
            rotation = pose[:3, :3].T @ goal_in_base[:3, :3]
            angle = np.arccos(np.clip((np.trace(rotation) - 1) / 2, -1.0, 1.0))
            return np.linalg.norm(pose[:3, 3] - goal_in_base[:3, 3]) <= REACHED_M and \
                (angle <= REACHED_RAD or not full_pose)
        assert wait_until(arrived, 30.0, spin_once), states[-1]
        for msg in states:
            q = np.array(msg.position[:chain.n])
            assert np.all(np.isfinite(q)) and chain.within_limits(q, 1e-12)
            assert list(msg.name[:chain.n]) == chain.joint_names
            mimics = chain.mimics
            assert list(msg.name[chain.n:]) == [m[0] for m in mimics]
            for (mimic_name, leader, _, _), value in zip(mimics, msg.position[chain.n:]):
                xml_mimic = next(j for j in raw.joints.values() if j['name'] == mimic_name)
                assert value == pytest.approx(raw.joint_value(xml_mimic, values | dict(
                    zip(chain.joint_names, q))), abs=1e-12)
