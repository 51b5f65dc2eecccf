"""Policy specs: the shipped specs match ASAP's deploy config; bad specs name file, key and values."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from asap_ros.config.paths import policies_dir
from asap_ros.config.policy_spec import load_policy_spec
from asap_ros.core.errors import ConfigError

NAMES = ["CR7_level1", "kick_level1", "APT_level1"]


@pytest.mark.parametrize("name", NAMES)
def test_shipped_specs_match_asap(name, robot, deploy, assets):
    spec = load_policy_spec(policies_dir() / f"{name}.yaml", robot)
    assert spec.name == name
    assert spec.actor_path == assets / "policies" / "mimic" / name / deploy["mimic_models"][name]
    source_md = (assets / "SOURCE.md").read_text()
    assert f"{spec.actor_sha256}  ./policies/mimic/{name}/" in source_md
    assert name in spec.clip_path.name and spec.clip_path.parent == assets / "motions"
    assert (spec.input_name, spec.input_dim, spec.output_name, spec.output_dim) == ("actor_obs", 380, "action", 23)
    np.testing.assert_array_equal(spec.driven_indices, [*range(19), 22, 23, 24, 25])
    layout = [(s.name, s.offset, s.dim) for s in spec.layout]
    assert layout == [
        ("actions", 0, 23),
        ("base_ang_vel", 23, 3),
        ("dof_pos", 26, 23),
        ("dof_vel", 49, 23),
        ("history_actor", 72, 304),
        ("projected_gravity", 376, 3),
        ("ref_motion_phase", 379, 1),
    ]
    assert {t.name: t.scale for t in spec.terms} == {
        "actions": 1.0, "base_ang_vel": 0.25, "dof_pos": 1.0, "dof_vel": 0.05, "projected_gravity": 1.0, "ref_motion_phase": 1.0,
    }
    assert spec.history.length == 4 and spec.history.newest_first
    assert spec.history.terms == tuple(sorted(deploy["history_mimic_config"]))
    assert (spec.action_scale, spec.action_clip, spec.control_dt, spec.phase_start) == (0.25, 100.0, 0.02, 0.0)
    np.testing.assert_array_equal(spec.default_q, robot.default_q)
    np.testing.assert_array_equal(spec.kp, robot.kp)
    np.testing.assert_array_equal(spec.kd, robot.kd)
    # PREPARE pose: legs at the default pose, upper body (motors 12..28) from the deploy config
    # with waist roll and pitch zeroed as ASAP's deploy code does
    expected_upper = np.array(deploy["start_upper_body_dof_pos"][name])
    expected_upper[1:3] = 0.0
    np.testing.assert_array_equal(spec.prepare_pose[12:], expected_upper)
    np.testing.assert_array_equal(spec.prepare_pose[:12], robot.default_q[:12])
    assert (spec.prepare_blend_s, spec.prepare_hold_s) == (1.5, 1.0)
    assert spec.clip_duration_s == pytest.approx({"APT_level1": 229, "CR7_level1": 118, "kick_level1": 118}[name] / 30)


def _spec_data() -> dict:
    return yaml.safe_load((policies_dir() / "CR7_level1.yaml").read_text())


def _write(tmp_path: Path, data: dict) -> Path:
    path = tmp_path / "spec.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_overrides_apply(tmp_path, robot):
    data = _spec_data()
    data["default_q"] = {"left_knee_joint": 0.4}
    data["gains"] = {"kp": {"left_wrist_yaw_joint": 0.0}, "kd": {"waist_yaw_joint": 6.0}}
    data["driven_joints"] = list(robot.group("asap_driven"))
    spec = load_policy_spec(_write(tmp_path, data), robot)
    assert spec.default_q[3] == 0.4 and spec.prepare_pose[3] == 0.4
    assert spec.kp[21] == 0.0 and spec.kd[12] == 6.0
    assert spec.kp[0] == robot.kp[0]


def test_wrong_input_dimension(tmp_path, robot):
    data = _spec_data()
    data["actor"]["input"]["dim"] = 381
    with pytest.raises(ConfigError) as info:
        load_policy_spec(_write(tmp_path, data), robot)
    message = str(info.value)
    assert "spec.yaml: observation.terms: term dims sum to 380" in message
    assert "actor.input.dim is 381" in message and "history_actor 304" in message


def test_wrong_term_dimension(tmp_path, robot):
    data = _spec_data()
    data["observation"]["terms"]["base_ang_vel"]["dim"] = 4
    with pytest.raises(ConfigError, match=r"term dims sum to 385 .* but actor.input.dim is 380 \(got 385\)"):
        load_policy_spec(_write(tmp_path, data), robot)


def test_output_dimension_against_driven_joints(tmp_path, robot):
    data = _spec_data()
    data["actor"]["output"]["dim"] = 29
    with pytest.raises(ConfigError, match=r"actor\.output\.dim: is 29 but driven_joints lists 23 joints"):
        load_policy_spec(_write(tmp_path, data), robot)


@pytest.mark.parametrize(
    "edit,key,value",
    [
        (lambda d: d.update(driven_joints=["left_hip_pitch_joint", "left_toe_joint"]), "driven_joints", "left_toe_joint"),
        (lambda d: d.update(driven_joints="arms"), "driven_joints", "arms"),
        (lambda d: d.update(default_q={"tail_joint": 0.1}), "default_q", "tail_joint"),
        (lambda d: d["gains"].update(kp={"left_wrist_joint": 1.0}), "gains.kp", "left_wrist_joint"),
        (lambda d: d["prepare"].update(pose_joints=["waist_yaw_joint", "neck_joint"]), "prepare.pose_joints", "neck_joint"),
    ],
)
def test_unknown_joint_names(tmp_path, robot, edit, key, value):
    data = _spec_data()
    edit(data)
    with pytest.raises(ConfigError, match=rf"spec\.yaml: {key}: unknown joint (name|group).*\(got '{value}'\)"):
        load_policy_spec(_write(tmp_path, data), robot)


def test_missing_onnx_file(tmp_path, robot, assets):
    data = _spec_data()
    data["actor"]["file"] = "policies/mimic/CR7_level1/model_0.onnx"
    with pytest.raises(ConfigError) as info:
        load_policy_spec(_write(tmp_path, data), robot)
    message = str(info.value)
    assert "spec.yaml: actor.file: file not found" in message and "model_0.onnx" in message


def test_sha256_mismatch_names_both_values(tmp_path, robot):
    data = _spec_data()
    actual = data["actor"]["sha256"]
    data["actor"]["sha256"] = "0" * 64
    with pytest.raises(ConfigError) as info:
        load_policy_spec(_write(tmp_path, data), robot)
    message = str(info.value)
    assert "spec.yaml: actor.sha256: does not match" in message and "model_191500.onnx" in message
    assert f"file has {actual}" in message and repr("0" * 64) in message


def test_missing_clip(tmp_path, robot):
    data = _spec_data()
    data["phase"]["clip"] = "motions/none.pkl"
    with pytest.raises(ConfigError, match=r"spec\.yaml: phase\.clip: file not found .*none\.pkl"):
        load_policy_spec(_write(tmp_path, data), robot)


@pytest.mark.parametrize(
    "edit,message",
    [
        (lambda d: d["observation"]["history"].update(terms=["actions", "base_lin_vel"]),
         r"observation\.history\.terms: history term is not an observation term \(got 'base_lin_vel'\)"),
        (lambda d: d["observation"]["history"].update(order="sideways"),
         r"observation\.history\.order: must be one of newest_first, oldest_first \(got 'sideways'\)"),
        (lambda d: d["action"].update(scale="quarter"), r"action\.scale: must be a number \(got 'quarter'\)"),
        (lambda d: d["prepare"].update(pose=[0.0] * 16), r"prepare\.pose: must have 17 entries, has 16"),
        (lambda d: d["phase"].pop("control_dt"), r"phase\.control_dt: required key missing"),
        (lambda d: d["prepare"].update(blend_s=0), r"prepare\.blend_s: must be at least one control step "
         r"\(phase\.control_dt 0\.02 s\): a shorter blend would jump to the start pose at the motion's gains \(got 0\.0\)"),
        (lambda d: d["prepare"].update(blend_s=0.019), r"prepare\.blend_s: must be at least one control step"),
        (lambda d: d.update(phaze={}), r"phaze: unknown key"),
        (lambda d: d.setdefault("gains", {}).update(kp={"left_knee_joint": 5000}),
         r"gains\.kp\.left_knee_joint: must be at most 2780 \(the motor's 139 N m effort limit reached at 0\.05 rad; "
         r"a larger gain only saturates the motor\) \(got 5000\.0\)"),
        (lambda d: d.setdefault("gains", {}).update(kd={"left_wrist_roll_joint": 30}),
         r"gains\.kd\.left_wrist_roll_joint: must be at most 25 \(the motor's 25 N m effort limit reached at 1 rad/s"),
        (lambda d: d["action"].update(scale=5.0), r"action\.scale: out of range: allowed 1e-06 <= value <= 1 \(got 5\.0\)"),
        (lambda d: d["action"].update(clip=0), r"action\.clip: out of range: allowed 1e-06 <= value <= 100 \(got 0\)"),
        (lambda d: d["action"].update(clip=1000), r"action\.clip: out of range: allowed 1e-06 <= value <= 100"),
    ],
)
def test_other_bad_values(tmp_path, robot, edit, message):
    data = _spec_data()
    edit(data)
    with pytest.raises(ConfigError, match=rf"spec\.yaml: {message}"):
        load_policy_spec(_write(tmp_path, data), robot)


def test_yaml_syntax_error(tmp_path, robot):
    text = (policies_dir() / "CR7_level1.yaml").read_text().replace("dim: 380}", "dim: 380", 1)
    path = tmp_path / "broken.yaml"
    path.write_text(text)
    with pytest.raises(ConfigError, match=r"broken\.yaml: YAML syntax error at line \d+, column \d+"):
        load_policy_spec(path, robot)
