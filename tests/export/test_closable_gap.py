"""The share of the closable gap S and the measurability R, on rows the trainer simulator wrote itself.

A robot at 65% torque (its rows written by the trainer simulator with scaled motors) against the
nominal one: the oracle delta closes all of the gap above the floor (S near 1), a zero delta
none (S = 0), and a nominal recording against its own floor is not measurable (R = 1 < 2).
"""

from __future__ import annotations

import json
import pickle

import pytest

from asap_ros.cli import main
from asap_ros.config.robot import load_robot_model
from asap_ros.export.closable_gap import NOT_MEASURABLE
from asap_ros.export.openloop import OpenLoopReplayer, load_delta_model, run_openloop
from asap_ros.export.openloop_report import text_report, to_dict, write_json
from asap_ros.export.pose_aa import driven_joint_axes
from asap_ros.export.trainer_sim import TrainerSim
from asap_ros.testing.delta_oracle import write_oracle_delta
from asap_ros.testing.trainer_rows import export_fields, simulated_rows

WEAK = 0.65


@pytest.fixture(scope="module")
def sim(assets):
    return TrainerSim()


@pytest.fixture(scope="module")
def replayer(sim):
    return OpenLoopReplayer(sim)


@pytest.fixture(scope="module")
def rows(sim):
    return {"nominal": simulated_rows(1.0, steps=80, sim=sim), "weak": simulated_rows(WEAK, steps=80, sim=sim)}


def cells(summary: dict) -> dict:
    return summary["closable_gap"]["motions"]["simulated"]


def test_the_oracle_closes_the_closable_gap_and_a_zero_delta_none(rows, replayer, tmp_path):
    robot = load_robot_model()
    floor = run_openloop([rows["nominal"]], replayer, 1.0, 0.5)
    for factor, closes in ((WEAK, True), (1.0, False)):
        oracle = write_oracle_delta(tmp_path / f"d{factor}.onnx", robot, factor, exact=closes)  # 1.0, linear: zero
        model = load_delta_model(str(oracle))
        result = run_openloop([rows["weak"]], replayer, 1.0, 0.5, model)
        summary = json.loads(write_json(to_dict(result, floor, "nominal rows"), tmp_path / "o.json").read_text())
        for horizon, cell in cells(summary).items():
            assert cell["measurable"] and cell["R"] >= 2.0, (horizon, cell)
            assert cell["e_floor_mm"] < cell["e_none_mm"]
            if closes:
                assert cell["S"] > 0.8, (horizon, cell)
            else:
                assert cell["S"] == 0.0 and cell["e_delta_mm"] == cell["e_none_mm"], (horizon, cell)
        assert "| simulated | 1 s |" in text_report(summary)


def test_the_floor_given_the_true_defect_is_the_replay_of_the_weak_robot(rows, tmp_path):
    """``--profile torque65``: the simulator with the robot's own defect replays its rows as closely as
    the nominal simulator replays the nominal rows (both miss only the wrists and the warm start)."""
    given = OpenLoopReplayer(TrainerSim(profile="torque65"))
    floor = run_openloop([rows["weak"]], given, 1.0, 0.5)
    result = run_openloop([rows["weak"]], OpenLoopReplayer(TrainerSim()), 1.0, 0.5)
    cell = cells(to_dict(result, floor, "profile torque65"))["1"]
    assert cell["R"] > 10.0 and cell["S"] is None, cell  # no delta: no share


def test_a_nominal_recording_against_its_own_floor_is_not_measurable(rows, replayer):
    result = run_openloop([rows["nominal"]], replayer, 1.0, 0.5)
    summary = to_dict(result, result, "itself")
    for cell in cells(summary).values():
        assert cell["R"] == pytest.approx(1.0) and not cell["measurable"]
    assert NOT_MEASURABLE in text_report(summary)
    without_floor = to_dict(result)
    assert cells(without_floor)["1"]["e_floor_mm"] is None and cells(without_floor)["1"]["R"] is None


def test_openloop_reports_the_share_against_a_floor_or_a_profile(rows, tmp_path, capsys):
    """``asap-ros openloop --floor NOMINAL...`` / ``--profile``: both in the JSON and the table."""
    axes, robot = driven_joint_axes(), load_robot_model()
    paths = {}
    for name, motion_rows in rows.items():
        stem = f"{name}_ep001_simulated"
        paths[name] = tmp_path / f"{stem}.pkl"
        paths[name].write_bytes(pickle.dumps({stem: export_fields(motion_rows, motion_rows.action, axes)}))
    oracle = write_oracle_delta(tmp_path / "oracle.onnx", robot, WEAK)
    for floor in (["--floor", str(paths["nominal"])], ["--profile", "torque65"]):
        out = tmp_path / "o.json"
        assert main(["openloop", str(paths["weak"]), "--delta", str(oracle), "--stride", "0.5", "--json", str(out),
                     "--png", str(tmp_path / "o.png"), *floor]) == 0  # fmt: skip
        summary = json.loads(out.read_text())
        assert summary["reset_velocity"] == "measured"
        gap = summary["closable_gap"]
        assert floor[1] in gap["floor"], gap["floor"]
        for horizon, cell in gap["motions"]["simulated"].items():
            assert cell["measurable"] and cell["S"] > 0.5, (floor, horizon, cell)
        assert "closable gap per motion" in capsys.readouterr().out


def test_the_exact_oracle_recomputed_every_physics_step_closes_all_of_it(rows, replayer, tmp_path):
    """Held per policy step the exact oracle closes most of the gap; recomputed from the joint state
    before every physics step (as the trainer's PD would) it closes all of it: the rows were written
    by the same simulator with scaled motors."""
    oracle = load_delta_model(str(write_oracle_delta(tmp_path / "oracle.onnx", load_robot_model(), WEAK)))
    result = run_openloop([rows["weak"]], replayer, 1.0, 0.5, oracle, physics_rate=True)
    summary = to_dict(result, run_openloop([rows["nominal"]], replayer, 1.0, 0.5), "nominal rows")
    for horizon, cell in cells(summary).items():
        assert cell["S_physics_rate"] > 0.99 and cell["S_physics_rate"] > cell["S"], (horizon, cell)
    assert summary["delta"]["physics_rate"]["mean_abs_scaled_delta_rad"]
    assert "Δa every physics step" in text_report(summary)
