"""Golden test: the PolicyRunner on real MuJoCo states against a from-the-doc reimplementation.

A MuJoCo rollout of the G1 (ASAP's scene_29dof.xml, 200 Hz physics, PD law on the targets)
is driven by the CR7_level1 actor through :class:`PolicyRunner` for 100 control steps. The
observations it built must equal those of the straightforward implementation below, written
from docs/asap-reference.md without any code shared with the builder, and its actions must
equal ONNX Runtime's own output on those observations.
"""

from __future__ import annotations

from collections import deque

import mujoco
import numpy as np
import onnxruntime as ort
import pytest

from asap_ros.config.paths import policies_dir
from asap_ros.core.state import RobotState
from asap_ros.runtime.policies import load_policy_runner

CONTROL_DT = 0.02
PHYSICS_DT = 0.005
STEPS = 100

# --- reference implementation, from the reference doc only -----------------------------------
DRIVEN = list(range(19)) + [22, 23, 24, 25]
DEFAULT_Q = np.zeros(29)
DEFAULT_Q[[0, 6]] = -0.1  # hip pitch
DEFAULT_Q[[3, 9]] = 0.3  # knee
DEFAULT_Q[[4, 10]] = -0.2  # ankle pitch
CR7_FRAMES, CR7_FPS = 119, 30.0  # shipped CR7 clip (checked in test_clip.py)


def reference_gravity(quat_wxyz: np.ndarray) -> np.ndarray:
    """(0, 0, -1) rotated into the body frame: v' = v(2w^2-1) - 2w (u x v) + 2u (u.v)."""
    w, u = quat_wxyz[0], quat_wxyz[1:]
    v = np.array([0.0, 0.0, -1.0])
    return v * (2.0 * w * w - 1.0) - np.cross(u, v) * w * 2.0 + u * np.dot(u, v) * 2.0


class ReferenceObservation:
    """The table of the reference doc, term by term, with a deque per history term."""

    def __init__(self):
        self.history = {
            name: deque([np.zeros(dim)] * 4, maxlen=4)
            for name, dim in [
                ("actions", 23),
                ("base_ang_vel", 3),
                ("dof_pos", 23),
                ("dof_vel", 23),
                ("projected_gravity", 3),
                ("ref_motion_phase", 1),
            ]
        }

    def __call__(self, k: int, q, dq, quat, gyro, previous_action) -> np.ndarray:
        terms = {
            "actions": np.asarray(previous_action, dtype=np.float64),
            "base_ang_vel": gyro * 0.25,
            "dof_pos": q[DRIVEN] - DEFAULT_Q[DRIVEN],
            "dof_vel": dq[DRIVEN] * 0.05,
            "projected_gravity": reference_gravity(quat),
            "ref_motion_phase": np.array([((k + 1) * CONTROL_DT + 0.0) / ((CR7_FRAMES - 1) / CR7_FPS)]),
        }
        history_actor = np.concatenate([np.concatenate(list(self.history[n])) for n in sorted(self.history)])
        obs = np.concatenate(
            [
                terms["actions"],
                terms["base_ang_vel"],
                terms["dof_pos"],
                terms["dof_vel"],
                history_actor,
                terms["projected_gravity"],
                terms["ref_motion_phase"],
            ]
        ).astype(np.float32)
        for name in self.history:  # after the observation is built; newest first
            self.history[name].appendleft(terms[name])  # stored scaled, float64 as in ASAP
        return obs


# --- the rollout ----------------------------------------------------------------------------
def robot_state(data: mujoco.MjData) -> RobotState:
    return RobotState(
        q=data.qpos[7:36].copy(),
        dq=data.qvel[6:35].copy(),
        quat_wxyz=data.qpos[3:7].copy(),
        gyro=data.qvel[3:6].copy(),  # free joint angular velocity: body frame
    )


@pytest.fixture(scope="module")
def rollout(assets):
    runner = load_policy_runner(policies_dir() / "CR7_level1.yaml")
    model = mujoco.MjModel.from_xml_path(str(assets / "robots" / "g1" / "scene_29dof.xml"))
    model.opt.timestep = PHYSICS_DT
    data = mujoco.MjData(model)
    data.qpos[7:36] = runner.start_pose
    mujoco.mj_forward(model, data)
    runner.reset()
    states, outputs = [], []
    for _ in range(STEPS):
        state = robot_state(data)
        out = runner.step(state)
        states.append(state)
        outputs.append(out)
        for _ in range(round(CONTROL_DT / PHYSICS_DT)):
            tau = runner.kp * (out.q_target - data.qpos[7:36]) - runner.kd * data.qvel[6:35]
            data.ctrl[:] = np.clip(tau, -runner.robot.tau_limit, runner.robot.tau_limit)
            mujoco.mj_step(model, data)
    return runner, states, outputs


def test_rollout_is_a_real_motion(rollout):
    _, states, outputs = rollout
    q = np.array([s.q for s in states])
    gravity_z = np.array([o.obs[378] for o in outputs])
    assert np.ptp(q, axis=0).max() > 0.05  # the joints moved
    assert np.ptp(gravity_z) > 1e-4  # the base tilted
    assert np.abs(np.array([s.gyro for s in states])).max() > 1e-3


def test_observations_equal_reference(rollout):
    _, states, outputs = rollout
    reference = ReferenceObservation()
    previous = np.zeros(23, dtype=np.float32)
    for k, (state, out) in enumerate(zip(states, outputs)):
        expected = reference(k, state.q, state.dq, state.quat_wxyz, state.gyro, previous)
        assert out.obs.dtype == np.float32 and out.obs.shape == (380,)
        np.testing.assert_array_equal(out.obs, expected, err_msg=f"control step {k}")
        assert out.tick == k and out.phase == pytest.approx(float(expected[379]))
        previous = out.raw_action


def test_actions_equal_onnx_runtime(rollout, assets):
    runner, _, outputs = rollout
    session = ort.InferenceSession(str(assets / "policies/mimic/CR7_level1/model_191500.onnx"))
    for out in outputs:
        action = session.run(["action"], {"actor_obs": out.obs[None, :]})[0][0]
        np.testing.assert_array_equal(out.raw_action, np.clip(action, -100, 100))
        expected_target = DEFAULT_Q.copy()
        expected_target[[19, 20, 21, 26, 27, 28]] = runner.start_pose[[19, 20, 21, 26, 27, 28]]
        expected_target[DRIVEN] = 0.25 * out.raw_action.astype(np.float64) + DEFAULT_Q[DRIVEN]
        expected_target = np.clip(expected_target, runner.robot.q_lower, runner.robot.q_upper)
        np.testing.assert_array_equal(out.q_target, expected_target)


def test_reset_replays_the_first_step(rollout):
    runner, states, outputs = rollout
    runner.reset()
    again = runner.step(states[0])
    np.testing.assert_array_equal(again.obs, outputs[0].obs)
    np.testing.assert_array_equal(again.raw_action, outputs[0].raw_action)
    assert again.tick == 0
