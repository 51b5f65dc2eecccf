"""``asap-ros rollout`` on other trainers' actors (``policy import`` specs of the real files; real
ONNX Runtime, real MuJoCo, lock-step): they stay up, and a wrong joint binding does not."""

from __future__ import annotations

import json

import numpy as np
import pytest
import yaml

from asap_ros.cli import main
from asap_ros.commands.actor_rollout import parse_commands
from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError


def _spec(model, tmp_path, *extra) -> str:
    out = tmp_path / f"{model.stem}.yaml"
    assert main(["policy", "import", str(model), "--out", str(out), *extra]) == 0
    return str(out)


def _rollout(spec: str, tmp_path, *extra) -> tuple[int, dict]:
    out = tmp_path / "run"
    rc = main(["rollout", "--policy", spec, "--out", str(out), *extra])
    return rc, json.loads((out / "summary.json").read_text())


def test_beyondmimic_motion_to_its_end(trainer_actors, tmp_path):
    rc, summary = _rollout(_spec(trainer_actors / "beyondmimic" / "Jump_wose.onnx", tmp_path), tmp_path)
    motion = summary["segments"][0]
    assert rc == 0 and not summary["fell"] and motion["steps_run"] == motion["motion_steps"] == 165
    assert motion["tracking"]["mean_joint_error_rad"] < 0.2  # a wrong binding: > 0.5


def test_wrong_joint_binding_falls(trainer_actors, tmp_path):
    spec = _spec(trainer_actors / "beyondmimic" / "Jump_wose.onnx", tmp_path)
    data = yaml.safe_load(open(spec))
    data["joints"] = list(load_robot_model().joint_names)  # SDK order instead of the file's IsaacLab order
    with open(spec, "w") as stream:
        yaml.safe_dump(data, stream)
    rc, summary = _rollout(spec, tmp_path)
    assert rc == 1 and summary["fell"]


def test_holosoma_walks_and_turns(trainer_actors, tmp_path):
    spec = _spec(trainer_actors / "holosoma" / "ppo_g1_29dof.onnx", tmp_path)
    rc, summary = _rollout(spec, tmp_path, "--command", "0.5,0,0:4", "--command", "0,0,0.5:3")
    walk, turn = summary["segments"]
    assert rc == 0 and not summary["fell"]
    assert walk["distance_m"] > 0.8 and abs(walk["mean_velocity_heading_m_s"][1]) < 0.1
    assert turn["turned_rad"] > 0.8 and turn["distance_m"] < 0.5


def test_command_clipped_to_model_ranges(trainer_actors, tmp_path):
    spec = _spec(trainer_actors / "holosoma" / "ppo_g1_29dof.onnx", tmp_path)
    rc, summary = _rollout(spec, tmp_path, "--command", "3,0,0:0.2")
    assert summary["segments"][0]["command"] == [1.0, 0.0, 0.0]  # lin_vel_x range [-1, 1] of the metadata


@pytest.mark.parametrize("text", ["0.5,0", "a,b,c", "0.5,0,0:-1", "0.5,0,0:x"])
def test_bad_command_named(text):
    with pytest.raises(ConfigError, match="VX,VY,WZ") as error:
        parse_commands([text])
    assert error.value.value == text


def test_walk_motion_walk(trainer_actors, tmp_path):
    """holosoma walks, Jump_wose starts from its stance (gate passed), runs to its end, holosoma walks on."""
    loco = _spec(trainer_actors / "holosoma" / "ppo_g1_29dof.onnx", tmp_path)
    jump = _spec(trainer_actors / "beyondmimic" / "Jump_wose.onnx", tmp_path)
    rc, summary = _rollout(loco, tmp_path, "--motion", jump, "--command", "0.5,0,0:3", "--command", "0,0,0:1",
                           "--command", "MOTION", "--command", "0.5,0,0:3", "--dump-obs")  # fmt: skip
    walk, _, motion, again = summary["segments"]
    assert rc == 0 and not summary["fell"] and summary["refused"] is None
    assert motion["steps_run"] == 165 and walk["distance_m"] > 0.5 and again["distance_m"] > 0.5
    steps = np.load(summary["files"]["steps"])
    in_motion = steps["segment"] == 2
    assert steps["time_step"][in_motion].tolist() == list(range(165))  # the model's time_step, recorded
    assert steps["obs_2"].shape == (165, 154) and steps["obs_3"].shape == (150, 100)
    assert np.isfinite(steps["reference_q"][in_motion]).all() and np.isnan(steps["reference_q"][~in_motion]).all()


def test_motion_segment_needs_a_motion(trainer_actors, tmp_path, capsys):
    loco = _spec(trainer_actors / "holosoma" / "ppo_g1_29dof.onnx", tmp_path)
    assert main(["rollout", "--policy", loco, "--out", str(tmp_path / "run"), "--command", "MOTION"]) != 0
    assert "a MOTION segment needs --motion SPEC" in capsys.readouterr().err
