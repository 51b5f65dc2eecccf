"""Everything in this folder is an end-to-end test: it starts processes, uses DDS or runs the
simulator in real time. Each is marked ``e2e`` here, by folder, so none can be left unmarked;
the fast tier (``scripts/test -m "not e2e"``) leaves them out."""

from __future__ import annotations

from pathlib import Path

import pytest

HERE = Path(__file__).resolve().parent


def pytest_collection_modifyitems(config: pytest.Config, items: list[pytest.Item]) -> None:
    for item in items:
        if HERE in item.path.parents:
            item.add_marker(pytest.mark.e2e)


@pytest.fixture(scope="session")
def realtime_controller_config(tmp_path_factory) -> Path:
    """The package controller config, but 50 consecutive late steps before a fault instead of 5:
    the real-time end-to-end test runs on a shared 2-core machine whose stalls (simulator and
    control process on the same cores) trip the late-step fault; that fault has its own tests.
    (The gap and metrics sessions keep the default: a stalled run faults and is run again,
    since a degraded run would skew the figures they check.)"""
    import yaml

    from asap_ros.config.paths import config_file

    data = yaml.safe_load(config_file("controller.yaml").read_text())
    data["safety"]["max_consecutive_late_steps"] = 50
    path = tmp_path_factory.mktemp("controller") / "controller_realtime_tests.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


KICK = "policies/kick_level1.yaml"


@pytest.fixture(scope="session")
def nominal_kick_session(tmp_path_factory, assets):
    """``asap-ros sim --record`` of the kick on the nominal robot (``sim_nominal``, shared with
    ``sim_session_bag``): the gap and delta-check tests' reference session."""
    from asap_ros.testing.sim_sessions import record_sim_session

    return record_sim_session(tmp_path_factory.getbasetemp() / "sim_nominal", profile="nominal", policy=KICK)


@pytest.fixture(scope="session")
def weak_knees_kick_session(tmp_path_factory, assets):
    """The same on the robot whose knees give 60% torque (``config/profiles/weak_knees.yaml``)."""
    from asap_ros.testing.sim_sessions import record_sim_session

    return record_sim_session(tmp_path_factory.getbasetemp() / "sim_weak_knees", profile="weak_knees", policy=KICK)


@pytest.fixture(scope="session")
def sim_session_bag(tmp_path_factory) -> Path:
    """A session recorded the way an operator records one: ``asap-ros sim --record`` (kick_level1
    on the simulated G1 in real time, asap_recorder as its own process). Heavy: one real-time
    run, the same one the export, metrics and gap tests read (``sim_nominal``)."""
    from asap_ros.testing.sim_sessions import record_sim_session

    work = tmp_path_factory.getbasetemp() / "sim_nominal"
    return record_sim_session(work, profile="nominal", policy="policies/kick_level1.yaml").bag
