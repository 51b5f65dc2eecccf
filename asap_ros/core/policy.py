"""One policy step: observation -> actor -> clipped joint targets (the actor's unclipped output
is kept for the controller's check).

The phase is tick-counted as in training: at control step ``k`` (0 first),
``phase = ((k + 1) * control_dt + start) / clip_duration_s``. The runner reports ``done`` on
the step after which the next phase would reach 1, so every action it returns was computed
for a phase below 1 (ASAP switches away as soon as the phase reaches 1). A standing actor
(no clip, infinite duration) stays at phase 0 and is never done.

The joints the actor does not drive get the spec's hold pose (``start_pose``), or the
``reference`` targets passed to :meth:`PolicyRunner.step` (a standing actor's upper body while
the controller blends it; the actor observes them as ``ref_upper_dof_pos``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from asap_ros.core.observation import ObservationBuilder
from asap_ros.core.policy_spec import PolicySpec
from asap_ros.core.robot import RobotModel
from asap_ros.core.state import RobotState


@dataclass
class PolicyOutput:
    """What one policy step computed (all arrays are fresh copies)."""

    tick: int
    """Control step ``k`` within the motion (0 first)."""
    phase: float
    """``ref_motion_phase`` used in this observation."""
    obs: np.ndarray
    """float32 [obs_dim]: exactly what the actor saw."""
    raw_action: np.ndarray
    """float32 [n_driven]: actor output clipped to +-clip (what goes into the history)."""
    q_target: np.ndarray
    """float64 [29] motor order: driven = scale * a + default, clipped to the position limits;
    the other joints hold the spec's PREPARE pose (or the reference passed to the step)."""
    done: bool
    """The motion is over: the next step's phase would be >= 1."""
    actor_output: np.ndarray | None = None
    """float32 [n_driven]: what the actor returned, before clipping (checked by the controller:
    a non-finite or out-of-range output is a fault, never a clipped target). ``None`` for a
    step rebuilt from a recording."""


Actor = Callable[[np.ndarray], np.ndarray]
"""An actor: float32 observation [obs_dim] -> action [n_driven] (e.g. :class:`asap_ros.runtime.actor.OnnxActor`)."""


class PolicyRunner:
    """Runs one actor for one motion (or one stretch of standing); :meth:`reset` before each run.

    ``actor`` is any ``actor(obs) -> action`` callable; :func:`asap_ros.runtime.policies.load_policy_runner`
    builds a runner from a spec file with its ONNX actor.
    """

    def __init__(self, spec: PolicySpec, robot: RobotModel, actor: Actor):
        self.spec = spec
        self.robot = robot
        self.actor = actor
        self.kp = spec.kp
        self.kd = spec.kd
        self.start_pose = spec.prepare_pose
        self._builder = ObservationBuilder(spec)
        self._driven = spec.driven_indices
        self._default_driven = spec.default_q[spec.driven_indices]
        self._action_scale = np.float64(spec.action_scale)  # scale in float64, like ASAP
        self._last_action = np.zeros(len(spec.driven_joints), dtype=np.float32)
        self._driven_targets = np.zeros(len(spec.driven_joints))
        self._tick = 0

    @property
    def tick(self) -> int:
        """The control step the next :meth:`step` will run."""
        return self._tick

    def phase_at(self, tick: int) -> float:
        """``ref_motion_phase`` of control step ``tick``."""
        spec = self.spec
        return ((tick + 1) * spec.control_dt + spec.phase_start) / spec.clip_duration_s

    def reset(self) -> None:
        """Zero the history and the previous action; the next step is tick 0."""
        self._builder.reset()
        self._last_action[:] = 0.0
        self._tick = 0

    def step(self, state: RobotState, reference: np.ndarray | None = None) -> PolicyOutput:
        """Run the actor once on ``state`` and advance the phase by one control step.

        ``reference``: [29] motor-order targets for the joints the actor does not drive
        (default: ``start_pose``); only the non-driven entries are used.
        """
        tick, phase = self._tick, self.phase_at(self._tick)
        hold = self.start_pose if reference is None else reference
        obs = self._builder.build(state, self._last_action, phase, hold)
        action = self._last_action
        actor_output = self.actor(obs)
        np.minimum(actor_output, self.spec.action_clip, out=action)  # np.clip is slower
        np.maximum(action, -self.spec.action_clip, out=action)
        driven = self._driven_targets
        np.multiply(action, self._action_scale, out=driven)
        np.add(driven, self._default_driven, out=driven)
        q_target = np.array(hold, dtype=np.float64)
        q_target[self._driven] = driven
        self.robot.clip_targets(q_target, out=q_target)
        self._tick += 1
        return PolicyOutput(
            tick=tick,
            phase=phase,
            obs=obs.copy(),
            raw_action=action.copy(),
            q_target=q_target,
            done=self.phase_at(self._tick) >= 1.0,
            actor_output=actor_output,
        )
