"""``asap-ros gap`` on recorded simulated sessions: the weak-knees robot and the nominal one.

Both sessions are real ``asap-ros sim --record`` runs of ASAP's kick actor; the "real robot" of
the first has both knees at 60% torque (config/profiles/weak_knees.yaml). Replayed open-loop
in the nominal simulator, the knees must stand out there, and nothing must stand out for
the nominal robot.
"""

from __future__ import annotations

import json

from asap_ros.cli import main
from asap_ros.export.gap_report import bag_gap, ranking_table

KNEES = {"left_knee_joint", "right_knee_joint"}
LEG_PARTS = ("_hip_", "_knee_", "_ankle_")
"""A weak knee's sag is carried by its leg: the hip and ankle joints of the same leg diverge with
it, and on the kick's stance leg they can rank above the other, less loaded knee (near neighbours
swap places from run to run of the real-time session). Above a knee only leg joints may rank,
never the waist or an arm."""
SKIP_START_S = 1.0
"""The simulated sessions release the elastic band as TRACKING starts: the robot drops a few
centimetres onto its feet in the first second, a landing no open-loop replay reproduces."""


def test_weak_knees_rank_first(weak_knees_kick_session, tmp_path, capsys):
    assert main(["gap", str(weak_knees_kick_session.bag), "--out", str(tmp_path), "--skip-start", str(SKIP_START_S)]) == 0
    print(capsys.readouterr().out)
    ranking = json.loads((tmp_path / "gap.json").read_text())["ranking"]
    assert ranking[0]["joint"] in KNEES
    knees = [i for i, r in enumerate(ranking) if r["joint"] in KNEES]
    assert all(ranking[i]["stands_out"] for i in knees), ranking[:4]
    above = [r["joint"] for r in ranking[:max(knees) + 1]]
    assert all(any(part in joint for part in LEG_PARTS) for joint in above), ranking[:max(knees) + 1]
    report = (tmp_path / "report.md").read_text()
    assert "left_knee_joint" in report.split("| rank |")[0]  # named in the verdict above the table
    for png in ("divergence_by_joint.png", "error_growth.png", "ep001_kick_level1.png"):
        assert (tmp_path / png).read_bytes()[:8] == b"\x89PNG\r\n\x1a\n", png


def test_nominal_divergence_is_small_and_uniform(nominal_kick_session, weak_knees_kick_session):
    gap = bag_gap(nominal_kick_session.bag, progress=False, skip_start_s=SKIP_START_S)
    rows = gap.ranking()
    print(ranking_table(rows, gap.rank_horizon_s))
    assert not any(r.stands_out for r in rows), rows[0]
    weak_gap = bag_gap(weak_knees_kick_session.bag, progress=False, skip_start_s=SKIP_START_S)
    weak = {r.joint: r.early_rms_rad for r in weak_gap.ranking()}
    assert rows[0].early_rms_rad < min(weak[k] for k in KNEES)  # the nominal robot's worst joint < either weak knee


def test_gap_needs_mocap_and_a_positive_window(nominal_kick_session, tmp_path, capsys):
    assert main(["gap", str(nominal_kick_session.bag), "--out", str(tmp_path), "--mocap-topic", "/no/mocap"]) == 2
    assert "/no/mocap" in capsys.readouterr().out
    assert main(["gap", str(nominal_kick_session.bag), "--out", str(tmp_path), "--window", "0"]) == 2
    assert "--window: must be positive" in capsys.readouterr().out
