"""End to end with motion capture on: the deploy node reads mocap/pose on DDS (no rclpy callback).

A system of its own (the simulator's mocap at a Vicon's 100 Hz, as in a data-collection
session), so that the other end-to-end modules run without motion capture.
"""

from __future__ import annotations

import os
import time

import pytest

from asap_ros.runtime.scheduling import fifo_permitted
from asap_ros.testing.ros_system import started_system, thread_scheduling

MOCAP_RATE_HZ = 100.0


@pytest.fixture(scope="module")
def system(dds_domain, tmp_path_factory):
    yield from started_system(dds_domain, tmp_path_factory.mktemp("mocap_logs"), mocap_rate_hz=MOCAP_RATE_HZ)


def test_each_step_record_carries_the_newest_mocap_stamp(system):
    """The deploy node reads mocap/pose on DDS after each write (no rclpy callback per pose): every
    step on rt/asap/policy_step carries the newest pose's header stamp, a new one nearly every step."""
    from asap_ros.runtime.dds import RawReader
    from asap_ros.runtime.step_topics import POLICY_STEP_TOPIC, PolicyStep_

    steps: list = []
    reader = RawReader(POLICY_STEP_TOPIC, PolicyStep_, lambda payload, *_: steps.append(PolicyStep_.deserialize(payload)),
                       depth=256)
    try:
        end = time.monotonic() + 10.0
        while len(steps) < 50 and time.monotonic() < end:
            time.sleep(0.05)
    finally:
        reader.close()
    steps = steps[:50]
    assert len(steps) == 50, f"{len(steps)} policy steps in 10 s"
    assert all(s.mocap_stamp_ns > 0 for s in steps), [s.mocap_stamp_ns for s in steps]
    ages_ms = [(s.stamp_ns - s.mocap_stamp_ns) / 1e6 for s in steps]
    assert all(0.0 < age < 500.0 for age in ages_ms), ages_ms  # the simulated Vicon's 5 ms latency, at least
    assert len({s.mocap_stamp_ns for s in steps}) >= 25, ages_ms  # 100 Hz poses: a new one (nearly) every step


def test_the_simulators_mocap_thread_runs_just_below_its_physics(system):
    """The simulated Vicon's thread takes the GIL the physics thread needs: SCHED_FIFO one below it
    (90), never preempted by the nodes' real-time threads while it holds the GIL."""
    if not fifo_permitted():
        pytest.skip("SCHED_FIFO is not permitted here: the simulator runs at normal priority")
    sim = thread_scheduling(system.sim.process.pid)
    assert sim["asap-sim-physic"] == {(os.SCHED_FIFO, 90)}, sim  # the kernel keeps 15 bytes of a name
    assert sim["asap-sim-mocap"] == {(os.SCHED_FIFO, 89)}, sim


def test_the_simulator_publishes_mocap_without_rclpy(system):
    """The simulated Vicon writes through the simulator's Cyclone participant: no rclpy (whose
    publish held the GIL the physics thread needs for 320-340 ms under Jazzy) in ``asap_sim``."""
    maps = open(f"/proc/{system.sim.process.pid}/maps").read()
    assert "cyclonedds" in maps  # the check reads the right process
    assert "librcl.so" not in maps and "_rclpy_pybind11" not in maps
