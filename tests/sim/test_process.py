"""``asap_sim``'s command line as the harness and ``asap-ros sim`` build it, and the checks of its
start-up options (refused before any DDS or MuJoCo work)."""

from __future__ import annotations

import sys
from pathlib import Path

import pytest

from asap_ros.sim.main import build_parser, main
from asap_ros.sim.process import read_stats, sim_command


def test_sim_command_passes_only_the_options_given():
    command = sim_command(7, stats_json=Path("/tmp/s.json"), mocap_rate_hz=0, realtime_priority=90, wait_for_readers=3)
    assert command[:3] == [sys.executable, "-m", "asap_ros.sim.main"]
    options = build_parser().parse_args(command[3:])
    assert (options.domain, options.interface, options.stats_json) == (7, "lo", Path("/tmp/s.json"))
    assert (options.mocap_rate, options.realtime_priority, options.wait_for_readers) == (0.0, 90, 3)
    assert options.profile is None and options.lowstate_rate is None and options.wait_for_mocap_readers == 0


def test_sim_command_runs_the_physics_realtime_and_its_start_up_at_normal_priority():
    command = sim_command(7, realtime_priority=90)
    assert command[0] != "chrt" and command[command.index("--realtime-priority") + 1] == "90"
    assert build_parser().parse_args(command[3:]).lowcmd_priority is None  # the reader at the physics' priority
    options = build_parser().parse_args(sim_command(7, realtime_priority=90, lowcmd_priority=79)[3:])
    assert (options.realtime_priority, options.lowcmd_priority) == (90, 79)


@pytest.mark.parametrize("option, value", [("--wait-for-readers", "-1"), ("--wait-for-mocap-readers", "-2"),
                                           ("--realtime-priority", "100"), ("--lowcmd-priority", "-1")])
def test_bad_start_up_options_are_refused_naming_the_option(option, value, capsys):
    with pytest.raises(SystemExit) as exit_:
        main(["--domain", "1", option, value])
    assert exit_.value.code == 2
    assert option in capsys.readouterr().err


def test_missing_statistics_say_why(tmp_path):
    assert "no simulator statistics" in read_stats(tmp_path / "absent.json")["error"]
    (tmp_path / "bad.json").write_text("{")
    assert str(tmp_path / "bad.json") in read_stats(tmp_path / "bad.json")["error"]
