"""Robot model and YAML readers: values match ASAP's deploy config, bad files are refused clearly."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest
import yaml

from asap_ros.config.reader import load_config, load_yaml
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError


def test_order_and_names(robot):
    assert robot.num_joints == 29
    assert robot.joint_names[0] == "left_hip_pitch_joint"
    assert robot.joint_names[12] == "waist_yaw_joint"
    assert robot.joint_names[19] == "left_wrist_roll_joint"
    assert robot.joint_names[28] == "right_wrist_yaw_joint"
    assert robot.index("right_elbow_joint") == 25
    np.testing.assert_array_equal(robot.indices(["waist_pitch_joint", "left_knee_joint"]), [14, 3])


def test_names_match_mujoco_model(robot, assets):
    import mujoco

    model = mujoco.MjModel.from_xml_path(str(assets / "robots" / "g1" / "scene_29dof.xml"))
    mj_names = [model.joint(i).name for i in range(1, model.njnt)]  # joint 0 is the free base
    assert tuple(mj_names) == robot.joint_names


def test_limits_pose_and_gains_match_deploy_config(robot, deploy):
    np.testing.assert_array_equal(robot.q_lower, deploy["motor_pos_lower_limit_list"])
    np.testing.assert_array_equal(robot.q_upper, deploy["motor_pos_upper_limit_list"])
    np.testing.assert_array_equal(robot.dq_limit, deploy["motor_vel_limit_list"])
    np.testing.assert_array_equal(robot.tau_limit, deploy["motor_effort_limit_list"])
    np.testing.assert_array_equal(robot.default_q, deploy["DEFAULT_MOTOR_ANGLES"])
    wrists = [i for i, n in enumerate(robot.joint_names) if "wrist" in n]
    others = [i for i in range(29) if i not in wrists]
    np.testing.assert_array_equal(robot.kp[others], np.asarray(deploy["MOTOR_KP"])[others])
    np.testing.assert_array_equal(robot.kd[others], np.asarray(deploy["MOTOR_KD"])[others])
    # reference doc: wrists 4 / 0.2 for all six (deploy file has kp 0 on the left wrist yaw)
    np.testing.assert_array_equal(robot.kp[wrists], 4.0)
    np.testing.assert_array_equal(robot.kd[wrists], 0.2)


def test_groups(robot):
    driven = robot.indices(robot.group("asap_driven"))
    np.testing.assert_array_equal(driven, [*range(19), 22, 23, 24, 25])
    np.testing.assert_array_equal(robot.indices(robot.group("upper_body")), range(12, 29))
    np.testing.assert_array_equal(robot.indices(robot.group("legs")), range(12))


def test_arrays_are_read_only(robot):
    with pytest.raises(ValueError):
        robot.kp[0] = 1.0


def test_unknown_joint_names_the_file_and_joint(robot):
    with pytest.raises(ConfigError, match=r"g1_29dof\.yaml: joints: unknown joint name \(got 'left_toe_joint'\)"):
        robot.index("left_toe_joint")
    with pytest.raises(ConfigError, match="unknown joint group"):
        robot.group("arms")


def _write_variant(tmp_path: Path, edit) -> Path:
    from asap_ros.config.paths import config_file

    data = yaml.safe_load(config_file("g1_29dof.yaml").read_text())
    edit(data)
    path = tmp_path / "robot.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


def test_bad_robot_files_are_refused(tmp_path):
    path = _write_variant(tmp_path, lambda d: d["joints"].pop())
    with pytest.raises(ConfigError, match=r"robot\.yaml: joints: must list 29 motors, lists 28"):
        load_robot_model(path)

    path = _write_variant(tmp_path, lambda d: d["joints"][3].update(kp=-5))
    with pytest.raises(ConfigError, match=r"joints\[3\]\.kp: out of range: allowed 0 <= value \(got -5\)"):
        load_robot_model(path)

    path = _write_variant(tmp_path, lambda d: d["joints"][4].update(default_q=2.0))
    with pytest.raises(ConfigError, match=r"joints\[4\]\.default_q: out of range: allowed .* <= value <= 0.5236 \(got 2.0\)"):
        load_robot_model(path)

    path = _write_variant(tmp_path, lambda d: d["groups"]["legs"].append("tail_joint"))
    with pytest.raises(ConfigError, match=r"groups\.legs: unknown joint name \(got 'tail_joint'\)"):
        load_robot_model(path)

    path = _write_variant(tmp_path, lambda d: d["joints"][1].update(name="left_hip_pitch_joint"))
    with pytest.raises(ConfigError, match="duplicate joint names"):
        load_robot_model(path)

    path = _write_variant(tmp_path, lambda d: d["joints"][0].update(kpp=1))
    with pytest.raises(ConfigError, match=r"joints\[0\]\.kpp: unknown key"):
        load_robot_model(path)


def test_yaml_syntax_error_names_file_and_line(tmp_path):
    path = tmp_path / "broken.yaml"
    path.write_text("name: g1\njoints: [a, b\ngroups: {}\n")
    with pytest.raises(ConfigError, match=r"broken\.yaml: YAML syntax error at line 3, column \d+"):
        load_yaml(path)
    with pytest.raises(ConfigError, match=r"missing\.yaml: cannot read file"):
        load_robot_model(tmp_path / "missing.yaml")


def test_typed_readers(tmp_path):
    path = tmp_path / "c.yaml"
    path.write_text("a: 1\nb: [1, 2, x]\nc: {d: yes}\ne: .nan\nf: [j1, j1]\n")
    cfg = load_config(path)
    assert cfg.int("a", low=0) == 1
    with pytest.raises(ConfigError, match=r"c\.yaml: a: out of range: allowed value <= 0"):
        cfg.int("a", high=0)
    with pytest.raises(ConfigError, match=r"b: must be a list of numbers \(got \[1, 2, 'x'\]\)"):
        cfg.floats("b")
    with pytest.raises(ConfigError, match=r"c\.d: must be a number \(got True\)"):
        cfg.section("c").float("d")
    with pytest.raises(ConfigError, match=r"e: must be finite"):
        cfg.float("e")
    with pytest.raises(ConfigError, match=r"f: duplicate entries \(got \['j1'\]\)"):
        cfg.strs("f")
    with pytest.raises(ConfigError, match=r"zz: required key missing"):
        cfg.str("zz")
    assert cfg.float("zz", 2.5) == 2.5
