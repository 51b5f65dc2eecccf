"""``asap-ros view`` live, in a real headless Chromium: the simulated G1, real asap_deploy and
asap_supervisor (each a process of the e2e harness), the view as its own process, one motion (APT_level1).

Heavy (processes, DDS, a browser): run under the team lock. Screenshots go to the test's
tmp_path. Timing is not judged; the page lags the robot by up to a few seconds on a loaded
2-core machine, so every check waits for the page to show what the system did. That includes a
safety fault: on these two cores the actor can be held back until it leaves its training
distribution (a fresh-clone CI run latched DAMPING before the page first showed HOLD; with one
more busy process, APT_level1 moved a shoulder target 4.02 rad in one step). The page must then
show DAMPING and the deploy node's reason; the robot stands again and the test goes on, at most
:data:`MAX_FAULTS` times.
"""

from __future__ import annotations

import os
import time
from pathlib import Path

import numpy as np
import pytest
import yaml

from asap_ros.config.robot import load_robot_model
from asap_ros.sim.dds_types import BAND_RELEASE, MOTOR_TEMPERATURE, MOTOR_TEMPERATURE_RELEASE
from asap_ros.testing.browser import ViewBrowser, robot_mask, robot_region_change
from asap_ros.testing.ros_system import System
from asap_ros.testing.view_process import ViewProcess

MOTION = "APT_level1"
"""ASAP's longest clip (7.6 s): the software-rendered page needs seconds per screenshot."""
PAGE_RATE_HZ = 5
"""Page updates per second: SwiftShader renders each in a good part of a second on these 2 cores;
at the default 15 the browser falls further and further behind."""
MODE = '[data-view="mode"]'
FAULT = '[data-view="fault"]'
MAX_FAULTS = 2
PHASE = '[data-view="phase"]'
PHASE_APART = 0.1
TEMPERATURE_TOLERANCE_C = 2.0
BROWSER_LOAD_SUPERVISOR_PARAMS = {"takeover_after_ms": 1000.0, "lease_ms": 800.0}
BROWSER_LOAD_DEPLOY_PARAMS = {"max_state_age_ms": 500.0, "lease_ms": 800.0, "command_timeout_ms": 500.0}
"""Not physical facts but this machine's load, beyond the harness's own (lease, late steps): Chromium
rendering WebGL in software on the same two cores (on a robot the page is opened on another
computer) held the deploy node's threads back by more than the shipped lease allows (the
supervisor rightly took over mid-motion), the LowState stream past the shipped 50 ms state age
(51.9 ms, a stale-state DAMPING during PREPARE). The deploy node's own lease cap follows the
supervisor's 800 ms, and its command timeout the 500 ms state age: a gap the stalled threads make
between two commands is the same load, not a robot that went limp."""
MIN_TEMPERATURE_CHANGE_C = 3.0
HOT_MOTOR, HOT_C = 3, 55
"""left_knee_joint reported at 55 C (below the 65 C start limit)."""
MIN_ROBOT_PIXELS = 2000
"""A rendered robot covers far more pixels than this in the test's viewport."""


def fast_thermal_profile(folder: Path) -> Path:
    """The nominal profile with motors heating in seconds, not minutes (the thermal model is the
    simulator's; only its time constant is shortened), staying below the controller's limits."""
    from asap_ros.config.paths import config_file

    data = yaml.safe_load(config_file("profiles/nominal.yaml").read_text())
    data["temperature"].update(time_constant_s=5.0, rise_at_limit_c=45.0)
    path = folder / "fast_thermal.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


VIEW_NODE_WRITERS = ("rt/rosout", "rt/parameter_events", "ros_discovery_info", "rr/asap_view/")
"""DDS writers an rclpy node has of its own: its log, parameter events, the ROS graph and its parameter
services' replies. A command would be any other: rt/lowcmd, rt/asap/..., a service request (rq/...)."""


def dds_participants() -> set:
    """Every participant on the domain, Cyclone's and Fast DDS's (rclpy) alike."""
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsParticipant

    from asap_ros.runtime.dds import participant

    return {sample.key for sample in BuiltinDataReader(participant(), BuiltinTopicDcpsParticipant).read(1000)}


