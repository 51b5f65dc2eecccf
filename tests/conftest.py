"""Shared fixtures: the ASAP assets and an isolated DDS domain per test."""

from __future__ import annotations

import os
from pathlib import Path

import pytest

from asap_ros.assets import asset_root

@pytest.fixture(scope="session")
def assets() -> Path:
    """ASAP's published assets (``../shared/asap-assets`` here, or ``$ASAP_ASSETS``)."""
    return asset_root()


@pytest.fixture(scope="session")
def dds_domain() -> int:
    """This test process's own DDS domain id (1..200), so concurrent runs never cross-talk.

    unitree_sdk2py's channel factory is process-global: one domain per process. Tests that
    need a second domain start a subprocess.
    """
    return 1 + os.getpid() % 200


@pytest.fixture(scope="session")
def realtime_controller_config(tmp_path_factory) -> Path:
    """The package controller config, but 50 consecutive late steps before a fault instead of 5:
    the real-time end-to-end test runs on a shared 2-core machine whose stalls (simulator and
    control process on the same cores) trip the late-step fault; that fault has its own tests.
    (The gap and metrics sessions keep the default: a stalled run faults and is run again,
    since a degraded run would skew the figures they check.)"""
    import yaml

    from asap_ros.paths import config_file

    data = yaml.safe_load(config_file("controller.yaml").read_text())
    data["safety"]["max_consecutive_late_steps"] = 50
    path = tmp_path_factory.mktemp("controller") / "controller_realtime_tests.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.fixture(scope="session")
def sim_session_bag(tmp_path_factory, realtime_controller_config) -> Path:
    """A session recorded the way an operator records one: ``asap-ros sim --record`` (kick_level1
    on the simulated G1 in real time, asap_recorder as its own process). Heavy: one real-time
    run, shared by every test that reads a recorded session."""
    import subprocess
    import sys

    from asap_ros.paths import policies_dir, share_dir

    folder = tmp_path_factory.mktemp("sim_session")
    command = [sys.executable, "-m", "asap_ros.cli", "sim", "--policy", str(policies_dir() / "kick_level1.yaml"),
               "--controller-config", str(realtime_controller_config), "--record", str(folder / "bags"),
               "--out", str(folder / "run")]  # fmt: skip
    result = subprocess.run(command, cwd=share_dir(), capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stdout[-2000:] + result.stderr[-2000:]
    (bag,) = (folder / "bags").iterdir()
    return bag


_exit_status = 0


def pytest_sessionfinish(session, exitstatus) -> None:
    global _exit_status
    _exit_status = int(exitstatus)


def pytest_unconfigure(config) -> None:
    """Leave without interpreter finalisation once pytest has reported: Cyclone DDS threads
    still alive then (the unitree channel factory's participant is process-global and never
    deleted) can crash the interpreter's teardown, which would turn a passing run into a
    failing exit code. The exit status is pytest's own."""
    import sys

    sys.stdout.flush()
    sys.stderr.flush()
    os._exit(_exit_status)
