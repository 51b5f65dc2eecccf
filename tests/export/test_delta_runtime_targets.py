"""``--targets runtime``: the trainer simulator's targets clipped to the joint limits by the runtime's own
clip, and a delta fitted under them on a robot whose actions run past a limit (real MuJoCo, ONNX Runtime)."""

from __future__ import annotations

import numpy as np
import pytest

from asap_ros.cli import main
from asap_ros.config.paths import policies_dir
from asap_ros.config.robot import load_robot_model
from asap_ros.core.state import RobotState
from asap_ros.export.delta_fit import fit_delta, write_model
from asap_ros.export.openloop import OpenLoopReplayer, load_delta_model, run_openloop, targets_mismatch
from asap_ros.export.openloop_report import text_report, to_dict
from asap_ros.export.trainer_sim import TrainerSim
from asap_ros.runtime.policies import load_policy_runner
from asap_ros.testing.delta_oracle import write_oracle_delta
from asap_ros.testing.trainer_rows import simulated_rows
from asap_ros.tracking.kinematics import DRIVEN_MOTORS

LEFT_KNEE = 3
"""Motor index of the weak joint."""
RIGHT_ANKLE_ROLL = 18
"""Driven index whose actions run past the limit (ASAP's actors do it in most rows)."""
OFFSET = 6.0
"""Raw action offset of the right ankle roll: 1.5 rad of target, far past its 0.26 rad limit."""


@pytest.fixture(scope="module")
def runtime_sim(assets):
    return TrainerSim(targets="runtime")


def test_runtime_targets_are_what_the_runtime_sent_for_an_action_past_a_limit(runtime_sim):
    robot = load_robot_model()
    runner = load_policy_runner(policies_dir() / "CR7_level1.yaml", robot)
    assert np.array_equal(runner.spec.driven_indices, DRIVEN_MOTORS)
    runner.reset()
    for _ in range(60):  # the actor on a robot standing still: within a few steps it asks past a limit
        out = runner.step(RobotState(q=robot.default_q.copy()))
        unclamped = 0.25 * out.raw_action.astype(np.float64) + robot.default_q[DRIVEN_MOTORS]
        beyond = (unclamped > robot.q_upper[DRIVEN_MOTORS]) | (unclamped < robot.q_lower[DRIVEN_MOTORS])
        if beyond.any():
            break
    assert beyond.any(), "the actor should put a target past a joint limit within 60 steps"
    runtime = runtime_sim.targets(out.raw_action, np.zeros(23))[DRIVEN_MOTORS]
    np.testing.assert_array_equal(runtime, out.q_target[DRIVEN_MOTORS])
    trainer = TrainerSim().targets(out.raw_action, np.zeros(23))[DRIVEN_MOTORS]
    np.testing.assert_allclose(trainer, unclamped, atol=1e-12)
    assert not np.allclose(trainer[beyond], runtime[beyond])


@pytest.fixture(scope="module")
def weak_knee_scale():
    scale = np.ones(29)
    scale[LEFT_KNEE] = 0.5
    return scale


@pytest.fixture(scope="module")
def clamped_rows(runtime_sim, weak_knee_scale):
    """A robot with a weak left knee whose right ankle roll is asked past its limit, clipped as the runtime does."""
    offset = np.zeros(23)
    offset[RIGHT_ANKLE_ROLL] = OFFSET
    return [simulated_rows(weak_knee_scale, steps=90, seed=seed, motion=f"motion{seed}", sim=runtime_sim,
                           action_offset=offset) for seed in range(3)]  # fmt: skip


def test_the_runtime_oracle_needs_no_delta_for_the_clamp(clamped_rows, runtime_sim, weak_knee_scale, tmp_path):
    oracle = write_oracle_delta(tmp_path / "oracle.onnx", load_robot_model(), weak_knee_scale, runtime=True)
    summary = to_dict(run_openloop(clamped_rows[:1], OpenLoopReplayer(runtime_sim), 1.0, 0.5,
                                   load_delta_model(str(oracle))))  # fmt: skip
    without = summary["horizons"]["1"]["g_mpjpe_mm"]["without"]["value"]
    with_oracle = summary["horizons"]["1"]["g_mpjpe_mm"]["with"]["value"]
    assert without > 20.0 and with_oracle < 0.2 * without, (without, with_oracle)
    assert summary["delta"]["ranking"][0]["joint"] == "left_knee_joint"
    assert summary["delta"]["mean_abs_scaled_delta_rad"]["right_ankle_roll_joint"] < 1e-3


def test_a_runtime_targets_fit_ranks_the_weak_joint_first(clamped_rows, runtime_sim, tmp_path):
    rows = clamped_rows
    replayer = OpenLoopReplayer(runtime_sim)
    model, report, _ = fit_delta(rows[:2], replayer, kind="ridge", fit_ticks=1)  # the one-step targets rank joints
    assert report.targets == "runtime"
    sizes = sorted(report.conditioning, key=lambda c: -c.mean_abs_scaled_target_rad)
    assert sizes[0].joint == "left_knee_joint", [(c.joint, c.mean_abs_scaled_target_rad) for c in sizes[:3]]
    path = write_model(model, report, tmp_path / "delta.onnx", replayer)
    held_out = to_dict(run_openloop(rows[2:], replayer, 1.0, 0.25, load_delta_model(str(path))))
    assert held_out["targets"] == "runtime"
    assert held_out["delta"]["ranking"][0]["joint"] == "left_knee_joint", held_out["delta"]["ranking"][:3]
    assert held_out["horizons"]["0.5"]["mpjpe_mm"]["with_change"]["value"] < -0.1
    assert "targets: runtime" in text_report(held_out)
    assert targets_mismatch(load_delta_model(str(path)), "runtime") is None
    assert "fitted with --targets runtime and is replayed with --targets trainer" in str(
        targets_mismatch(load_delta_model(str(path)), "trainer"))


def test_targets_option_refuses_an_unknown_semantics(tmp_path, capsys):
    with pytest.raises(SystemExit):
        main(["openloop", str(tmp_path / "r.pkl"), "--targets", "robot"])
    assert "--targets: invalid choice: 'robot'" in capsys.readouterr().err
