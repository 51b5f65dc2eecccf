"""Who writes ``rt/lowcmd``: writers found on the bus (DCPSPublication) and the samples each sent.

Only readers are created here. A writer is told apart by its GUID; its participant's host,
process and pid come from the participant's discovery data where the peer announces them
(Cyclone DDS does).
"""

from __future__ import annotations

import threading
from collections import Counter
from dataclasses import dataclass

from asap_ros.doctor.report import Check, fail, ok, warn
from asap_ros.g1.layout import LOWCMD_TOPIC

POLL_S = 0.02
DEBUG_MODE_FIX = (
    "the G1's built-in controller still writes rt/lowcmd: put the robot in debug (low-level) mode, "
    "with the robot hanging: L2+R2 on the remote, then L2+A, L2+B (Unitree's manual; docs/operating.md); "
    "then run asap-ros doctor again"
)


@dataclass(frozen=True)
class LowCmdWriter:
    guid: str
    process: str
    """``name pid N on host`` where the participant announces it, else its participant GUID."""
    samples: int
    """Samples received from it during the window."""

    def describe(self) -> str:
        return f"writer {self.guid} ({self.process}): {self.samples} samples"


class LowCmdWriterWatch:
    """Discovers ``rt/lowcmd`` writers and counts the samples of each while it runs."""

    def __init__(self) -> None:
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsParticipant, BuiltinTopicDcpsPublication
        from cyclonedds.qos import Policy, Qos
        from cyclonedds.sub import DataReader
        from cyclonedds.topic import Topic
        from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_

        from asap_ros.runtime.dds import participant

        dp = participant()
        self._publications = BuiltinDataReader(dp, BuiltinTopicDcpsPublication)
        self._participants = BuiltinDataReader(dp, BuiltinTopicDcpsParticipant)
        # best effort and volatile: matches a writer of any reliability and durability
        qos = Qos(Policy.Reliability.BestEffort, Policy.History.KeepLast(256))
        self._reader = DataReader(dp, Topic(dp, LOWCMD_TOPIC, LowCmd_), qos=qos)
        self._samples: Counter[int] = Counter()
        self._guid_of_handle: dict[int, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, name="doctor rt/lowcmd", daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from cyclonedds._clayer import ddspy_take
        from cyclonedds.core import InstanceState, SampleState, ViewState

        mask = SampleState.Any | ViewState.Any | InstanceState.Any
        while not self._stop.wait(POLL_S):
            samples = ddspy_take(self._reader._ref, mask, 256)
            for _data, info in samples if not isinstance(samples, int) else ():
                if info.valid_data:
                    self._samples[info.publication_handle] += 1
            for handle in self._reader.get_matched_publications():
                if handle not in self._guid_of_handle:
                    endpoint = self._reader.get_matched_publication_data(handle)
                    if endpoint is not None:
                        self._guid_of_handle[handle] = str(endpoint.key)

    def stop(self) -> list[LowCmdWriter]:
        """Every ``rt/lowcmd`` writer seen on the bus, with its sample count."""
        from asap_ros.runtime.dds import close_entity

        self._stop.set()
        self._thread.join(5.0)
        processes = {str(p.key): _process_of(p.qos) for p in self._participants.take(N=1024) if p.qos is not None}
        endpoints = [e for e in self._publications.take(N=4096) if e.topic_name == LOWCMD_TOPIC]
        counts = {self._guid_of_handle.get(h, f"handle {h}"): n for h, n in self._samples.items()}
        writers = {
            str(e.key): LowCmdWriter(str(e.key), processes.get(str(e.participant_key), f"participant {e.participant_key}"),
                                     counts.pop(str(e.key), 0))
            for e in endpoints
        }  # fmt: skip
        for guid, n in counts.items():  # wrote, but its discovery data was already gone
            writers.setdefault(guid, LowCmdWriter(guid, "unknown participant", n))
        for entity in (self._reader, self._publications, self._participants):
            close_entity(entity)
        return sorted(writers.values(), key=lambda w: w.guid)


def _process_of(qos) -> str:
    """``name pid N on host`` from Cyclone's participant properties, or ``""``."""
    from cyclonedds.qos import Policy

    props = {p.key: p.value for p in qos if isinstance(p, Policy.Property)}
    if "__Pid" not in props:
        return "participant without process information"
    return f"{props.get('__ProcessName', '?')} pid {props['__Pid']} on {props.get('__Hostname', '?')}"


def check_lowcmd_writers(writers: list[LowCmdWriter], deploy_running: bool, window_s: float) -> list[Check]:
    """Before launch nobody may write ``rt/lowcmd``; with asap_deploy running, exactly one writer may."""
    name = "rt/lowcmd writers"
    active = [w for w in writers if w.samples]
    listing = "; ".join(w.describe() for w in writers)
    allowed = 1 if deploy_running else 0
    if len(active) > allowed:
        if deploy_running:
            return [fail(name, f"{len(active)} writers sent LowCmd in {window_s:g} s with asap_deploy running: "
                         f"{listing}", "exactly one writer may drive the motors: stop the other program; if it is "
                         f"not yours, {DEBUG_MODE_FIX}")]  # fmt: skip
        return [fail(name, f"another program writes rt/lowcmd ({len(active)} writers sent LowCmd in "
                     f"{window_s:g} s, asap_deploy is not running): {listing}", DEBUG_MODE_FIX)]
    silent = [w for w in writers if not w.samples]
    if silent and not deploy_running:
        return [warn(name, f"{len(silent)} writers exist but sent nothing in {window_s:g} s: {listing}",
                     "stop the program that owns them before launch, unless it is an asap_supervisor")]
    state = "asap_deploy's" if active else "none writing"
    return [ok(name, f"{len(writers)} writers on the bus ({state}){': ' + listing if writers else ''}; "
                     "doctor itself has none")]  # fmt: skip