def dds_writers_of(participants: set) -> list[str]:
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsPublication

    from asap_ros.runtime.dds import participant

    reader = BuiltinDataReader(participant(), BuiltinTopicDcpsPublication)
    return sorted(s.topic_name for s in reader.read(1000) if s.participant_key in participants)


def page_temperatures(browser: ViewBrowser) -> dict[str, int]:
    cells = browser.page.locator("[data-joint]")
    return {cells.nth(i).get_attribute("data-joint"): int(cells.nth(i).inner_text().split()[0])
            for i in range(cells.count())}  # fmt: skip


def wait_page_shows_simulator_temperatures(browser: ViewBrowser, system: System, timeout_s: float = 30.0) -> dict[str, int]:
    """The 29 temperatures on the page, once every one is the simulator's (within
    :data:`TEMPERATURE_TOLERANCE_C`: both are rounded, and the page lags)."""
    names = load_robot_model().joint_names
    deadline = time.monotonic() + timeout_s
    while True:
        shown = page_temperatures(browser)
        simulated = dict(zip(names, system.sim.temperatures_c().tolist()))
        off = {n: (shown.get(n), round(simulated[n], 1)) for n in names if n not in shown or abs(shown[n] - simulated[n]) > TEMPERATURE_TOLERANCE_C}
        if not off:
            return shown
        if time.monotonic() > deadline:
            raise AssertionError(f"page temperatures differ from the simulator's (page, simulator): {off}")
        time.sleep(0.2)


def page_reaches(browser: ViewBrowser, system: System, mode: str, faults: list[str]) -> bool:
    """True once the page shows ``mode``. False after a fault on the way: the page showed DAMPING
    and the fault the deploy node latched, and the robot stands again (HOLD; the page past DAMPING)."""
    if browser.wait_text(MODE, lambda text: text in (mode, "DAMPING"), 60.0) == mode:
        return True
    assert system.ros.wait_mode("DAMPING", 5.0), system.ros.latched
    assert system.ros.spin_until(lambda: system.ros.latched.get("/asap_deploy/fault"), 5.0), system.ros.latched
    fault = system.ros.latched["/asap_deploy/fault"]
    browser.wait_text(FAULT, lambda text: text == fault, 30.0)
    faults.append(fault)
    print(f"\nthe deploy node faulted, and the page showed it: {fault}")
    assert len(faults) <= MAX_FAULTS, faults
    system.stand_off_the_band()
    browser.wait_text(MODE, lambda text: text != "DAMPING", 30.0)
    return False


def tracking_screenshots(browser: ViewBrowser, system: System, folder: Path, faults: list[str], runs: int = 3):
    """Two screenshots of the page during the motion, at phases at least :data:`PHASE_APART`
    apart, each taken while the page showed the motion with its ghost (the phase is read before
    and after each shot: a software-rendered screenshot takes seconds here). When one run of the
    motion does not give both, the motion runs again (at most ``runs`` times) and the second
    shot comes from a later run, at a phase :data:`PHASE_APART` past the first."""

    def tracking_phase() -> float | None:
        phase = browser.text(PHASE)
        shown = browser.text(MODE) == "TRACKING" and browser.text('[data-view="reference"]') == "ghost shown"
        return float(phase) if shown and phase != "—" else None

    shots: list[tuple[float, np.ndarray]] = []
    for run in range(1, runs + 1):
        ok, message = system.ros.trigger("/asap_deploy/start")
        assert ok, message
        if not page_reaches(browser, system, "TRACKING", faults):
            continue
        while browser.text(MODE) == "TRACKING":
            before = tracking_phase()
            if before is None or (shots and abs(before - shots[0][0]) < PHASE_APART):
                continue
            started = time.monotonic()
            image = browser.screenshot(folder / f"live_tracking_{run}_{len(shots)}.png", 0.0)
            after = tracking_phase()
            print(f"\nrun {run}: screenshot at phase {before} .. {after} took {time.monotonic() - started:.1f} s")
            if after is not None:
                shots.append((before, image))
            if len(shots) == 2:
                return shots
        page_reaches(browser, system, "HOLD", faults)
    raise AssertionError(f"no two screenshots {PHASE_APART} apart in phase in {runs} motions")


