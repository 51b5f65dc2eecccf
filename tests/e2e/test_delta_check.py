"""``asap-ros openloop`` and ``asap-ros delta fit`` on recorded simulated sessions (``asap-ros sim --record``).

The nominal and weak-knees kick sessions are the ones the gap test reads (``tests/e2e/conftest.py``:
recorded once per run); the 0.65 × torque robot gets a CR7 session of its own,
held in the band until TRACKING (the standing actor cannot hold it upright; see docs/delta.md).
"""

from __future__ import annotations

import json

import pytest

from asap_ros.cli import main
from asap_ros.config.robot import load_robot_model
from asap_ros.sim.profile import load_profile
from asap_ros.testing.delta_oracle import write_oracle_delta
from asap_ros.testing.sim_sessions import record_sim_session

KNEES = {"left_knee_joint", "right_knee_joint"}
TORQUE65_SKIP_S = 0.5
"""The torque65 session's band is released as TRACKING starts: a landing no replay reproduces."""


@pytest.fixture(scope="module")
def torque65(tmp_path_factory, assets):
    import yaml

    from asap_ros.config.paths import config_file

    data = yaml.safe_load(config_file("controller.yaml").read_text())
    data["hold"]["policy"] = None  # PD hold in the band until TRACKING
    config = tmp_path_factory.mktemp("controller") / "pd_hold.yaml"
    config.write_text(yaml.safe_dump(data))
    # a motion recorded without a simulator stall: the oracle knows the torque scale, not the
    # host's steal (see docs/delta.md)
    return record_sim_session(tmp_path_factory.getbasetemp() / "sim_torque65", profile="torque65",
                              policy="policies/CR7_level1.yaml", controller_config=config,
                              steady_motion=True)  # fmt: skip


def _openloop(tmp_path, name: str, *args: str) -> dict:
    out = tmp_path / f"{name}.json"
    assert main(["openloop", *args, "--stride", "0.5", "--json", str(out)]) == 0
    return json.loads(out.read_text())


def test_lag_scan_and_a_zero_delta_on_the_nominal_session(nominal_kick_session, tmp_path, capsys):
    zero = write_oracle_delta(tmp_path / "zero.onnx", load_robot_model(), 1.0, exact=False)
    summary = _openloop(tmp_path, "nominal", str(nominal_kick_session.bag), "--delta", str(zero))
    print(capsys.readouterr().out)
    scan = summary["lag_scan"]
    assert scan["best_lag"] == 0 and scan["pairing_ok"], scan  # ±1 step at least 10% worse
    for horizon, metrics in summary["horizons"].items():
        for metric, figures in metrics.items():
            assert figures["with"] == figures["without"], (horizon, metric)
    assert (tmp_path / "nominal.png").read_bytes()[:8] == b"\x89PNG\r\n\x1a\n"


def test_a_bag_and_its_asap_export_replay_identically(nominal_kick_session, tmp_path):
    assert main(["export", str(nominal_kick_session.bag), "--format", "asap", "--out", str(tmp_path / "export")]) == 0
    (pickle,) = (tmp_path / "export").glob("*.pkl")
    from_bag = _openloop(tmp_path, "bag", str(nominal_kick_session.bag))
    from_pickle = _openloop(tmp_path, "pickle", str(pickle))
    assert from_bag["horizons"] == from_pickle["horizons"] and from_bag["lag_scan"] == from_pickle["lag_scan"]


def test_the_oracle_delta_on_the_torque65_session(torque65, tmp_path, capsys):
    robot = load_robot_model()
    oracle = write_oracle_delta(tmp_path / "oracle.onnx", robot, load_profile("torque65", robot.joint_names).torque_scale)
    summary = _openloop(tmp_path, "torque65", str(torque65.bag), "--delta", str(oracle), "--skip-start",
                        str(TORQUE65_SKIP_S), "--finetune-semantics")  # fmt: skip
    print(capsys.readouterr().out)
    assert summary["windows"] >= 2
    for horizon in ("0.25", "0.5", "1"):  # lower at every horizon, the interval above zero
        change = summary["horizons"][horizon]["g_mpjpe_mm"]["with_change"]
        print(horizon, change)
        assert change["ci95"][1] < 0, (horizon, change)
    assert summary["horizons"]["1"]["g_mpjpe_mm"]["with_change"]["value"] < -0.3
    assert summary["delta"]["warning"] is None and summary["delta"]["finetune"] is not None


def test_a_delta_fitted_on_the_weak_knees_session(weak_knees_kick_session, tmp_path, capsys):
    model, report = tmp_path / "delta.onnx", tmp_path / "fit.json"
    # one-step targets: each is the correction of one step, so their sizes rank the weak joints
    # (a 3-step target, the default, spreads a contact's jolt over its window and ranks nothing)
    assert main(["delta", "fit", str(weak_knees_kick_session.bag), "--fit-ticks", "1", "--out", str(model),
                 "--report", str(report)]) == 0
    out = capsys.readouterr().out
    assert "nothing could be held out" in out and "per joint: mean |0.25·Δa|" in out
    fit = json.loads(report.read_text())
    sizes = sorted(fit["conditioning"], key=lambda c: -c["mean_abs_scaled_target_rad"])
    assert KNEES & {c["joint"] for c in sizes[:3]}, sizes[:4]
    assert all(c["determined_share"] > 0.9 for c in fit["conditioning"] if c["joint"] in KNEES)
    summary = _openloop(tmp_path, "fitted", str(weak_knees_kick_session.bag), "--delta", str(model))
    assert summary["horizons"]["0.25"]["mpjpe_mm"]["with_change"]["value"] < 0
    assert KNEES & {r["joint"] for r in summary["delta"]["ranking"][:3]}


def test_bad_inputs_name_the_problem(nominal_kick_session, tmp_path, capsys):
    assert main(["openloop", str(nominal_kick_session.bag), "--mocap-topic", "/no/mocap"]) == 2
    assert "/no/mocap" in capsys.readouterr().err
    import numpy as np

    from asap_ros.export.onnx_file import write_mlp_onnx

    wrong = write_mlp_onnx(tmp_path / "wrong.onnx", [(np.zeros((380, 23), np.float32), np.zeros(23, np.float32))])
    assert main(["openloop", str(nominal_kick_session.bag), "--delta", str(wrong)]) == 2
    assert "wrong.onnx: delta model.input.dim: is 108" in capsys.readouterr().err
