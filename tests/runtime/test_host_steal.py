"""The machine's steal from /proc/stat, and the late-step faults the e2e harness starts over after."""

from __future__ import annotations

import os

from asap_ros.core.safety import check_consecutive, check_state_age
from asap_ros.runtime.thread_times import machine_steal_ns
from asap_ros.testing.ros_system import host_steal_explains


def test_machine_steal_is_cumulative_in_whole_kernel_ticks():
    tick_ns = 1_000_000_000 // os.sysconf("SC_CLK_TCK")
    first = machine_steal_ns()
    second = machine_steal_ns()
    assert 0 <= first <= second and first % tick_ns == 0 and second % tick_ns == 0


def test_only_timing_faults_while_the_host_stole_are_started_over():
    late = check_consecutive(5, 5, "late control steps")  # the deploy node's fault at the shipped limit
    stale = check_state_age(0, 58_000_000, 50.0)
    assert late == "5 consecutive late control steps (limit 5)" and stale.startswith("stale robot state: 58.0 ms")
    assert host_steal_explains(late, 20.0) and host_steal_explains(stale, 25.0)
    assert not host_steal_explains(late, 19.0)  # less than a control period taken: not what made five steps late
    assert not host_steal_explains(late, 0.0)  # late with no steal: the loop's own doing, a failure
    assert not host_steal_explains(check_consecutive(3, 3, "bad CRCs"), 80.0)
    assert not host_steal_explains("torso tilt 50.5 deg exceeds 50 deg", 80.0)
