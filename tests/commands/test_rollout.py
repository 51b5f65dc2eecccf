"""The scripted operator, the summary file, and ``asap-ros rollout`` on ASAP's actors (real ONNX, MuJoCo)."""

from __future__ import annotations

import dataclasses
import json
import math
from pathlib import Path

import numpy as np
import pytest

from asap_ros.cli import main
from asap_ros.config.paths import config_file
from asap_ros.core.errors import ConfigError
from asap_ros.core.state_machine import Mode, Stand, Start
from asap_ros.sim.dds_types import BAND_ATTACH, BAND_RELEASE
from asap_ros.sim.session import COMPLETED, BandAction, OperatorScript, SessionPlan, Stage, prepare_run
from asap_ros.sim.summary import load_summary

PLAN = SessionPlan(motion="kick_level1", stand_up_timeout_s=5.0, motion_timeout_s=10.0, settle_s=1.0, hold_after_s=2.0)


# --- the operator script (pure) ---------------------------------------------------------------


@pytest.mark.parametrize("hold_balances", [True, False], ids=["standing actor", "PD hold"])
def test_script_runs_the_whole_sequence(hold_balances: bool):
    """The band comes off at the first HOLD for good, or (PD hold) only for the motion."""
    script = OperatorScript(dataclasses.replace(PLAN, hold_balances=hold_balances))
    release, attach = [BandAction(BAND_RELEASE)], [BandAction(BAND_ATTACH)]
    at_first_hold, at_tracking, after_motion = (release, [], []) if hold_balances else ([], release, attach)
    assert script.poll(0.0, Mode.PASSIVE) == [Stand()]
    assert script.poll(0.1, Mode.STAND_UP) == []
    assert script.poll(3.0, Mode.HOLD) == at_first_hold  # stood up: settle
    assert script.poll(3.5, Mode.HOLD) == []
    assert script.poll(4.0, Mode.HOLD) == [Start("kick_level1")]
    assert script.poll(4.1, Mode.PREPARE) == []
    assert script.poll(6.6, Mode.TRACKING) == at_tracking
    assert script.poll(8.0, Mode.TRACKING) == []
    assert script.poll(10.0, Mode.HOLD) == after_motion
    assert script.tracking_started_s == 6.6 and script.tracking_ended_s == 10.0
    assert script.poll(11.9, Mode.HOLD) == [] and not script.finished
    assert script.poll(12.0, Mode.HOLD) == []
    assert script.finished and script.outcome == COMPLETED and script.stage is Stage.DONE
    assert script.poll(13.0, Mode.HOLD) == []
    assert [e.t_s for e in script.timeline] == sorted(e.t_s for e in script.timeline)


def test_refused_stand_is_retried_then_given_up():
    script = OperatorScript(PLAN)
    assert script.poll(0.0, Mode.PASSIVE) == [Stand()]
    script.rejected(0.0, Stand(), "no healthy robot state received yet")
    assert script.poll(0.02, Mode.PASSIVE) == [Stand()]
    script.rejected(PLAN.stand_retry_s + 1.0, Stand(), "no healthy robot state received yet")
    assert script.finished and "no healthy robot state" in script.outcome


def test_refused_start_ends_the_run():
    script = OperatorScript(PLAN)
    script.poll(0.0, Mode.PASSIVE)
    script.poll(1.0, Mode.HOLD)
    assert script.poll(2.0, Mode.HOLD) == [Start("kick_level1")]
    script.rejected(2.0, Start("kick_level1"), "motor too hot")
    assert script.finished and script.outcome.startswith("aborted") and "motor too hot" in script.outcome


def test_damping_is_watched_for_hold_after_s_then_ends_the_run():
    script = OperatorScript(PLAN)
    script.poll(0.0, Mode.PASSIVE)
    script.poll(1.0, Mode.HOLD)
    script.poll(2.0, Mode.HOLD)
    script.poll(3.0, Mode.TRACKING)
    assert script.poll(3.5, Mode.DAMPING, "torso tilt 60 deg") == []
    assert not script.finished
    script.poll(5.4, Mode.DAMPING)
    assert not script.finished
    script.poll(5.5, Mode.DAMPING)
    assert script.finished and "DAMPING (torso tilt 60 deg)" in script.outcome and "running the motion" in script.outcome


def test_stuck_stages_time_out():
    script = OperatorScript(PLAN)
    script.poll(0.0, Mode.PASSIVE)
    script.poll(PLAN.stand_up_timeout_s + 0.1, Mode.STAND_UP)
    assert script.finished and "not standing" in script.outcome
    script = OperatorScript(PLAN)
    script.poll(0.0, Mode.PASSIVE)
    script.poll(1.0, Mode.HOLD)
    script.poll(2.0, Mode.HOLD)
    script.poll(2.0 + PLAN.motion_timeout_s + 0.1, Mode.PREPARE)
    assert script.finished and "motion not finished" in script.outcome


