"""``policy import`` on the real files of ../shared/trainer-actors, the spec it writes loaded back,
``check-policy`` on it, and each bad input refused naming the file, the joint or term and the value."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from asap_ros.cli import main
from asap_ros.config.actor_import import import_actor, write_spec
from asap_ros.config.actor_spec import load_actor_spec
from asap_ros.core.errors import ConfigError
from tests.config.onnx_metadata import with_metadata

REPO = Path(__file__).resolve().parents[2]
KUNGFUBOT_GAINS = REPO / "config" / "trainers" / "kungfubot_gains.yaml"


def _import(model: Path, robot, tmp_path: Path, **kwargs) -> Path:
    out = tmp_path / f"{model.stem}.yaml"
    write_spec(import_actor(model, robot, **kwargs), out)
    return out


@pytest.fixture(scope="module")
def jump(trainer_actors):
    return trainer_actors / "beyondmimic" / "Jump_wose.onnx"


@pytest.fixture(scope="module")
def holosoma(trainer_actors):
    return trainer_actors / "holosoma" / "ppo_g1_29dof.onnx"


def test_beyondmimic_binds_isaaclab_order_by_name(jump, robot, tmp_path):
    contract = load_actor_spec(_import(jump, robot, tmp_path), robot)
    assert contract.trainer == "beyondmimic" and contract.motion_steps == 165
    # IsaacLab's order interleaves the legs and the waist: actor joint i drives the named motor
    assert contract.joints[:3] == ("left_hip_pitch_joint", "right_hip_pitch_joint", "waist_yaw_joint")
    assert contract.motor_indices[:3].tolist() == [0, 6, 12]
    knee = robot.index("left_knee_joint")
    assert contract.kp[knee] == pytest.approx(99.098) and contract.kd[knee] == pytest.approx(6.309)
    assert contract.default_q[knee] == pytest.approx(0.669)
    assert contract.action_scale_actor[contract.joints.index("left_wrist_yaw_joint")] == pytest.approx(0.075)
    assert [t.name for t in contract.terms] == ["command", "motion_anchor_ori_b", "base_ang_vel", "joint_pos",
                                               "joint_vel", "actions"]  # fmt: skip
    assert contract.obs_dim == 154 and contract.action_clip is None and not contract.needs_mocap


def test_violin_needs_mocap(trainer_actors, robot, tmp_path):
    contract = load_actor_spec(_import(trainer_actors / "beyondmimic" / "Violin.onnx", robot, tmp_path), robot)
    assert contract.obs_dim == 160 and contract.needs_mocap and contract.motion_steps == 612


def test_holosoma_defaults_and_sources(holosoma, robot, tmp_path):
    path = _import(holosoma, robot, tmp_path)
    contract = load_actor_spec(path, robot)
    assert contract.trainer == "holosoma" and contract.motion_steps is None
    assert contract.motor_indices.tolist() == list(range(29))
    assert contract.default_q[robot.index("left_ankle_pitch_joint")] == pytest.approx(-0.363)
    assert contract.kp[robot.index("left_hip_roll_joint")] == pytest.approx(99.098427777)
    assert [t.name for t in contract.terms] == sorted(t.name for t in contract.terms)
    assert dict((n, (lo, hi)) for n, lo, hi in contract.command_ranges)["lin_vel_x"] == (-1.0, 1.0)
    sources = yaml.safe_load(path.read_text())["sources"]
    assert sources["kp"] == "metadata_props.kp" and "not in the file" in sources["default_q"]


def test_kungfubot_gains_file(trainer_actors, robot, tmp_path):
    path = _import(trainer_actors / "kungfubot" / "horse_squat.onnx", robot, tmp_path, trainer="asap",
                   gains=KUNGFUBOT_GAINS, motion_length_s=6.67)  # fmt: skip
    contract = load_actor_spec(path, robot)
    assert contract.obs_dim == 380 and len(contract.joints) == 23 and contract.motion_steps == 334
    assert contract.kp[robot.index("left_knee_joint")] == 150.0 and contract.default_q[robot.index("left_elbow_joint")] == 0.9
    # the wrists are not named: the robot model's
    assert contract.kp[robot.index("left_wrist_roll_joint")] == robot.kp[robot.index("left_wrist_roll_joint")]


def test_cli_import_then_check_policy(holosoma, tmp_path, capsys):
    out = tmp_path / "loco.yaml"
    assert main(["policy", "import", str(holosoma), "--out", str(out)]) == 0
    assert "metadata_props.kp" in capsys.readouterr().out
    assert main(["check-policy", str(out)]) == 0
    text = capsys.readouterr().out
    assert "total 100 = actor input 100" in text and "ok" in text


def _bad(model: Path, tmp_path: Path, robot, changes: dict[str, str | None]) -> ConfigError:
    copy = with_metadata(model, tmp_path / model.name, changes)
    with pytest.raises(ConfigError) as error:
        import_actor(copy, robot)
    assert str(copy) in str(error.value)
    return error.value


def _csv_with(model_meta: str, index: int, value: str) -> str:
    items = model_meta.split(",")
    items[index] = value
    return ",".join(items)


@pytest.fixture(scope="module")
def jump_meta(jump):
    import onnxruntime as ort

    return dict(ort.InferenceSession(str(jump), providers=["CPUExecutionProvider"]).get_modelmeta().custom_metadata_map)


def test_missing_metadata(jump, jump_meta, robot, tmp_path):
    error = _bad(jump, tmp_path, robot, {"joint_stiffness": None})
    assert error.key == "metadata_props.joint_stiffness" and "missing" in error.problem


def test_unparseable_metadata(jump, jump_meta, robot, tmp_path, holosoma):
    error = _bad(jump, tmp_path, robot, {"joint_damping": _csv_with(jump_meta["joint_damping"], 4, "six")})
    assert error.key == "metadata_props.joint_damping[4]" and error.value == "six"
    error = _bad(holosoma, tmp_path, robot, {"kp": "[40.1, 99"})
    assert error.key == "metadata_props.kp" and "not JSON" in error.problem


def test_unknown_joint(jump, jump_meta, robot, tmp_path):
    error = _bad(jump, tmp_path, robot, {"joint_names": _csv_with(jump_meta["joint_names"], 9, "left_toe_joint")})
    assert error.key == "joints[9]" and error.value == "left_toe_joint"


def test_duplicate_joint(jump, jump_meta, robot, tmp_path):
    error = _bad(jump, tmp_path, robot, {"joint_names": _csv_with(jump_meta["joint_names"], 1, "left_hip_pitch_joint")})
    assert error.key == "joints[1]" and "twice" in error.problem


def test_zero_gain(jump, jump_meta, robot, tmp_path):
    error = _bad(jump, tmp_path, robot, {"joint_stiffness": _csv_with(jump_meta["joint_stiffness"], 9, "0.000")})
    assert error.key == "kp.left_knee_joint" and error.value == 0.0 and "> 0" in error.problem


def test_gain_beyond_motor(jump, jump_meta, robot, tmp_path):
    error = _bad(jump, tmp_path, robot, {"joint_stiffness": _csv_with(jump_meta["joint_stiffness"], 25, "900.000")})
    assert error.key == "kp.left_wrist_pitch_joint" and error.value == 900.0


def test_default_pose_out_of_range(jump, jump_meta, robot, tmp_path):
    error = _bad(jump, tmp_path, robot, {"default_joint_pos": _csv_with(jump_meta["default_joint_pos"], 9, "-0.500")})
    assert error.key == "default_q.left_knee_joint" and error.value == -0.5 and "range" in error.problem


def test_precision_loss(jump, jump_meta, robot, tmp_path):
    # 0.07 may be 0.065..0.075: 7 % off, beyond the 1 % tolerance; 3 decimals (0.075) pass
    error = _bad(jump, tmp_path, robot, {"action_scale": _csv_with(jump_meta["action_scale"], 28, "0.07")})
    assert error.key == "metadata_props.action_scale[28]" and error.value == "0.07" and "tolerance" in error.problem


def test_observation_dimension_does_not_add_up(jump, robot, tmp_path):
    names = "command,motion_anchor_ori_b,base_ang_vel,joint_pos,joint_vel"
    error = _bad(jump, tmp_path, robot, {"observation_names": names})
    assert error.key == "observation.terms" and error.value == 125 and "154" in error.problem


def test_unknown_observation_term(jump, robot, tmp_path):
    error = _bad(jump, tmp_path, robot, {"observation_names": "command,anchor_height,base_ang_vel"})
    assert error.value == "anchor_height"


def test_spec_missing_joint_and_checksum(holosoma, robot, tmp_path):
    path = _import(holosoma, robot, tmp_path)
    data = yaml.safe_load(path.read_text())
    data["joints"].remove("right_wrist_yaw_joint")
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="right_wrist_yaw_joint") as error:
        load_actor_spec(path, robot)
    assert error.value.file == str(path) and error.value.key == "joints"
    data = yaml.safe_load(_import(holosoma, robot, tmp_path).read_text())
    data["actor"]["sha256"] = "0" * 64
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="does not match"):
        load_actor_spec(path, robot)


def test_obs_width_checked_on_load(holosoma, robot, tmp_path):
    path = _import(holosoma, robot, tmp_path)
    data = yaml.safe_load(path.read_text())
    data["observation"]["terms"][4]["dim"] = 1  # cos_phase: one foot only
    path.write_text(yaml.safe_dump(data))
    with pytest.raises(ConfigError, match="add up to 99") as error:
        load_actor_spec(path, robot)
    assert error.value.key == "observation.terms"
    assert np.isfinite(error.value.value)


def test_external_weights(holosoma, robot, tmp_path, capsys):
    """``policy.onnx`` + ``policy.onnx.data`` (mjlab's export): the data file's SHA-256 is in the spec
    and checked on load; the model runs as the single-file one."""
    from asap_ros.config.policy_spec import sha256_of
    from tests.config.onnx_metadata import with_external_data

    model = with_external_data(holosoma, tmp_path / "policy.onnx")
    data = tmp_path / "policy.onnx.data"
    spec = _import(model, robot, tmp_path)
    written = yaml.safe_load(spec.read_text())["actor"]["external_data"]
    assert written == [{"file": str(data), "sha256": sha256_of(data)}]
    assert load_actor_spec(spec, robot).external_data == ((data, sha256_of(data)),)
    assert main(["check-policy", str(spec)]) == 0
    assert f"weights: {data} sha256 {sha256_of(data)} ok" in capsys.readouterr().out
    data.write_bytes(data.read_bytes()[:-4] + b"\0\0\0\0")
    with pytest.raises(ConfigError, match="does not match") as error:
        load_actor_spec(spec, robot)
    assert error.value.key == "actor.external_data[0].sha256"
    data.unlink()
    with pytest.raises(ConfigError, match="not there") as error:
        import_actor(model, robot)
    assert error.value.value == str(data)


def test_asap_spec_loader_names_a_trainer_spec(holosoma, robot, tmp_path):
    from asap_ros.config.policy_spec import load_policy_spec

    path = _import(holosoma, robot, tmp_path)
    with pytest.raises(ConfigError, match="rollout run it") as error:
        load_policy_spec(path, robot)
    assert error.value.key == "trainer" and error.value.value == "holosoma"
