"""OnnxActor checks the model against its spec; PolicyRunner phase, done flag and target clipping."""

from __future__ import annotations

import dataclasses
import os
from pathlib import Path

import numpy as np
import onnxruntime as ort
import pytest
import yaml

from asap_ros.config.paths import policies_dir
from asap_ros.config.policy_spec import load_policy_spec, sha256_of
from asap_ros.core.errors import ConfigError
from asap_ros.core.state import RobotState
from asap_ros.runtime.actor import OnnxActor
from asap_ros.runtime.policies import load_policy_runner


@pytest.fixture(scope="module")
def spec():
    return load_policy_spec(policies_dir() / "CR7_level1.yaml")


@pytest.fixture(scope="module")
def runner():
    return load_policy_runner(policies_dir() / "CR7_level1.yaml")


def test_actor_matches_onnx_runtime(spec):
    actor = OnnxActor(spec.actor_path, spec)
    session = ort.InferenceSession(str(spec.actor_path))
    rng = np.random.default_rng(0)
    for _ in range(5):
        obs = rng.normal(size=380).astype(np.float32)
        action = actor(obs)
        assert action.shape == (23,) and action.dtype == np.float32
        np.testing.assert_array_equal(action, session.run(["action"], {"actor_obs": obs[None]})[0][0])
    assert actor.session.get_session_options().intra_op_num_threads == 1


def test_input_name_mismatch_names_spec_key_and_both_values(tmp_path):
    data = yaml.safe_load((policies_dir() / "CR7_level1.yaml").read_text())
    data["actor"]["input"]["name"] = "obs"
    path = tmp_path / "named.yaml"
    path.write_text(yaml.safe_dump(data))
    spec = load_policy_spec(path)
    with pytest.raises(ConfigError, match=r"named\.yaml: actor\.input\.name: ONNX model model_191500\.onnx has inputs \['actor_obs'\] \(got 'obs'\)"):
        OnnxActor(spec.actor_path, spec)


def test_output_name_and_dimension_mismatch(spec):
    with pytest.raises(ConfigError, match=r"actor\.output\.name: .* has outputs \['action'\] \(got 'actions'\)"):
        OnnxActor(spec.actor_path, dataclasses.replace(spec, output_name="actions"))
    with pytest.raises(ConfigError, match=r"CR7_level1\.yaml: actor\.input\.dim: is 375 but .* has shape \[1, 380\] \(got 375\)"):
        OnnxActor(spec.actor_path, dataclasses.replace(spec, input_dim=375))
    with pytest.raises(ConfigError, match=r"actor\.output\.dim: is 29 but .* has shape \[1, 23\]"):
        OnnxActor(spec.actor_path, dataclasses.replace(spec, output_dim=29))


def _asset_root_with(tmp_path: Path, assets: Path, actor_bytes: bytes) -> Path:
    """An asset root holding the real clips and a replaced actor file."""
    root = tmp_path / "assets"
    (root / "policies").mkdir(parents=True)
    (root / "SOURCE.md").write_text("test asset root\n")
    os.symlink(assets / "motions", root / "motions")
    (root / "policies" / "actor.onnx").write_bytes(actor_bytes)
    return root


def test_corrupt_onnx_file(tmp_path, assets):
    good = (assets / "policies/mimic/CR7_level1/model_191500.onnx").read_bytes()
    root = _asset_root_with(tmp_path, assets, good[: len(good) // 3])
    data = yaml.safe_load((policies_dir() / "CR7_level1.yaml").read_text())
    data["actor"]["file"] = "policies/actor.onnx"
    data["actor"]["sha256"] = sha256_of(root / "policies" / "actor.onnx")  # checksum right, model broken
    path = tmp_path / "corrupt.yaml"
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError) as info:
        load_policy_runner(path, assets_dir=root)
    message = str(info.value)
    assert "corrupt.yaml: actor.file: not a loadable ONNX model" in message and "actor.onnx" in message


def test_missing_onnx_file_given_to_the_actor(spec, tmp_path):
    with pytest.raises(ConfigError, match=r"CR7_level1\.yaml: actor\.file: not a loadable ONNX model.*nothing\.onnx"):
        OnnxActor(tmp_path / "nothing.onnx", spec)


def test_phase_is_tick_counted_and_done_before_phase_one(runner):
    runner.reset()
    state = RobotState(q=runner.robot.default_q.copy())
    duration = 118 / 30  # CR7: 119 frames at 30 fps
    outputs = []
    while not (outputs and outputs[-1].done):
        outputs.append(runner.step(state))
        assert len(outputs) < 500
    for k, out in enumerate(outputs):
        assert out.tick == k
        assert out.phase == pytest.approx((k + 1) * 0.02 / duration, abs=1e-12)
    assert outputs[-1].phase < 1.0 <= (len(outputs) + 1) * 0.02 / duration
    assert len(outputs) == 196
    assert runner.tick == 196
    runner.reset()
    assert runner.tick == 0 and runner.step(state).phase == outputs[0].phase


def test_targets_clip_actions_and_joint_limits(runner):
    runner.reset()
    wild = RobotState(q=runner.robot.default_q.copy(), dq=np.full(29, 1e4), gyro=np.array([1e4, -1e4, 1e4]))
    out = runner.step(wild)
    raw = runner.actor(out.obs)
    assert np.abs(raw).max() > 100  # the real actor does produce out-of-range actions here
    np.testing.assert_array_equal(out.raw_action, np.clip(raw, -100, 100))
    assert np.all(out.q_target >= runner.robot.q_lower) and np.all(out.q_target <= runner.robot.q_upper)
    driven = runner.spec.driven_indices
    at_limit = np.isin(out.q_target[driven], [*runner.robot.q_lower[driven], *runner.robot.q_upper[driven]])
    assert at_limit.all()
    wrists = [19, 20, 21, 26, 27, 28]
    np.testing.assert_array_equal(out.q_target[wrists], runner.start_pose[wrists])
    # the next step sees the clipped action as its previous action
    np.testing.assert_array_equal(runner.step(wild).obs[:23], out.raw_action)


def test_non_finite_state_is_not_hidden(runner):
    runner.reset()
    state = RobotState(q=runner.robot.default_q.copy())
    state.gyro = np.array([np.nan, 0.0, 0.0])
    out = runner.step(state)
    assert np.isnan(out.raw_action).all() and np.isnan(out.q_target[runner.spec.driven_indices]).all()


def test_runner_gains_and_start_pose(runner):
    np.testing.assert_array_equal(runner.kp, runner.spec.kp)
    np.testing.assert_array_equal(runner.kd, runner.spec.kd)
    np.testing.assert_array_equal(runner.start_pose, runner.spec.prepare_pose)
    assert runner.start_pose.shape == (29,) and runner.kp.shape == (29,)
