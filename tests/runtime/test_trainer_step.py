"""The trainer step on the real files: BeyondMimic's command is the model's own reference of the
previous ``time_step``; holosoma's observation of a recorded (lock-step simulated) state equals the
one written out by hand from its documented layout."""

from __future__ import annotations

import math

import numpy as np
import pytest

from asap_ros.commands.actor_rollout import ActorSession
from asap_ros.config.actor_import import import_actor, write_spec
from asap_ros.config.actor_model import open_actor_file
from asap_ros.config.actor_spec import load_actor_spec
from asap_ros.config.robot import load_robot_model
from asap_ros.runtime.trainer_step import TrainerStep, start_pose

ROBOT = load_robot_model()


def _contract(model, tmp_path):
    out = tmp_path / f"{model.stem}.yaml"
    write_spec(import_actor(model, ROBOT), out)
    return load_actor_spec(out, ROBOT)


def _recorded(contract, steps: int, command=(0.5, 0.0, 0.0)):
    """States of a lock-step run of the actor (real MuJoCo), and the stepper that ran it."""
    session = ActorSession("nominal", contract.control_dt)
    session.blend(start_pose(contract, ROBOT), 1.0, contract.kp, contract.kd)
    session.sim.band("band_release")
    stepper = TrainerStep(contract, ROBOT)
    stepper.reset(session.sim.read_state())
    stepper.set_command(command)
    states = []
    for _ in range(steps):
        states.append(session.sim.read_state())
        session.send(stepper.step(states[-1]).q_target, contract.kp, contract.kd)
    return states, stepper


def test_beyondmimic_command_is_the_previous_reference(trainer_actors, tmp_path):
    model = trainer_actors / "beyondmimic" / "Jump_wose.onnx"
    contract = _contract(model, tmp_path)
    reference = open_actor_file(model)
    states, _ = _recorded(contract, 3)
    stepper = TrainerStep(contract, ROBOT)
    stepper.reset(states[0])
    outputs = [stepper.step(state) for state in states]
    for k, output in enumerate(outputs):
        joint_pos, joint_vel = reference.reference(max(k - 1, 0))[:2]
        np.testing.assert_array_equal(output.obs[:29], joint_pos.astype(np.float32))
        np.testing.assert_array_equal(output.obs[29:58], joint_vel.astype(np.float32))
        assert output.time_step == k
    assert not np.array_equal(outputs[2].obs[:29], outputs[1].obs[:29])  # the motion moves on


def test_holosoma_recorded_state_golden(trainer_actors, tmp_path):
    contract = _contract(trainer_actors / "holosoma" / "ppo_g1_29dof.onnx", tmp_path)
    states, stepper = _recorded(contract, 40)
    state = states[-1]
    last = stepper.last_action.copy()
    output = stepper.step(state)
    # by hand, from holosoma's loco_g1_29dof layout (alphabetical terms), joints in SDK order
    w, x, y, z = state.quat_wxyz
    gravity = [2 * (w * y - x * z), -2 * (w * x + y * z), 1 - 2 * (w * w + z * z)]
    phase = stepper.phase  # advanced before this step's observation: 41 steps of 2 pi 0.02 / 1 s
    assert phase[0] == pytest.approx(math.fmod(41 * 2 * math.pi * 0.02 + math.pi, 2 * math.pi) - math.pi)
    default = [-0.312, 0, 0, 0.669, -0.363, 0] * 2 + [0, 0, 0] + [0.2, 0.2, 0, 0.6, 0, 0, 0, 0.2, -0.2, 0, 0.6, 0, 0, 0]
    expected = np.concatenate([
        last, 0.25 * state.gyro, [0.0], [0.5, 0.0], np.cos(phase), state.q - np.array(default),
        0.05 * state.dq, gravity, np.sin(phase),
    ]).astype(np.float32)  # fmt: skip
    np.testing.assert_allclose(output.obs, expected, rtol=0, atol=2e-7)
