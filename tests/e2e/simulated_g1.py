"""The simulated G1 (MuJoCo, real Cyclone DDS on loopback) as its own process for the doctor tests,
with one failure provoked, and a watch on the bus: every ``rt/lowcmd`` writer discovered
(DCPSPublication) with its participant's pid.

    python tests/e2e/simulated_g1.py --domain N [--fault hot|motor_error|bad_crc|second_writer]
                                        [--mode-machine M]

Prints ``ready`` once the simulator publishes. Reads commands from stdin: ``stall`` stops the
LowState stream (the simulator stops), ``writers`` prints ``{writer GUID: pid}`` as JSON. Exits
at the end of stdin.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import sys
import threading

import numpy as np

FAULTS = ("hot", "motor_error", "bad_crc", "second_writer")
HOT_MOTOR, HOT_C = 9, 80.0
"""right_knee_joint held at 80 C (the simulator's temperature override)."""
ERROR_MOTOR, ERROR_CODE = 4, 0x8
"""left_ankle_pitch_joint reports motor error state 0x8."""


class CorruptCrc:
    """Wraps the simulator's LowState encoder: every sample leaves with its CRC word flipped."""

    def __init__(self, encoder) -> None:
        self.encoder = encoder

    def encode(self, tick, reading) -> bytes:
        payload = self.encoder.encode(tick, reading)
        return payload[:-4] + bytes(b ^ 0xFF for b in payload[-4:])  # the CRC is the sample's last word


class LowCmdWriterWatch:
    """rt/lowcmd writers on the bus (builtin DCPSPublication / DCPSParticipant readers)."""

    def __init__(self) -> None:
        from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsParticipant, BuiltinTopicDcpsPublication

        from asap_ros.runtime.dds import participant

        self._publications = BuiltinDataReader(participant(), BuiltinTopicDcpsPublication)
        self._participants = BuiltinDataReader(participant(), BuiltinTopicDcpsParticipant)
        self._pids: dict[str, str] = {}
        self._writers: dict[str, str] = {}
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)
        self._thread.start()

    def _run(self) -> None:
        from cyclonedds.qos import Policy

        while not self._stop.wait(0.02):
            for p in self._participants.take(N=256):
                props = {q.key: q.value for q in p.qos or () if isinstance(q, Policy.Property)}
                self._pids[str(p.key)] = props.get("__Pid", "?")
            for e in self._publications.take(N=256):
                if e.topic_name == "rt/lowcmd":
                    self._writers[str(e.key)] = str(e.participant_key)

    def writers(self) -> dict[str, str]:
        """Every rt/lowcmd writer seen so far (deleted ones included): GUID -> pid."""
        return {guid: self._pids.get(p, "?") for guid, p in self._writers.items()}


def start_second_writer(mode_machine: int) -> None:
    """A second rt/lowcmd writer, as the G1's built-in controller: damping at 100 Hz."""
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_

    from asap_ros.g1.codec import LowCmdEncoder, damping_command
    from asap_ros.runtime.dds import RawWriter

    writer = RawWriter("rt/lowcmd", LowCmd_)
    payload = LowCmdEncoder().encode_cdr(damping_command(np.full(29, 2.0)), mode_machine)
    ticker = threading.Event()

    def run() -> None:
        while not ticker.wait(0.01):
            writer.write(payload)

    threading.Thread(target=run, daemon=True).start()


def main() -> int:
    parser = argparse.ArgumentParser()
    parser.add_argument("--domain", type=int, required=True)
    parser.add_argument("--fault", choices=FAULTS)
    parser.add_argument("--mode-machine", type=int, default=5)
    args = parser.parse_args()

    from asap_ros.runtime.dds import init_channels
    from asap_ros.sim.config import load_sim_config
    from asap_ros.sim.dds_types import MOTOR_ERROR, MOTOR_TEMPERATURE
    from asap_ros.sim.simulator import Simulator

    init_channels(args.domain)
    watch = LowCmdWriterWatch()
    config = load_sim_config()
    config = dataclasses.replace(config, mode_machine=args.mode_machine, mocap=dataclasses.replace(config.mocap, rate_hz=0.0))
    sim = Simulator(config, args.domain)
    if args.fault == "hot":  # the simulator's own motor-health overrides, as over its control topic
        sim.request(MOTOR_TEMPERATURE, HOT_C, motor=HOT_MOTOR)
    elif args.fault == "motor_error":
        sim.request(MOTOR_ERROR, ERROR_CODE, motor=ERROR_MOTOR)
    elif args.fault == "bad_crc":
        sim.lowstate = CorruptCrc(sim.lowstate)
    sim.start()
    if args.fault == "second_writer":
        start_second_writer(args.mode_machine)
    print("ready", flush=True)
    for line in sys.stdin:
        if line.strip() == "stall":
            sim.stop()
        elif line.strip() == "writers":
            print(json.dumps(watch.writers()), flush=True)
    sim.stop()
    return 0


if __name__ == "__main__":
    status = main()
    sys.stdout.flush()
    os._exit(status)  # no interpreter teardown with Cyclone's threads alive (see tests/conftest.py)
