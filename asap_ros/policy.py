"""One motion-tracking policy step: observation -> actor -> clipped joint targets.

The phase is tick-counted as in training: at control step ``k`` (0 first),
``phase = ((k + 1) * control_dt + start) / clip_duration_s``. The runner reports ``done`` on
the step after which the next phase would reach 1, so every action it returns was computed
for a phase below 1 (ASAP switches away as soon as the phase reaches 1).
"""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import numpy as np

from asap_ros.actor import OnnxActor
from asap_ros.observation import ObservationBuilder
from asap_ros.policy_spec import PolicySpec, load_policy_spec
from asap_ros.robot import RobotModel, load_robot_model
from asap_ros.state import RobotState


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
    the other joints hold the spec's PREPARE pose."""
    done: bool
    """The motion is over: the next step's phase would be >= 1."""


class PolicyRunner:
    """Runs one actor for one motion; :meth:`reset` before each run."""

    def __init__(self, spec: PolicySpec, robot: RobotModel, actor: OnnxActor):
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
        self._tick = 0

    @classmethod
    def from_spec_file(
        cls, path: str | Path, robot: RobotModel | None = None, assets_dir: str | Path | None = None
    ) -> PolicyRunner:
        """Load and check the spec, its actor and its clip."""
        robot = robot or load_robot_model()
        spec = load_policy_spec(path, robot, assets_dir)
        return cls(spec, robot, OnnxActor(spec.actor_path, spec))

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

    def step(self, state: RobotState) -> PolicyOutput:
        """Run the actor once on ``state`` and advance the phase by one control step."""
        tick, phase = self._tick, self.phase_at(self._tick)
        obs = self._builder.build(state, self._last_action, phase)
        action = self._last_action
        np.minimum(self.actor(obs), self.spec.action_clip, out=action)  # np.clip is slower
        np.maximum(action, -self.spec.action_clip, out=action)
        q_target = self.start_pose.copy()
        q_target[self._driven] = self._action_scale * action + self._default_driven
        np.minimum(q_target, self.robot.q_upper, out=q_target)
        np.maximum(q_target, self.robot.q_lower, out=q_target)
        self._tick += 1
        return PolicyOutput(
            tick=tick,
            phase=phase,
            obs=obs.copy(),
            raw_action=action.copy(),
            q_target=q_target,
            done=self.phase_at(self._tick) >= 1.0,
        )
