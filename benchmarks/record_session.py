"""Benchmark: record a simulated session with ``asap_recorder`` and report completeness and cost.

Starts the recorder node and :mod:`session_publisher` (G1 + runtime stand-in: LowState/LowCmd
at 500 Hz, policy steps at 50 Hz, mocap at 200 Hz) as subprocesses, records for
``--duration`` seconds (default 600), stops the recorder with SIGINT and prints, per topic,
published vs recorded counts, the recorder's CPU share (user+system time / wall time of its
process) and its peak memory, then the per-message cost of storing the DDS bytes unchanged
against decoding and re-serialising them::

    .venv/bin/python benchmarks/record_session.py --duration 600
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import subprocess
import sys
import tempfile
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
PYTHON = sys.executable
CLOCK_TICKS = os.sysconf("SC_CLK_TCK")


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    return float("nan")


def recorder_command(domain: int, output: Path, name: str, extra: list[str]) -> list[str]:
    params = [f"dds_domain:={domain}", f"output_dir:={output}", f"bag_name:={name}", "min_free_mb:=100.0", *extra]
    return [PYTHON, "-m", "asap_ros.ros.recorder_node", "--ros-args", *sum((["-p", p] for p in params), [])]


def publisher_command(domain: int, duration: float, counts: Path) -> list[str]:
    return [PYTHON, str(REPO / "benchmarks" / "session_publisher.py"), "--domain", str(domain),
            "--duration", str(duration), "--counts", str(counts)]


def recorded_counts(bag: Path) -> tuple[dict[str, int], int]:
    """Messages per topic read back with rosbags, and how many /diagnostics came from the stand-in."""
    from rosbags.rosbag2 import Reader

    from asap_ros.recording.typestore import recording_typestore

    store = recording_typestore()
    counts: dict[str, int] = {}
    stand_in_diagnostics = 0
    with Reader(bag) as reader:
        for connection, _, raw in reader.messages():
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
            if connection.topic == "/diagnostics":
                msg = store.deserialize_cdr(raw, connection.msgtype)
                stand_in_diagnostics += any(s.name == "session_publisher" for s in msg.status)
    return counts, stand_in_diagnostics


def per_message_costs(samples: int = 2000) -> dict[str, float]:
    """µs per LowState into the bag: the received bytes as they are, vs decoded and re-serialised
    (what a recorder built on the SDK's ChannelSubscriber, which hands out decoded objects, pays)."""
    import numpy as np
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowState_

    from asap_ros.g1 import LOWSTATE_LAYOUT, LOWSTATE_WIRE
    from asap_ros.recording.bag_writer import BagWriter
    from asap_ros.recording.topics import DDS_TOPICS

    payload = LOWSTATE_WIRE.to_cdr(np.zeros((), dtype=LOWSTATE_LAYOUT))
    with tempfile.TemporaryDirectory() as tmp:
        writer = BagWriter(Path(tmp) / "cost", list(DDS_TOPICS.values()), fsync=False)
        start = time.perf_counter()
        for i in range(samples):
            writer.write("/lowstate", i, payload)
        raw_us = (time.perf_counter() - start) / samples * 1e6
        start = time.perf_counter()
        for i in range(samples):
            writer.write("/lowstate", i, LowState_.deserialize(payload).serialize())
        decode_us = (time.perf_counter() - start) / samples * 1e6
        writer.close()
    return {"raw_write_us": raw_us, "decode_reserialise_us": decode_us}


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0)
    parser.add_argument("--output", type=Path, help="bag parent directory (default: a temporary one)")
    parser.add_argument("-p", dest="params", action="append", default=[], help="extra recorder parameter name:=value")
    args = parser.parse_args(argv)

    domain = 1 + os.getpid() % 200
    env = {**os.environ, "ROS_DOMAIN_ID": str(domain)}
    with tempfile.TemporaryDirectory() as tmp:
        output = args.output or Path(tmp)
        counts_file = Path(tmp) / "counts.json"
        recorder = subprocess.Popen(recorder_command(domain, output, "bench", args.params), env=env)
        publisher = subprocess.Popen(publisher_command(domain, args.duration, counts_file), env=env,
                                     stdout=subprocess.PIPE, text=True)
        publisher.stdout.readline()  # "publishing": the recorder is subscribed to everything
        cpu_start, wall_start = cpu_seconds(recorder.pid), time.monotonic()
        publisher.wait()
        cpu = cpu_seconds(recorder.pid) - cpu_start
        wall = time.monotonic() - wall_start
        rss = peak_rss_mb(recorder.pid)
        recorder.send_signal(signal.SIGINT)
        if recorder.wait(timeout=60) != 0 or publisher.returncode != 0:
            print(f"recorder exit {recorder.returncode}, publisher exit {publisher.returncode}", file=sys.stderr)
            return 1
        published = json.loads(counts_file.read_text())["counts"]
        recorded, stand_in_diagnostics = recorded_counts(output / "bench")
        size_mb = sum(f.stat().st_size for f in (output / "bench").glob("*.mcap")) / 1e6

    print(f"session {args.duration:.0f} s; bag {size_mb:.1f} MB")
    print(f"{'topic':<20} {'published':>10} {'recorded':>10}")
    complete = True
    for topic, sent in published.items():
        got = stand_in_diagnostics if topic == "/diagnostics" else recorded.get(topic, 0)
        complete &= got == sent
        print(f"{topic:<20} {sent:>10} {got:>10}")
    for topic in sorted(set(recorded) - set(published)):
        print(f"{topic:<20} {'(recorder)':>10} {recorded[topic]:>10}")
    print(f"every published message recorded: {'yes' if complete else 'NO'}")
    print(f"recorder CPU: {cpu / wall * 100:.1f} % of one core over {wall:.0f} s; peak RSS {rss:.0f} MB")
    costs = per_message_costs()
    print(f"per LowState: raw bytes into the bag {costs['raw_write_us']:.1f} µs; "
          f"decode + re-serialise {costs['decode_reserialise_us']:.1f} µs")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.path.insert(0, str(REPO))
    sys.exit(main())
