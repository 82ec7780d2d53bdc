# SPDX-License-Identifier: Apache-2.0

"""The node's robot model: loaded from the parameters or the robot_description topic.

:class:`ModelLoader` reads a URDF (or xacro) into a chain and its link
frames, builds the solver, the motion session (or carries the session over
to a new model of the same joints: no jump, no seam), the command encoder
and the collision model, and says what it loaded at start-up. It sets the
node's ``session``, ``chain``, ``frames``, ``command_order`` and
``encoder``. A bad model at start-up ends the node (StartupError, one line);
a later one is refused with the reason and the old one kept.
"""

import gc
from typing import Union

from ik_node.core.errors import IKError
from ik_node.core.ik.stacked import JointUnion
from ik_node.core.model.chain import Chain
from ik_node.core.model.frames import LinkFrames, UnionFrames
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.session import MotionSession
from ik_node.core.motion.stream import controller_lead
from ik_node.core.motion.tracker import MotionTracker
from ik_node.description.geometry import collision_model, read_obstacles_file, read_srdf_pairs
from ik_node.description.urdf import chain_from_urdf_string, link_frames, read_urdf_file
from ik_node.ros.collision import coal_available
from ik_node.ros.diagnostics import model_summary
from ik_node.ros.outputs import ENCODERS
from ik_node.ros.parameters import initial_positions, joint_order, StartupError, task_for
from std_msgs.msg import String

# How long start-up waits for the kernels (a warm cache loads in ~0.7 s):
# longer, the node starts on the numpy backend and switches later.
STARTUP_COMPILE_WAIT_S = 5.0


