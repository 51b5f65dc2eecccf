"""The one wiring of the control step to DDS, used by ``asap_deploy`` and ``asap-ros sim``:
``rt/lowstate`` reader -> :class:`~asap_ros.runtime.control_loop.ControlLoop` -> ``rt/lowcmd``
writer, and (optionally) every step and transition on ``rt/asap/*`` for the recorder.

The control thread takes ``rt/lowstate`` from its :class:`~asap_ros.runtime.dds.PolledReader`
itself and writes raw XCDR1 through a :class:`~asap_ros.runtime.dds.RawWriter`; the step
publisher runs as a sink, off the control path. ``with`` (or :meth:`close`) stops the loop and
closes the endpoints.
"""

from __future__ import annotations

from typing import Any

from asap_ros.core.controller import Controller
from asap_ros.g1.layout import LOWCMD_TOPIC, LOWSTATE_TOPIC
from asap_ros.runtime.control_loop import ControlLoop, control_period_s


class DdsControl:
    """A control loop for ``controller`` on this process's DDS domain.

    ``loop_options`` go to :class:`ControlLoop` (period, default the actors' ``control_dt``; waits,
    priority, CPUs; clock).
    ``publish_steps``: also publish :mod:`asap_ros.runtime.step_topics` (what the recorder reads).
    ``supervised``: write ``rt/lowcmd`` only under ``asap_supervisor``'s lease
    (:class:`~asap_ros.runtime.arbitration.LowCmdArbiter`; DAMPING latched two control periods
    before an unanswered lease runs out). ``receive_priority``: Cyclone DDS's receive threads
    under SCHED_FIFO (:func:`asap_ros.runtime.dds.init_channels`), above the control thread, so
    rt/lowstate and the grants reach it however busy the machine is, and after a stall of the
    process the queued ones before its first step. ``mocap_topic``: the DDS
    topic of the motion-capture pose (``rt/mocap/pose``), polled by the control thread after each
    write (:class:`~asap_ros.runtime.mocap.MocapStamps`); None: no mocap.
    """

    def __init__(
        self, controller: Controller, domain: int, interface: str, publish_steps: bool = True,
        supervised: bool = False, receive_priority: int = 0, mocap_topic: str | None = None,
        lease_s: float = 0.15, command_timeout_s: float = 0.1, **loop_options: Any,
    ) -> None:
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_

        from asap_ros.runtime.arbitration import LowCmdArbiter
        from asap_ros.runtime.dds import PolledReader, RawWriter, init_channels
        from asap_ros.runtime.step_topics import PolicyStepPublisher

        init_channels(domain, interface, receive_priority=receive_priority)
        self._closers: list[Any] = []
        self.lowcmd = RawWriter(LOWCMD_TOPIC, LowCmd_)
        self._closers.append(self.lowcmd)
        self.lowstate = PolledReader(LOWSTATE_TOPIC, LowState_)  # read by the control thread itself
        self._closers.append(self.lowstate)
        self.arbiter: Any = None
        if supervised:
            period_s = control_period_s(controller, loop_options.get("period_s"))
            self.arbiter = LowCmdArbiter(period_ns=int(round(period_s * 1e9)), lease_ns=int(round(lease_s * 1e9)),
                                         command_timeout_ns=int(round(command_timeout_s * 1e9)))
            self._closers.append(self.arbiter)
        self.mocap: Any = None
        if mocap_topic is not None:
            from asap_ros.runtime.mocap import MocapStamps

            self.mocap = MocapStamps(mocap_topic)
            self._closers.append(self.mocap)
        self.loop = ControlLoop(controller, self.lowcmd.write, states=self.lowstate, arbiter=self.arbiter,
                                mocap=self.mocap.newest_ns if self.mocap is not None else None, **loop_options)
        self.steps = PolicyStepPublisher() if publish_steps else None
        if self.steps is not None:
            self._closers.append(self.steps)
            self.loop.add_sink(self.steps.publish_record)

    def written(self) -> dict[str, int]:
        """Samples written so far per DDS topic (benchmarks compare them with what a recorder got)."""
        return {LOWCMD_TOPIC: self.lowcmd.written, **(self.steps.written if self.steps is not None else {})}

    def close(self) -> None:
        """Stop the loop (if started), then close the endpoints, newest first."""
        self.loop.stop()
        for endpoint in reversed(self._closers):
            endpoint.close()
        self._closers.clear()

    def __enter__(self) -> DdsControl:
        return self

    def __exit__(self, *_exc: object) -> None:
        self.close()