def test_prepare_run_overrides_and_bad_inputs(assets, tmp_path):
    clip = assets / "motions/0-motions_raw_tairantestbed_smpl_video_APT_level1_amass.pkl"
    setup = prepare_run("policies/kick_level1.yaml", clip=clip, stand_up_s=3.0)
    assert setup.policy.spec.clip_path == clip and setup.clip.num_frames == 230
    assert setup.policy.spec.clip_duration_s == pytest.approx(229 / 30)
    assert setup.controller.config.stand_up_duration_s == 3.0
    assert setup.plan.motion == "kick_level1" and setup.plan.stand_up_timeout_s > 3.0
    assert setup.plan.hold_balances and setup.controller.hold_policy.spec.name == "dec_loco_stand"
    with pytest.raises(ConfigError, match="--onnx"):
        prepare_run("policies/kick_level1.yaml", onnx=tmp_path / "missing.onnx")
    with pytest.raises(ConfigError, match="--stand-up-s"):
        prepare_run("policies/kick_level1.yaml", stand_up_s=0.0)
    with pytest.raises(ConfigError, match="--controller-config.*file not found"):
        prepare_run("policies/kick_level1.yaml", controller_config=tmp_path / "missing.yaml")
    relaxed = tmp_path / "controller.yaml"
    relaxed.write_text(Path(config_file("controller.yaml")).read_text().replace(
        "max_consecutive_late_steps: 5", "max_consecutive_late_steps: 9"))
    assert prepare_run("policies/kick_level1.yaml", controller_config=relaxed).controller.config.safety.max_consecutive_late_steps == 9


def test_load_summary_refuses_other_files(tmp_path):
    path = tmp_path / "summary.json"
    path.write_text(json.dumps({"schema": "something else"}))
    with pytest.raises(ConfigError, match="not a run summary"):
        load_summary(path)
    path.write_text("{not json")
    with pytest.raises(ConfigError, match="cannot read summary JSON"):
        load_summary(path)


# --- asap-ros rollout -------------------------------------------------------------------------


def rollout(tmp_path, name: str, *extra: str) -> tuple[int, dict]:
    out = tmp_path / name
    code = main(["rollout", "--stand-up-s", "1", "--out", str(out), *extra])
    return code, load_summary(out / "summary.json")


def test_cr7_rollout_tracks_the_clip_without_falling(tmp_path, capsys):
    code, summary = rollout(tmp_path, "cr7")
    assert "summary:" in capsys.readouterr().out
    assert summary["kind"] == "rollout" and summary["policy"]["name"] == "CR7_level1"
    assert summary["outcome"] == COMPLETED, summary["timeline"]
    assert not summary["fell"] and summary["fault"] is None and code == 0
    tracking = summary["tracking"]
    first, last = summary["motion_ticks"]  # the lock-step robot's ticks: 20 ms apart, one per actor step
    assert (last - first) % 20 == 0 and 0 <= tracking["actor_steps"] - 1 - (last - first) // 20 <= 1, (first, last)
    assert tracking["completed"] and tracking["missing_steps"] == 0
    assert tracking["actor_steps"] == math.ceil(118 / 30 / 0.02) - 1  # last step: (k+2)*0.02 reaches 118/30 s
    for key in ("g_mpjpe_mm", "mpjpe_mm", "vel_mm_per_frame", "acc_mm_per_frame2"):
        assert math.isfinite(tracking[key]) and tracking[key] > 0.0
    assert summary["timing"] is None and summary["sim"]["commands_applied"] > 0


def test_weak_knees_profile_changes_the_run_and_observations_follow_the_layout(tmp_path):
    _, nominal = rollout(tmp_path, "nominal", "--policy", "policies/kick_level1.yaml", "--dump-obs")
    _, weak = rollout(tmp_path, "weak", "--policy", "policies/kick_level1.yaml", "--profile", "weak_knees")
    assert nominal["profile"] == "nominal" and weak["profile"] == "weak_knees"
    assert nominal["outcome"] == COMPLETED and not nominal["fell"]
    assert nominal["tracking"] and weak["tracking"]
    assert weak["tracking"]["mpjpe_mm"] != pytest.approx(nominal["tracking"]["mpjpe_mm"], rel=0.02)
    assert weak["min_pelvis_height_m"] != pytest.approx(nominal["min_pelvis_height_m"], abs=1e-3)

    steps = nominal["tracking"]["actor_steps"]
    obs, actions = np.load(nominal["files"]["obs"]), np.load(nominal["files"]["actions"])
    assert obs.shape == (steps, 380) and actions.shape == (steps, 23)
    phase = obs[:, 379]
    np.testing.assert_allclose(phase, (np.arange(steps) + 1) * 0.02 / (118 / 30), rtol=1e-6)  # tick-counted
    np.testing.assert_array_equal(obs[1:, 0:23], actions[:-1])  # "actions": the previous raw action
    # history_actor (offset 72): per term [t-1 .. t-4], values as the term had them in those steps
    terms = {"actions": (0, 23), "base_ang_vel": (23, 3), "dof_pos": (26, 23), "dof_vel": (49, 23),
             "projected_gravity": (376, 3), "ref_motion_phase": (379, 1)}  # fmt: skip
    offset = 72
    for name, (start, dim) in terms.items():
        for age in range(1, 5):
            block = obs[4:, offset + (age - 1) * dim : offset + age * dim]
            np.testing.assert_array_equal(block, obs[4 - age : steps - age, start : start + dim], err_msg=f"{name} t-{age}")
        offset += 4 * dim
    assert offset == 376
    np.testing.assert_array_equal(obs[0, 72:376], 0.0)  # history is zero after the reset
    gravity = obs[:, 376:379]
    np.testing.assert_allclose(np.linalg.norm(gravity, axis=1), 1.0, atol=1e-5)
    assert np.all(gravity[:, 2] < -0.8)  # upright robot: gravity points down the body z axis
