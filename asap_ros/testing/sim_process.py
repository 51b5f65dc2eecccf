"""The simulated G1 for the end-to-end harness: ``asap_sim`` (the process ``asap-ros sim``
starts) as a child of the test process, which dies with it, driven and watched like any
client: band, remote and motor-health requests on ``rt/asap_sim/control``, the state from
``rt/lowstate``, its statistics from ``--stats-json`` at exit.

Its physics thread then shares no interpreter lock with the test's rclpy clients and
``rt/lowcmd`` observers, as the G1's own board shares none with the robot computer.
"""

from __future__ import annotations

import subprocess
import time
from pathlib import Path
from typing import Any

import numpy as np

from asap_ros.sim.process import dying_with_this_process
from asap_ros.sim.stalls import STALL_MARK

SIM_PRIORITY = 90
"""SCHED_FIFO priority of ``asap_sim``'s physics thread: above the deploy node's control thread
(80) and the supervisor's threads (85), as the robot's own board is beyond the reach of the
computer's load (its start-up, loading the model, stays at normal priority)."""
SIM_LOWCMD_PRIORITY = 79
"""SCHED_FIFO priority of ``asap_sim``'s rt/lowcmd reader: one below the control thread (80). The
board takes LowCmd without the computer's CPU; a reader above the loop, woken by each LowCmd
the step writes, preempts that step (on this 2-core machine, 110 wake-ups and 7 ms a second)."""
READY_TIMEOUT_S = 60.0
_started_logs: list[Path] = []


class SimProcess:
    """``asap_sim`` on ``domain`` (loopback), started by :meth:`start`; call
    :func:`asap_ros.runtime.dds.init_channels` for ``domain`` first."""

    def __init__(self, domain: int, logs: Path, lowstate_rate_hz: float = 500.0, mocap_rate_hz: float = 0.0,
                 profile: str | None = None, mocap_readers: int = 0) -> None:
        """``mocap_readers``: subscriptions of mocap/pose to wait for before the first step (a
        recorder that must hold every pose)."""
        self.domain, self.logs = domain, logs
        self.stats_path = logs / "sim_stats.json"
        self.log_path = logs / "asap_sim.log"
        self._options = {"stats_json": self.stats_path, "profile": profile, "lowstate_rate_hz": lowstate_rate_hz,
                         "mocap_rate_hz": mocap_rate_hz, "wait_for_mocap_readers": mocap_readers,
                         "realtime_priority": SIM_PRIORITY, "lowcmd_priority": SIM_LOWCMD_PRIORITY}  # fmt: skip
        self.process: subprocess.Popen | None = None
        self._lowstate: Any = None
        self._control: Any = None

    def start(self) -> None:
        """Start ``asap_sim`` once every reader of ``rt/lowstate`` now on the bus has matched it
        (none misses its first state), and wait for its first LowState."""
        import os

        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowState_

        from asap_ros.g1.layout import LOWSTATE_TOPIC
        from asap_ros.runtime.dds import PolledReader
        from asap_ros.sim.control import SimControlClient
        from asap_ros.sim.process import sim_command

        if self.process is not None:
            raise RuntimeError("asap_sim already started")
        self._lowstate = PolledReader(LOWSTATE_TOPIC, LowState_)
        readers = readers_on_bus(LOWSTATE_TOPIC)
        env = {**os.environ, "ROS_DOMAIN_ID": str(self.domain)}
        command = sim_command(self.domain, wait_for_readers=readers, **self._options)
        self.process = subprocess.Popen(dying_with_this_process(command), env=env, stdin=subprocess.DEVNULL,
                                        stdout=self.log_path.open("w"), stderr=subprocess.STDOUT)
        _started_logs.append(self.log_path)
        self._control = SimControlClient()
        deadline = time.monotonic() + READY_TIMEOUT_S
        while self._lowstate.next_arrival(0.1)[0] is None:
            if self.process.poll() is not None:
                raise AssertionError(f"asap_sim exited with code {self.process.returncode}:\n{self.log()}")
            if time.monotonic() > deadline:
                raise AssertionError(f"no rt/lowstate from asap_sim within {READY_TIMEOUT_S:g} s:\n{self.log()}")

    @property
    def pid(self) -> int:
        assert self.process is not None, "asap_sim not started"
        return self.process.pid

    def request(self, action: str, value: float = 0.0, motor: int = -1) -> None:
        """Send a band, remote or motor-health request (:mod:`asap_ros.sim.dds_types`)."""
        assert self._control is not None, "asap_sim not started"
        self._control.send(action, value, motor=motor)

    def temperatures_c(self) -> np.ndarray:
        """The 29 motor temperatures of the newest LowState (first sensor, deg C)."""
        from asap_ros.core.state import NUM_MOTORS
        from asap_ros.g1.layout import LOWSTATE_WIRE

        payload = self._lowstate.next_arrival(1.0)[0] if self._lowstate is not None else None
        assert payload is not None, "no rt/lowstate from asap_sim"
        return LOWSTATE_WIRE.from_cdr(payload)["motor_state"]["temperature"][:NUM_MOTORS, 0].astype(float)

    def log(self) -> str:
        return self.log_path.read_text()[-3000:] if self.log_path.exists() else "(no log)"

    def stop(self) -> None:
        """SIGINT (``asap_sim`` writes its statistics), close this side's endpoints (idempotent)."""
        from asap_ros.sim.process import stop_gracefully

        if self.process is not None:
            stop_gracefully(self.process)
        for endpoint in (self._control, self._lowstate):
            if endpoint is not None:
                endpoint.close()
        self._control = self._lowstate = None

    def stats(self) -> dict[str, Any]:
        """What ``asap_sim`` reported at exit (:meth:`stop` first)."""
        from asap_ros.sim.process import read_stats

        assert self.process is not None and self.process.poll() is not None, "asap_sim still running: stop() first"
        return read_stats(self.stats_path)


def stall_report(last: int = 10) -> str:
    """The newest stall lines (at most ``last`` each) of every ``asap_sim`` this process started,
    with their logs' paths; empty when none stalled: what a failed end-to-end test adds to its report."""
    parts = []
    for log in _started_logs:
        try:
            lines = [line for line in log.read_text(errors="replace").splitlines() if STALL_MARK in line]
        except OSError:
            continue
        if lines:
            parts.append(f"{log}: {len(lines)} stalls\n" + "\n".join(lines[-last:]))
    return "\n".join(parts)


def readers_on_bus(topic: str) -> int:
    """Readers of ``topic`` alive on this domain now, as this process's participant has discovered them."""
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsSubscription
    from cyclonedds.core import InstanceState, ReadCondition, SampleState, ViewState

    from asap_ros.runtime.dds import close_entity, participant

    reader = BuiltinDataReader(participant(), BuiltinTopicDcpsSubscription)
    try:
        alive = ReadCondition(reader, SampleState.Any | ViewState.Any | InstanceState.Alive)
        return len({s.key for s in reader.read(N=1024, condition=alive) if s.topic_name == topic})
    finally:
        close_entity(reader)