@pytest.fixture
def system(dds_domain, tmp_path):
    system = System(dds_domain, tmp_path, mocap_rate_hz=50.0, sim_profile=str(fast_thermal_profile(tmp_path)),
                    deploy_params={"policies": f"[{MOTION}.yaml]", "default_motion": MOTION, **BROWSER_LOAD_DEPLOY_PARAMS},
                    supervisor_params=BROWSER_LOAD_SUPERVISOR_PARAMS)
    try:
        system.start()
        # As an operator (and asap-ros sim) does once the standing actor holds the robot: hanging in
        # the pelvis-only band, APT_level1 left its training distribution (a raw output of 364
        # against the +-100 clip, a fresh-clone CI run) and rightly faulted.
        system.sim.request(BAND_RELEASE)
        yield system
    finally:
        system.close()


def test_live_view_shows_the_robot_its_mode_and_temperatures(system, tmp_path):
    domain = str(system.domain)
    before = dds_participants()
    args = ["--domain", domain, "--ros-domain", domain, "--interface", "lo", "--policies", f"{MOTION}.yaml",
            "--rate-hz", str(PAGE_RATE_HZ)]  # fmt: skip
    view = ViewProcess(args, tmp_path / "view.log", env={**os.environ, "ROS_DOMAIN_ID": domain})
    faults: list[str] = []
    try:
        view.wait_served()
        with ViewBrowser(view.url, tmp_path) as browser:
            browser.open()
            assert "SwiftShader" in browser.renderer, browser.renderer
            while not page_reaches(browser, system, "HOLD", faults):
                pass
            hold = browser.screenshot(tmp_path / "live_hold.png")
            assert robot_mask(hold).sum() > MIN_ROBOT_PIXELS, "the 3D view shows no robot"
            assert browser.text('[data-view="root"]') == "mocap"
            before_motion = wait_page_shows_simulator_temperatures(browser, system)

            (early_phase, early), (late_phase, late) = tracking_screenshots(browser, system, tmp_path, faults)
            union, changed = robot_region_change(early, late)
            print(f"\nrobot region {union}: {changed:.1%} of its pixels changed between phase {early_phase} and {late_phase}")
            assert changed > 0.02

            while not page_reaches(browser, system, "HOLD", faults):
                pass
            after_motion = wait_page_shows_simulator_temperatures(browser, system)
            rise = {name: after_motion[name] - before_motion[name] for name in before_motion}
            hottest = max(rise, key=lambda name: abs(rise[name]))
            print(f"temperatures on the page: {hottest} {before_motion[hottest]} deg C before the motion, "
                  f"{after_motion[hottest]} deg C after")
            # A motor the simulator reports hot (its temperature override, below the start limit):
            # the page must follow it, whatever the thermal model did meanwhile.
            system.sim.request(MOTOR_TEMPERATURE, HOT_C, motor=HOT_MOTOR)
            try:
                hot = wait_page_shows_simulator_temperatures(browser, system)
            finally:
                system.sim.request(MOTOR_TEMPERATURE_RELEASE, motor=HOT_MOTOR)
            hot_joint = load_robot_model().joint_names[HOT_MOTOR]
            assert hot[hot_joint] == HOT_C and hot[hot_joint] - after_motion[hot_joint] >= MIN_TEMPERATURE_CHANGE_C, hot
            assert not browser.outside_requests, browser.outside_requests
            assert "late steps" in browser.page.inner_text("body")

        view_participants = dds_participants() - before
        assert view_participants, "the view's participants not found on the domain"
        writers = dds_writers_of(view_participants)
        print(f"the view's DDS writers: {writers}")
        assert [w for w in writers if not w.startswith(VIEW_NODE_WRITERS)] == [], writers
        assert system.ros.spin_until(lambda: "asap_view" in system.ros.node.get_node_names(), 10.0)
        publishers = {name for name, _ in system.ros.node.get_publisher_names_and_types_by_node("asap_view", "/")}
        assert publishers <= {"/rosout", "/parameter_events"}, publishers
        assert system.ros.node.get_client_names_and_types_by_node("asap_view", "/") == []
    finally:
        assert view.close() == 0, view.log_tail()
