"""``asap-ros metrics`` on a recorded simulated session agrees with the run's own summary.

The session is real: ``asap-ros sim --record`` (MuJoCo G1 over DDS, ASAP's kick actor,
asap_recorder).
The run's summary computes its metrics from the simulator's ground truth; ``metrics`` from
the bag alone (mocap pelvis pose, LowState joints, recorded phase).
"""

from __future__ import annotations

import json

import pytest

from asap_ros.cli import main
from asap_ros.testing.sim_sessions import record_sim_session

POLICY = "policies/kick_level1.yaml"
MM_TOLERANCE = 1.0
METRICS = ("g_mpjpe_mm", "mpjpe_mm", "vel_mm_per_frame", "acc_mm_per_frame2")


@pytest.fixture(scope="module")
def session(tmp_path_factory, assets):
    return record_sim_session(tmp_path_factory.getbasetemp() / "sim_nominal", profile="nominal", policy=POLICY)


def test_metrics_agree_with_the_sim_summary_within_1_mm(session, capsys):
    assert main(["metrics", str(session.bag), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["errors"] == []
    (episode,) = result["episodes"]
    ours, sims = episode["tracking"], session.summary["tracking"]
    print({m: (round(ours[m], 3), round(sims[m], 3)) for m in METRICS})
    for metric in METRICS:
        assert abs(ours[metric] - sims[metric]) < MM_TOLERANCE, (metric, ours[metric], sims[metric])
    assert ours["success"] == sims["success"] and ours["completed"] == sims["completed"]
    assert episode["cut_short"] == (not sims["completed"])  # the motion's own end, not what followed it
    assert ours["actor_steps"] == sims["actor_steps"]
    assert episode["motion"] == "kick_level1" and episode["root_source"] == "mocap"
    assert set(ours["joint_rmse_rad"]) == set(sims["joint_rmse_rad"]) and len(ours["joint_rmse_rad"]) == 23
    for joint, rmse in sims["joint_rmse_rad"].items():
        assert abs(ours["joint_rmse_rad"][joint] - rmse) < 1e-6, joint  # the very LowStates the actor used


def test_metrics_text_output_and_unknown_clip(session, capsys, tmp_path):
    assert main(["metrics", str(session.bag)]) == 0
    out = capsys.readouterr().out
    assert "E_g-mpjpe" in out and "worst joints (RMSE)" in out
    assert main(["metrics", str(session.bag), "--clip", str(tmp_path / "nope.pkl")]) == 2
    assert "nope.pkl: clip file not found" in capsys.readouterr().out
