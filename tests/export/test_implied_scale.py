"""The per-joint torque scale a delta model implies, read from the model's own outputs.

ASAP's linear perfect delta for a robot at ``s`` × torque is ``0.25·Δa = (s − 1)·u``: read back it
gives ``s`` on every joint, whatever the motion; a fitted model of rows written for a robot with
weak knees (0.5 ×) reads the knees far below full torque and the other joints near it.
"""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.config.robot import load_robot_model
from asap_ros.export.delta_fit import fit_delta, report_text
from asap_ros.export.implied_scale import model_scale
from asap_ros.export.openloop import OpenLoopReplayer, load_delta_model, run_openloop
from asap_ros.export.openloop_report import text_report, to_dict
from asap_ros.export.trainer_sim import TrainerSim
from asap_ros.testing.delta_oracle import write_oracle_delta
from asap_ros.testing.trainer_rows import simulated_rows
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

KNEES = ("left_knee_joint", "right_knee_joint")


@pytest.fixture(scope="module")
def replayer(assets):
    return OpenLoopReplayer(TrainerSim())


@pytest.fixture(scope="module")
def knee_scale() -> np.ndarray:
    scale = np.ones(29)
    scale[[3, 9]] = 0.5
    return scale


def test_the_linear_oracle_reads_back_as_its_torque_scale(replayer, knee_scale, tmp_path):
    robot = load_robot_model()
    scale = np.linspace(0.6, 1.2, 29)
    model = load_delta_model(str(write_oracle_delta(tmp_path / "linear.onnx", robot, scale, exact=False)))
    rows = simulated_rows(0.8, steps=60, sim=replayer.sim)
    summary = to_dict(run_openloop([rows], replayer, 1.0, 0.5, model))
    implied = summary["delta"]["implied_torque_scale"]
    names = [robot.joint_names[i] for i in DRIVEN_MOTORS]
    np.testing.assert_allclose([implied[n] for n in names], scale[DRIVEN_MOTORS], atol=1e-3)
    probe = np.random.default_rng(0).normal(size=(200, 108)).astype(np.float32)  # any inputs: the same reading
    np.testing.assert_allclose(model_scale(model, probe, robot, clamp=False), scale[DRIVEN_MOTORS], atol=1e-3)
    lines = text_report(summary).splitlines()
    at = lines.index(next(line for line in lines if line.startswith("implied torque scale")))
    assert lines[at + 1].split() == ["left_hip_pitch_joint", "at", "60%"], lines[at + 1]


def test_a_fitted_model_reads_the_weak_knees(replayer, knee_scale):
    rows = [simulated_rows(knee_scale, steps=90, seed=seed, motion=f"motion{seed}", sim=replayer.sim)
            for seed in range(2)]  # fmt: skip
    _, report, _ = fit_delta(rows, replayer, kind="joint")
    implied = report.implied_torque_scale
    others = [s for n, s in implied.items() if n not in KNEES and s is not None]
    for knee in KNEES:
        assert implied[knee] < 0.85, implied
    assert abs(np.median(others) - 1.0) < 0.1, implied
    assert "implied torque scale per joint" in report_text(report)
