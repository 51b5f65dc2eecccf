"""Shared fixtures: the ASAP assets and an isolated DDS domain per test process."""

from __future__ import annotations

import os
import sys
from pathlib import Path

import pytest

from asap_ros.config.assets import asset_root
from asap_ros.runtime.domains import process_domain


@pytest.fixture(scope="session")
def assets() -> Path:
    """ASAP's published assets (``../shared/asap-assets`` here, or ``$ASAP_ASSETS``)."""
    return asset_root()


@pytest.fixture(scope="session")
def dds_domain() -> int:
    """This test process's own DDS domain id (1..90, :func:`asap_ros.runtime.domains.process_domain`),
    so concurrent runs never cross-talk.

    unitree_sdk2py's channel factory is process-global: one domain per process. Tests that
    need a second domain start a subprocess. Only end-to-end tests (``tests/e2e/``) may use it.
    """
    return process_domain()


ONCE_STEP = ("kilted", (3, 11))
"""The CI step that runs the tests marked ``once`` (pure Python, no ROS, no DDS, no native
extension: a second distribution or interpreter proves nothing new of them)."""


def pytest_runtest_setup(item: pytest.Item) -> None:
    """A test outside ``tests/e2e/`` that asks for DDS fails: it would slip into the fast tier.
    A ``once`` test runs only in :data:`ONCE_STEP`."""
    if "dds_domain" in getattr(item, "fixturenames", ()) and item.get_closest_marker("e2e") is None:
        pytest.fail(f"{item.nodeid} uses DDS (dds_domain): move it to tests/e2e/", pytrace=False)
    if item.get_closest_marker("once") is not None:
        step = (os.environ.get("ASAP_ROS_DISTRO", "kilted"), sys.version_info[:2])
        if step != ONCE_STEP:
            pytest.skip(f"runs once, on ROS 2 {ONCE_STEP[0]} with Python 3.{ONCE_STEP[1][1]} (pure Python)")


_exit_status = 0
_STATE = os.environ.get("ASAP_TEST_STATE")
"""Folder where scripts/test finds the running test and the fault handler's output after a crash."""


def pytest_configure(config) -> None:
    """Fault-handler tracebacks of every thread go to a file that survives a crash (pytest's own
    handler writes to a stderr that a crashed run may never flush)."""
    if _STATE:
        import faulthandler

        config._asap_faulthandler_log = open(os.path.join(_STATE, "faulthandler.log"), "w")  # noqa: SIM115
        faulthandler.enable(file=config._asap_faulthandler_log, all_threads=True)


def pytest_runtest_logstart(nodeid, location) -> None:
    if _STATE:
        with open(os.path.join(_STATE, "current-test"), "w") as file:
            file.write(nodeid)


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


@pytest.fixture(scope="session")
def trainer_actors() -> Path:
    """Other trainers' G1 actors (``../shared/trainer-actors`` beside the checkout, or
    ``$ASAP_TRAINER_ACTORS``), used in place: never copied into the repository."""
    beside = Path(__file__).resolve().parents[1].parent / "shared" / "trainer-actors"
    root = Path(os.environ.get("ASAP_TRAINER_ACTORS", beside))
    if not (root / "SOURCE.md").is_file():
        pytest.fail(f"other trainers' actors not found at {root} (set ASAP_TRAINER_ACTORS)")
    return root
