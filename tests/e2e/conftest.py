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


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(item: pytest.Item, call: pytest.CallInfo[None]):
    """A failed test's report shows every simulator LowState stall so far, each attributed
    (:mod:`asap_ros.sim.stalls`): a safety limit tripped by the machine is told from the product's;
    and the newest nodes' warnings and errors, where a latched fault names its reason."""
    report = yield
    if report.failed and HERE in item.path.parents:
        from asap_ros.testing.ros_system import node_warning_report
        from asap_ros.testing.sim_process import stall_report

        for title, text in (("asap_sim stalls", stall_report()), ("node warnings and errors", node_warning_report())):
            if text:
                report.sections.append((title, text))
    return report


KICK = "policies/kick_level1.yaml"


@pytest.fixture(scope="session")
def nominal_kick_session(tmp_path_factory, assets):
    """``asap-ros sim --record`` of the kick on the nominal robot (``sim_nominal``, shared with
    ``sim_session_bag``): the gap and delta-check tests' reference session, its motion free of
    simulator stalls (a stall's catch-up applies commands the recording places elsewhere)."""
    from asap_ros.testing.sim_sessions import record_sim_session

    return record_sim_session(tmp_path_factory.getbasetemp() / "sim_nominal", profile="nominal", policy=KICK,
                              steady_motion=True)  # fmt: skip


@pytest.fixture(scope="session")
def weak_knees_kick_session(tmp_path_factory, assets):
    """The same on the robot whose knees give 60% torque (``config/profiles/weak_knees.yaml``)."""
    from asap_ros.testing.sim_sessions import record_sim_session

    return record_sim_session(tmp_path_factory.getbasetemp() / "sim_weak_knees", profile="weak_knees", policy=KICK,
                              steady_motion=True)  # fmt: skip


@pytest.fixture(scope="session")
def sim_session_bag(nominal_kick_session) -> Path:
    """A session recorded the way an operator records one: ``asap-ros sim --record`` (kick_level1
    on the simulated G1 in real time, asap_recorder as its own process). Heavy: one real-time
    run, the same one the export, metrics and gap tests read (``nominal_kick_session``)."""
    return nominal_kick_session.bag
