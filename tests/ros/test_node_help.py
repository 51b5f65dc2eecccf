"""Every node's ``--help`` lists its parameters with their defaults and starts nothing (no rclpy)."""

from __future__ import annotations

import pytest

from asap_ros.ros import deploy_node, mocap_node, recorder_node, supervisor_node


@pytest.mark.parametrize("module, some_parameter", [
    (deploy_node, "control_rate_hz"), (supervisor_node, "estop_combo"),
    (recorder_node, "flush_period_s"), (mocap_node, "velocity_filter_alpha"),
])
def test_help_lists_parameters_with_defaults_and_starts_nothing(module, some_parameter, capsys, monkeypatch):
    import rclpy

    monkeypatch.setattr(rclpy, "init", lambda **_: pytest.fail("--help must not start rclpy"))
    assert module.main(["--help"]) == 0
    out = capsys.readouterr().out
    assert out.startswith(f"usage: {module.NODE_NAME} ") and f"  {some_parameter} = " in out
    assert "config/" in out and "defaults from" in out
