# SPDX-License-Identifier: Apache-2.0
"""The node's diagnostics: key/values from snapshots of the tracker, the stream and the feedback.

Plain functions of what they are given (no node, no publisher), so that
what ``/diagnostics`` says is read from one place: the tracker's
:class:`ik_node.core.motion.tracker.TrackerStatus`, the command stream's
counters, the feedback policy's. Every value is a string, as
diagnostic_msgs/KeyValue carries it.
"""

from typing import Dict, List, Optional, Tuple

from diagnostic_msgs.msg import DiagnosticStatus
from ik_node.core.motion.feedback import FeedbackPolicy
from ik_node.core.motion.stream import CommandStream
from ik_node.core.motion.tracker import TrackerStatus


def level_and_message(status: Optional[TrackerStatus], stale: str) -> Tuple[bytes, str]:
    """Return (level, message): no model, stale feedback, else the arm's arrival verdict.

    OK only while the arm has arrived or is arriving; WARN with the reason
    otherwise (held, blocked, unreachable, no path: ik_node.core.motion.arrival).
    """
    if status is None:
        return DiagnosticStatus.WARN, 'waiting for the robot model'
    if stale:
        return DiagnosticStatus.WARN, stale
    arrival = status.arrival
    level = DiagnosticStatus.OK if arrival.verdict.ok else DiagnosticStatus.WARN
    return level, f'{arrival.verdict.value}: {arrival.reason}'


def tracker_values(status: TrackerStatus) -> Dict[str, str]:
    """Diagnostics of the tracker: the arm against its target, solver, results, counters."""
    budget = status.ik_budget_s
    arrival = status.arrival
    values = {'arrival': arrival.verdict.value, 'arrival_reason': arrival.reason,
              'distance_to_target_m': f'{arrival.distance_m:.4g}',
              'angle_to_target_rad': f'{arrival.angle_rad:.4g}',
              'approach_m_s': f'{arrival.approach_m_s:.3g}',
              'time_to_go_s': f'{arrival.time_to_go_s:.3g}',
              'solver': status.solver, 'backend': status.backend, 'task': status.task,
              'mode': status.mode.value,
              'twist_timeouts': str(status.twist_timeouts),
              'twists_scaled_to_speed_limits': str(status.twists_scaled),
              'ik_timeout_s': 'none (closed form)' if budget is None else f'{budget:.6g}'}
    target, res = status.target_result, status.last_result
    if target is not None:
        values.update({'target_reachable': str(target.success).lower(),
                       'target_reason': target.reason,
                       'target_in_collision': target.in_collision or 'no'})
    if res is not None:   # the solver's own residuals (the arm's distance: above)
        values.update({'last_solve_succeeded': str(res.success).lower(),
                       'last_solve_position_error_m': f'{res.position_error:.3g}',
                       'last_solve_orientation_error_rad': f'{res.orientation_error:.3g}',
                       'solve_time_s': f'{status.last_solve_s:.3g}'})
    if status.solve_time_percentiles is not None:
        p50, p99, top = status.solve_time_percentiles
        values.update({'solve_time_p50_s': f'{p50:.3g}', 'solve_time_p99_s': f'{p99:.3g}',
                       'solve_time_max_s': f'{top:.3g}'})
    values.update({'targets_clamped_to_workspace': str(status.targets_clamped),
                   'keys_retimed': str(status.keys_retimed),
                   'keys_dropped': str(status.keys_dropped),
                   'keys_duplicate': str(status.keys_duplicate)})
    return values


def stream_values(stream: CommandStream, late_ticks: int, jumps_back: int,
                  jumps_forward: int) -> Dict[str, str]:
    """Diagnostics of the command stream (lead, jerk window, tails, stalls) and the clock."""
    return {'command_lead_s': f'{stream.lead_s:.3g}',
            'ticks_late': str(late_ticks),
            'clock_jumps_back': str(jumps_back),
            'clock_jumps_forward': str(jumps_forward),
            'jerk_smoothing_delay_s': f'{stream.delay_s:.3g}',
            'late_ticks_braked': str(stream.tails_adopted),
            'array_stalls': str(stream.stalls)}


def feedback_problem(topic: str, policy: Optional[FeedbackPolicy], now: float) -> str:
    """Return why the node holds for want of feedback at ``now`` (s), '' when it does not."""
    if policy is None:
        return ''
    fb = policy.filter
    if fb.time is None:
        return f'waiting for the joint states on {topic}: no command yet'
    age = now - fb.time
    if age > policy.timeout:
        return f'feedback on {topic} is stale ({age:.3f} s old): holding, no command'
    return ''


def feedback_values(topic: str, policy: Optional[FeedbackPolicy], now: float) -> Dict[str, str]:
    """Diagnostics of the feedback at ``now`` (s): topic, state, age, re-syncs, rejections."""
    if not topic:
        return {'feedback': 'off (the node publishes joint_states itself)'}
    stale = feedback_problem(topic, policy, now)
    values = {'feedback': f"{'stale' if stale else 'ok'} on {topic}",
              'feedback_resyncs': str(0 if policy is None else policy.resyncs)}
    if policy is not None:
        fb = policy.filter
        values['feedback_rejected'] = str(sum(fb.rejected.values()))
        values.update({f'feedback_rejected_{k}': str(v) for k, v in sorted(fb.rejected.items())})
        if fb.time is not None:
            values['feedback_age_s'] = f'{now - fb.time:.3g}'
    return values


def model_summary(chain, solver, requested: str, frames) -> List[str]:
    """Return the start-up log's lines on a loaded model (plain text, one fact a line).

    Args:
        chain: the core Chain.
        solver: the IK solver built for it (``name``, ``backend``, ``model_note``).
        requested: the ``solver`` parameter ('auto', 'analytic' or 'jacobian').
        frames: the model's LinkFrames.

    """
    joints = ', '.join(chain.joint_names)
    lines = [f'model: chain {chain.base_link} -> {chain.tip_link}, {chain.n} joints it '
             f'controls: {joints}']
    if chain.mimics:
        lines.append('model: mimic joints in the chain (follow their leaders, reported in '
                     'joint_states, not commanded): '
                     + ', '.join(f'{name} = {k:g} * {chain.joint_names[i]} + {c:g}'
                                 for name, i, k, c in chain.mimics))
    if solver.name == 'analytic':
        why = f'a closed form fits: {solver.model_note}'
    elif requested == 'jacobian':
        why = 'asked for by the solver parameter'
    else:
        why = solver.model_note or 'no closed form for this chain'
    lines.append(f'model: solver {solver.name} ({solver.backend}), solver:={requested}; {why}')
    lines.append(f'model: {frames.summary()}')
    return lines