class ModelLoader:
    """The robot model of an IKNode (module docstring).

    Args:
        node: the IKNode (parameters, logger, clock, solver supply, worker,
            routed parameters, collision support, handles).

    """

    def __init__(self, node):
        """Decide once whether collision is checked (StartupError: asked for without coal)."""
        self._node = node
        self._collision_checks = self.collision_wanted()

    def collision_wanted(self) -> bool:
        """Return whether collision is checked (StartupError: asked for without coal)."""
        node = self._node
        if not node.get_parameter('collision_checking').value:
            return False
        if coal_available():
            return True
        for name in ('obstacles_file', 'srdf_path'):
            if node.get_parameter(name).value:
                raise StartupError(f'{name} is set, but coal is not installed (pip install '
                                   f'coal, or ros-<distro>-coal): collision cannot be checked')
        node.get_logger().warning('coal is not installed: collision is not checked '
                                  '(kinematics and joint limits only)')
        return False

    def load_from_parameters(self) -> None:
        """Load the model the parameters give (robot_description, else urdf_path), if any.

        Raises:
            StartupError: base_link or tip_link missing, or the model refused.

        """
        node = self._node
        text = node.get_parameter('robot_description').value
        path = node.get_parameter('urdf_path').value
        base = node.get_parameter('base_link').value
        tip = node.get_parameter('tip_link').value
        if not (text or path):
            return
        if not base or not tip:
            raise StartupError('parameters base_link and tip_link must both be set')
        try:
            self.use(text if text else read_urdf_file(
                path, node.params.value('xacro_arguments', {}) or ()))
        except IKError as exc:
            raise StartupError(f'robot model: {exc}') from None

    def on_description(self, msg: String) -> None:
        """Use a model from the robot_description topic; a refused one is logged, the old kept."""
        node = self._node
        try:
            self.use(msg.data)
        except (IKError, StartupError) as exc:
            node.rejected['robot_description'] += 1
            node.get_logger().error(f'robot_description refused, keeping the old model: {exc}')

    def budget(self) -> float:
        """Return the latency budget, s (none for joint_states: no controller reads them)."""
        node = self._node
        if node.output == 'joint_states':
            return 0.0
        return node.get_parameter('command_latency_budget').value

    def lead(self) -> float:
        """Return how far ahead of the clock commands are committed, s.

        What a controller reads: committed the budget and three periods ahead
        (see "What the controller gets"); joint_states (nothing reads them
        later than now): two periods.
        """
        node = self._node
        if node.output == 'joint_states':
            return 2.0 * node.period
        return controller_lead(node.period, self.budget())

    def use(self, text: str):
        """Track with the model of URDF ``text`` (IKError, StartupError: refused; old one kept)."""
        node = self._node
        chain = chain_from_urdf_string(text, node.get_parameter('base_link').value,
                                       node.get_parameter('tip_link').value)
        frames = link_frames(text, chain)
        order = joint_order(chain, node.params.value('command_joint_order', {}))
        q0 = initial_positions(chain, node.params.value('initial_positions', {}))
        task, task_line = task_for(chain, node.get_parameter('task').value,
                                   node.params.value('tool_axis', {}))
        # At start-up, wait for a warm cache (the tracker is built on numba).
        solver = node.solvers.ready(chain, node.get_parameter('solver').value, q0,
                                    STARTUP_COMPILE_WAIT_S if node.session is None else 0.0,
                                    task)
        now = node.now_s()
        feedback = None if not node.feedback_topic else FeedbackPolicy(
            chain.joint_names, chain.lower, chain.upper, chain.velocity,
            *node.params.feedback_settings())
        if node.session is None:
            tracker = MotionTracker(chain, solver, node.params.config(), q0, now,
                                    backend=node.solvers.tracker_backend(), worker=node.worker)
            # Warm up: the first call of each compiled kernel costs ~0.2 s
            # (loading it from the cache); pay that now, not in the first tick.
            solver.warm_up(q0)
            node.session = MotionSession(tracker, node.period, self.lead(),
                                         node.params.jerk(),
                                         budget_s=self.budget(), feedback=feedback,
                                         own_robot=node.output == 'joint_states')
        else:   # the same joints carry on from where they are: no jump, no seam
            node.session.use_chain(chain, solver, q0, now, node.params.jerk(), feedback)
            solver.warm_up(q0)
        node.chain, node.frames, node.command_order = chain, frames, order
        node.encoder = ENCODERS[node.output](chain.joint_names, order, node.epoch_ns,
                                             node.get_clock().clock_type, chain.mimics)
        for line in model_summary(chain, solver, node.get_parameter('solver').value, frames):
            node.get_logger().info(line)
        node.get_logger().info(task_line)
        self.use_collision(text, chain, frames, q0)
        if node.handles is not None:
            node.handles.use_model()
        # Everything built so far lives as long as the node: keep it out of
        # the garbage collector's full passes (~40 ms each, measured).
        gc.freeze()

    def use_collision(self, text: str, chain: Union[Chain, JointUnion],
                      frames: Union[LinkFrames, UnionFrames], q0) -> None:
        """Build the collision model of a new robot model and check the session's steps with it.

        ``chain``: a Chain, or the JointUnion of several end effectors (``frames``
        then their UnionFrames).

        At start-up a bad SRDF or obstacles file ends the node (StartupError);
        for a later model, the old world is kept.
        """
        node = self._node
        if not self._collision_checks:
            return
        first = not node.collision.checking
        try:
            srdf = node.get_parameter('srdf_path').value
            disabled = read_srdf_pairs(srdf) if srdf else []
            # On numpy until the background compile is done (as the tracker):
            # numba compiles at a kernel's first call, which is in a tick.
            model, notes = collision_model(text, chain, frames, disabled=disabled, home=q0,
                                           backend=node.solvers.tracker_backend())
            if not model.bodies:
                node.get_logger().warning('collision_checking is on, but no link of the chain '
                                          'has <collision> geometry that could be read: '
                                          'nothing is checked')
            path = node.get_parameter('obstacles_file').value
            obstacles = (read_obstacles_file(path, frames, chain) if path and first
                         else None)
        except IKError as exc:
            if first:
                raise StartupError(f'collision: {exc}') from None
            raise
        node.collision.use_model(node.session, model, chain, frames,
                                 node.get_parameter('collision_margin').value)
        if obstacles is not None:
            node.collision.set_file_obstacles(obstacles)
        for line in notes:
            # One call site per severity: rclpy refuses a call site whose severity changes.
            if line.warn:
                node.get_logger().warning(line)
            else:
                node.get_logger().info(line)
        node.get_logger().info(
            f'collision: {len(model.bodies)} links with geometry, {len(model.pairs)} pairs '
            f'checked, {len(model.obstacles)} obstacles, margin '
            f'{node.get_parameter("collision_margin").value:g} m')
