"""Fast DDS's built-in transports for the nodes' rclpy: UDPv4 only, unless the environment chooses."""

from __future__ import annotations

from collections.abc import MutableMapping

__all__ = ["PROFILE_VARIABLES", "TRANSPORTS_VARIABLE", "UDP_ONLY", "choose_transports"]

TRANSPORTS_VARIABLE = "FASTDDS_BUILTIN_TRANSPORTS"
"""Fast DDS reads its built-in transports from this variable as it creates a participant (2.14.5
and 3.2.2 here: tests/e2e/test_node_processes.py)."""
UDP_ONLY = "UDPv4"
"""The nodes' choice. rclpy's ``publish`` keeps the GIL through the DDS write, so a write that
blocks holds up every Python thread of the process, the control thread included. Under Jazzy
(Fast DDS 2.14.5) a write through the default shared-memory transport was measured blocking
298-333 ms (10 times in 420 s), a SCHED_FIFO thread beside it waking 303-323 ms late; UDPv4
only, same host, domain and load: no write over 5.4 ms in 300 s (docs/operating.md, "Control
timing on this machine", item 9)."""
PROFILE_VARIABLES = ("FASTDDS_DEFAULT_PROFILES_FILE", "FASTRTPS_DEFAULT_PROFILES_FILE")
"""An XML profile may configure the transports itself: then the nodes leave them alone."""


def choose_transports(environ: MutableMapping[str, str]) -> str:
    """Set ``FASTDDS_BUILTIN_TRANSPORTS=UDPv4`` in ``environ`` (before rclpy starts) unless the
    rmw is not Fast DDS, or the variable or a Fast DDS XML profile is set already; return one line
    for the log saying which transports rclpy's DDS uses and why."""
    rmw = environ.get("RMW_IMPLEMENTATION", "")
    if rmw and not rmw.startswith("rmw_fastrtps"):
        return f"rmw {rmw}: DDS transports as it configures them"
    if environ.get(TRANSPORTS_VARIABLE):
        return f"Fast DDS transports {environ[TRANSPORTS_VARIABLE]} (set in the environment)"
    for variable in PROFILE_VARIABLES:
        if environ.get(variable):
            return f"Fast DDS transports from the XML profile {environ[variable]} ({variable})"
    environ[TRANSPORTS_VARIABLE] = UDP_ONLY
    return f"Fast DDS transports {UDP_ONLY} only (no shared memory: a write through it can hold the GIL ~300 ms)"
