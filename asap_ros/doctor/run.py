"""Runs the selected checks: local ones first, then one bus window (rt/lowstate sampled, rt/lowcmd
writers counted, the ROS graph discovered, all at once), then assets, policies and the clock."""

from __future__ import annotations

import time
from collections.abc import Callable

from asap_ros.core.errors import AsapError
from asap_ros.doctor import clock, network, policies, ros_graph
from asap_ros.doctor.lowstate import LowStateExpectations
from asap_ros.doctor.report import Check, fail
from asap_ros.doctor.settings import DoctorSettings

FIRST_SAMPLE_TIMEOUT_S = 3.0
"""How long to wait for the first rt/lowstate sample (discovery) before the window starts anyway."""


def _bus_checks(settings: DoctorSettings, progress: Callable[[str], None]) -> list[Check]:
    """rt/lowstate, rt/lowcmd writers and the ROS graph, over one window."""
    from asap_ros.doctor.lowcmd_writers import LowCmdWriterWatch, check_lowcmd_writers
    from asap_ros.doctor.lowstate import LowStateSampler, analyse_lowstate
    from asap_ros.runtime import dds

    groups, checks = settings.groups, []
    if "ros" in groups:
        checks += ros_graph.check_environment(settings.rmw)
    graph_watch = ros_graph.RosGraphWatch() if "ros" in groups else None
    sampler = watch = None
    source = f"domain {settings.domain} via {settings.interface}"
    if "lowstate" in groups or "lowcmd" in groups:
        try:
            dds.init_channels(settings.domain, settings.interface)
        except AsapError as exc:
            checks.append(fail("dds", str(exc), "check --interface names this computer's NIC to the robot "
                               "(`ip -br addr`) and --domain is 0..232"))  # fmt: skip
        else:
            watch = LowCmdWriterWatch() if "lowcmd" in groups else None
            sampler = LowStateSampler() if "lowstate" in groups else None
    progress(f"asap-ros doctor: listening {settings.duration_s:g} s on {source} (readers only)")
    expect = LowStateExpectations(settings.lowstate_rate_hz, settings.mode_machine, settings.controller.safety,
                                  settings.robot)  # fmt: skip
    window = sampler.collect(settings.duration_s, FIRST_SAMPLE_TIMEOUT_S, source) if sampler else None
    if sampler is None:
        time.sleep(settings.duration_s)
    writers = watch.stop() if watch else None
    graph = graph_watch.stop() if graph_watch else None
    if window is not None:
        checks += analyse_lowstate(window, expect)
    if writers is not None:
        checks += check_lowcmd_writers(writers, bool(graph and graph.deploy_running), settings.duration_s)
    if graph is not None:
        checks += ros_graph.check_graph(graph)
    return checks


def run_doctor(settings: DoctorSettings, progress: Callable[[str], None] = lambda _line: None) -> list[Check]:
    groups, checks = settings.groups, []
    if "network" in groups:
        checks += network.check_interface(settings.interface, settings.subnet)
        checks += network.check_receive_buffer(settings.receive_buffer_bytes)
    if {"lowstate", "lowcmd", "ros"} & set(groups):
        checks += _bus_checks(settings, progress)
    if "assets" in groups:
        checks += policies.check_assets(settings.assets_dir)
        checks += policies.check_policies(list(settings.policies), settings.robot, settings.assets_dir)
    if "time" in groups:
        checks += clock.check_clock()
    return checks
