"""ASAP's open-loop protocol on rows the trainer simulator wrote itself: real MuJoCo, real ONNX Runtime.

Rows of a known robot (:mod:`asap_ros.testing.trainer_rows`) replayed with the trainer's
indexing must come back exactly; shifted actions, a weaker robot and a wrong delta must not.
"""

from __future__ import annotations

import json
import pickle

import numpy as np
import pytest

from asap_ros.config.robot import load_robot_model
from asap_ros.core.errors import ConfigError
from asap_ros.export.motion_rows import check_raw_actions, load_pickle_rows, rows_from_fields
from asap_ros.export.onnx_file import write_mlp_onnx
from asap_ros.export.openloop import OpenLoopReplayer, load_delta_model, run_openloop, windows_of
from asap_ros.export.openloop_report import lag_scan, text_report, to_dict, write_json, write_png
from asap_ros.export.trainer_sim import TrainerSim
from asap_ros.export.trainer_velocity import gaussian_filter_rows, joint_velocity, root_linear_velocity
from asap_ros.testing.delta_oracle import write_oracle_delta
from asap_ros.testing.trainer_rows import export_fields, simulated_rows
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

WEAK = 0.65


@pytest.fixture(scope="module")
def sim(assets):
    return TrainerSim()


@pytest.fixture(scope="module")
def replayer(sim):
    return OpenLoopReplayer(sim)


@pytest.fixture(scope="module")
def nominal_rows(sim):
    return simulated_rows(1.0, steps=80, sim=sim)


@pytest.fixture(scope="module")
def weak_rows(sim):
    return simulated_rows(WEAK, steps=80, sim=sim)


@pytest.fixture(scope="module")
def robot():
    return load_robot_model()


def _figures(summary: dict, column: str, horizon: str = "1", metric: str = "g_mpjpe_mm") -> float:
    return summary["horizons"][horizon][metric][column]["value"]


def test_rows_of_the_trainer_simulator_replay_exactly_and_shifted_actions_do_not(nominal_rows, replayer):
    result = run_openloop([nominal_rows], replayer, 1.0, 0.5)
    assert [w.start_row for w in result.windows] == windows_of(nominal_rows, 1.0, 0.5) == [0, 25]
    # state of row n + 1 = row n's state under row n + 1's action; what differs is what the rows do not
    # hold (the six wrist joints, reset to 0, and the contact solver's warm start): a few mrad
    for window in result.windows:
        assert window.scores["without"].joint_error[0.25].max() < 3e-3
    scan = lag_scan(result)
    assert scan["best_lag"] == 0 and scan["pairing_ok"], scan
    shifted = min(scan["joint_error_rad"]["-1"], scan["joint_error_rad"]["1"])
    assert shifted > 10 * scan["joint_error_rad"]["0"], scan


def test_a_zero_delta_model_reproduces_the_figures_without_delta_exactly(nominal_rows, weak_rows, replayer, robot,
                                                                          tmp_path):  # fmt: skip
    zero = write_oracle_delta(tmp_path / "zero.onnx", robot, 1.0, exact=False)
    result = run_openloop([weak_rows, nominal_rows], replayer, 1.0, 0.5, load_delta_model(str(zero)),
                          finetune=True)  # fmt: skip
    for window in result.windows:
        without, with_zero = window.scores["without"], window.scores["with"]
        assert with_zero.metrics == without.metrics == window.scores["finetune"].metrics
        for horizon, error in without.joint_error.items():
            np.testing.assert_array_equal(with_zero.joint_error[horizon], error)
        assert not with_zero.mean_applied_delta.any()


def test_the_oracle_delta_brings_the_nominal_simulator_onto_the_weak_robot(weak_rows, replayer, robot, tmp_path):
    for exact in (True, False):
        oracle = write_oracle_delta(tmp_path / f"oracle{exact}.onnx", robot, WEAK, exact=exact)
        summary = to_dict(run_openloop([weak_rows], replayer, 1.0, 0.5, load_delta_model(str(oracle)),
                                       finetune=True))  # fmt: skip
        without, with_oracle = _figures(summary, "without"), _figures(summary, "with")
        assert without > 20.0 and with_oracle < 0.2 * without, (exact, without, with_oracle)
        assert summary["delta"]["warning"] is None
        # fine-tuning adds Δa unscaled and one step late: 4x the correction, far worse than none
        assert _figures(summary, "finetune", "0.25") > _figures(summary, "without", "0.25")
        ranking = summary["delta"]["ranking"]
        assert {r["joint"] for r in ranking} == {robot.joint_names[i] for i in DRIVEN_MOTORS}


