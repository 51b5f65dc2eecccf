"""run_node before rclpy: ``--help``, arguments that are not the node's, a broken defaults file
(each refused with exit 2 and one line naming the node, without starting rclpy)."""

from __future__ import annotations

import dataclasses

import pytest

from asap_ros.config.node_params import MOCAP, RECORDER
from asap_ros.ros.node_main import EXIT_OK, EXIT_REFUSED, NodeBehaviour, run_node, unknown_arguments


@pytest.fixture
def no_rclpy(monkeypatch):
    import rclpy

    monkeypatch.setattr(rclpy, "init", lambda **_: pytest.fail("rclpy must not start"))


def never_built(*_):
    pytest.fail("the node must not be built")


def test_the_nodes_own_arguments_are_those_before_ros_args():
    assert unknown_arguments(["--help", "--ros-args", "-p", "x:=1"]) == []
    assert unknown_arguments(["--verbose", "--ros-args", "--help"]) == ["--verbose"]
    assert unknown_arguments(["--ros-args", "-p", "mode:=topic"]) == []


def test_help_prints_the_schema_and_builds_nothing(no_rclpy, capsys):
    assert run_node(MOCAP, "asap_mocap: a summary", never_built, ["--help"]) == EXIT_OK
    out = capsys.readouterr().out
    assert out.startswith("usage: asap_mocap ") and "asap_mocap: a summary" in out
    assert "  mode = 'vicon'  (str; one of vicon, topic): " in out


def test_an_unknown_argument_is_refused_naming_the_node_and_argument(no_rclpy, capsys):
    assert run_node(RECORDER, "summary", never_built, ["--output", "x", "--ros-args"]) == EXIT_REFUSED
    err = capsys.readouterr().err
    assert err.startswith("asap_recorder: refusing to start: unknown argument '--output'") and err.count("\n") == 1


def test_a_broken_defaults_file_is_refused_naming_file_key_and_value(no_rclpy, capsys, tmp_path):
    bad = tmp_path / "mocap.yaml"
    bad.write_text(MOCAP.defaults_path().read_text().replace("rate: 100.0", "rate: fast"))
    schema = dataclasses.replace(MOCAP, defaults_file=str(bad))
    assert run_node(schema, "summary", never_built, ["--help"]) == EXIT_REFUSED
    assert capsys.readouterr().err == f"asap_mocap: refusing to start: {bad}: rate: must be a number (got 'fast')\n"


def test_node_behaviour_defaults():
    behaviour = NodeBehaviour()
    behaviour.start()
    assert (behaviour.finished(), behaviour.shutdown()) == (False, EXIT_OK)