def test_a_delta_that_hurts_at_a_quarter_second_is_warned_about(weak_rows, replayer, robot, tmp_path):
    wrong = write_oracle_delta(tmp_path / "wrong.onnx", robot, 1.0 / WEAK, exact=False)  # the opposite correction
    summary = to_dict(run_openloop([weak_rows], replayer, 1.0, 0.5, load_delta_model(str(wrong))))
    assert summary["delta"]["warning"].startswith("WARNING: the delta makes the 0.25 s errors worse")
    assert "WARNING" in text_report(summary)


def test_report_json_and_png(weak_rows, replayer, robot, tmp_path):
    oracle = write_oracle_delta(tmp_path / "oracle.onnx", robot, WEAK)
    result = run_openloop([weak_rows], replayer, 1.0, 0.25, load_delta_model(str(oracle)))
    summary = json.loads(write_json(to_dict(result), tmp_path / "o.json").read_text())
    for horizon in ("0.25", "0.5", "1"):
        for metric in ("g_mpjpe_mm", "mpjpe_mm", "vel_mm_per_frame", "acc_mm_per_frame2"):
            figures = summary["horizons"][horizon][metric]
            assert set(figures) == {"without", "with", "with_change"}
            low, high = figures["with"]["ci95"]
            assert low <= figures["with"]["value"] <= high
    assert [r["rank"] for r in summary["delta"]["ranking"]] == list(range(1, 24))
    assert write_png(result, tmp_path / "o.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_delta_model_of_the_wrong_shape_is_refused_naming_the_file(tmp_path):
    rng = np.random.default_rng(0)
    path = write_mlp_onnx(tmp_path / "short.onnx", [(rng.normal(size=(100, 23)).astype(np.float32),
                                                     np.zeros(23, np.float32))])  # fmt: skip
    with pytest.raises(ConfigError, match=r"short\.onnx: delta model\.input\.dim: is 108 but .* shape \[1, 100\]"):
        load_delta_model(str(path))
    path = write_mlp_onnx(tmp_path / "wide.onnx", [(rng.normal(size=(108, 29)).astype(np.float32),
                                                    np.zeros(29, np.float32))])  # fmt: skip
    with pytest.raises(ConfigError, match=r"wide\.onnx: delta model\.output\.dim: is 23 but .* shape \[1, 29\]"):
        load_delta_model(str(path))
    (tmp_path / "junk.onnx").write_bytes(b"not a model")
    with pytest.raises(ConfigError, match=r"junk\.onnx: delta model\.file: not a loadable ONNX model"):
        load_delta_model(str(tmp_path / "junk.onnx"))


@pytest.fixture(scope="module")
def axes():
    from asap_ros.export.pose_aa import driven_joint_axes

    return driven_joint_axes()


def test_a_pickle_reads_back_as_the_rows_and_replays_the_same(nominal_rows, replayer, axes, robot, tmp_path):
    stem = "session_x_ep001_kick_level1"
    path = tmp_path / f"{stem}.pkl"
    path.write_bytes(pickle.dumps({stem: export_fields(nominal_rows, nominal_rows.action, axes)}, protocol=4))
    default_q = robot.default_q[DRIVEN_MOTORS]
    (rows,) = load_pickle_rows(path, axes, default_q, 0.25)
    assert rows.motion == "kick_level1" and rows.name == stem
    np.testing.assert_allclose(rows.dof, nominal_rows.dof, atol=1e-6)
    np.testing.assert_allclose(rows.root_quat_wxyz, nominal_rows.root_quat_wxyz, atol=1e-6)
    np.testing.assert_array_equal(rows.action, nominal_rows.action)
    replayed = run_openloop([rows], replayer, 1.0, 0.5).windows[0].scores["without"]
    direct = run_openloop([nominal_rows], replayer, 1.0, 0.5).windows[0].scores["without"]
    np.testing.assert_allclose(replayed.joint_error[0.25], direct.joint_error[0.25], atol=1e-5)  # float32 rows


def test_actions_that_are_not_raw_are_refused(nominal_rows, axes, robot, tmp_path):
    default_q = robot.default_q[DRIVEN_MOTORS]
    check_raw_actions(nominal_rows, default_q, 0.25)
    targets = 0.25 * nominal_rows.action + default_q  # what a logger of joint_pos_cmd would save
    rows = rows_from_fields(export_fields(nominal_rows, targets, axes), "t", "t", "t.pkl", axes)
    with pytest.raises(ConfigError, match=r"t\.pkl: t\.action: the action key does not hold raw actor output: it "
                                          r"reads as joint position targets"):  # fmt: skip
        check_raw_actions(rows, default_q, 0.25)
    stem = "session_x_ep001_kick_level1"
    (tmp_path / f"{stem}.pkl").write_bytes(pickle.dumps({stem: export_fields(nominal_rows, nominal_rows.action, axes)}))
    (tmp_path / f"{stem}.meta.json").write_text(json.dumps({"motion": "kick_level1", "action": "executed"}))
    with pytest.raises(ConfigError, match=r"meta\.json: action: the action key holds the executed"):
        load_pickle_rows(tmp_path / f"{stem}.pkl", axes, default_q, 0.25)


def test_a_motion_file_without_action_is_refused_naming_the_key(nominal_rows, axes, tmp_path):
    fields = export_fields(nominal_rows, nominal_rows.action, axes)
    del fields["action"]
    with pytest.raises(ConfigError, match=r"m\.pkl: m\.action: missing: the delta trainer's motion file needs"):
        rows_from_fields(fields, "m", "m", "m.pkl", axes)


def test_reset_velocity_recorded_needs_the_velocity_keys(nominal_rows, axes, replayer):
    fields = export_fields(nominal_rows, nominal_rows.action, axes)
    for key in ("root_lin_vel", "root_ang_vel", "dof_vel"):
        del fields[key]
    rows = rows_from_fields(fields, "m", "m", "m.pkl", axes)
    with pytest.raises(ConfigError, match=r"m\.pkl: m\.dof_vel: --reset-velocity recorded needs"):
        run_openloop([rows], replayer, 1.0, 1.0)
    trainer = OpenLoopReplayer(replayer.sim, replayer.keypoints, reset_velocity="trainer")
    assert len(run_openloop([rows], trainer, 1.0, 1.0).windows) == 1


def test_reset_velocity_measured_needs_the_gyro(nominal_rows, axes, replayer):
    fields = export_fields(nominal_rows, nominal_rows.action, axes)
    measured = OpenLoopReplayer(replayer.sim, replayer.keypoints, reset_velocity="measured")
    result = run_openloop([rows_from_fields(fields, "m", "m", "m.pkl", axes)], measured, 1.0, 1.0)
    del fields["gyro"]
    rows = rows_from_fields(fields, "m", "m", "m.pkl", axes)
    with pytest.raises(ConfigError, match=r"m\.pkl: m\.gyro: --reset-velocity measured needs the IMU's gyro"):
        run_openloop([rows], measured, 1.0, 1.0)
    assert result.reset_velocity == "measured" and len(result.windows) == 1


def test_the_replayer_never_serves_one_motion_the_figures_of_another(nominal_rows, axes, sim):
    # motions loaded one after another, each freed before the next: the one without velocities must be
    # refused and each must get its own recorded keypoints, whichever address it lands at
    replayer = OpenLoopReplayer(sim)
    fields = export_fields(nominal_rows, nominal_rows.action, axes)
    bare = {k: v for k, v in fields.items() if k not in ("root_lin_vel", "root_ang_vel", "dof_vel")}
    for i in range(40):
        rows = rows_from_fields(dict(fields), "m", "m", "m.pkl", axes)
        replayer.velocities(rows)
        replayer.recorded_keypoints(rows)
        del rows
        lifted = dict(bare, root_trans_offset=bare["root_trans_offset"] + np.float32(0.5 + i))
        rows = rows_from_fields(lifted, "n", "n", "n.pkl", axes)
        with pytest.raises(ConfigError, match=r"n\.dof_vel: --reset-velocity recorded needs"):
            replayer.velocities(rows)
        assert replayer.recorded_keypoints(rows)[..., 2].min() > 0.5 + i - 0.1
        del rows


def test_trainer_velocities_follow_asap_motion_library():
    dt = 0.02
    ramp = np.outer(np.arange(40) * dt, [1.0, -2.0, 0.5])  # constant velocity: every formula exact
    np.testing.assert_allclose(root_linear_velocity(ramp, dt), np.tile([1.0, -2.0, 0.5], (40, 1)), atol=1e-12)
    dof = np.arange(6.0)[:, None] ** 2 * dt
    np.testing.assert_allclose(joint_velocity(dof, dt)[:, 0], [1, 3, 5, 7, 9, 7])  # last repeats the one before
    step = np.zeros((21, 1))
    step[10:] = 1.0
    smoothed = gaussian_filter_rows(step)
    assert smoothed[0, 0] == 0.0 and smoothed[-1, 0] == pytest.approx(1.0) and 0.0 < smoothed[10, 0] < 1.0
    assert abs(smoothed[9, 0] + smoothed[10, 0] - 1.0) < 1e-12  # symmetric kernel (scipy sigma 2, truncate 4)
