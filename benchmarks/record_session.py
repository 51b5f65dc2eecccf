"""Benchmark: record a simulated session with ``asap_recorder`` and report completeness and cost.

The real thing on one DDS domain on loopback: the MuJoCo G1 (``asap_sim``: LowState at 500 Hz,
simulated mocap at ``--mocap-rate`` Hz, 200 by default), ``asap_deploy`` (50 Hz policy steps) and ``asap_supervisor``, each a
process (the bring-up of :mod:`asap_ros.testing.ros_system`), and ``asap_recorder`` started first. The deploy node runs ``--motion`` start -> track -> HOLD again and again for
``--duration`` seconds (default 600); then everything stops, the recorder last. Printed:

- per topic, the count each publisher reports (the simulator's counters, ``asap_deploy``'s
  exit log) against the messages ``rosbags`` reads back from the bag, and which LowState ticks
  and policy-step control ticks are missing, if any;
- the UDP datagrams the kernel dropped on the recorder's sockets (receive buffer full);
- the recorder's CPU share (user+system time / wall time of its process) and peak memory;
- control step latency p50/p99/max and deadline misses, from every policy step in the bag
  and the simulator's own LowState publish gaps (a stalled state stream makes steps late),
  beside the floor probe's and the step probe's misses in the same run
  (:mod:`asap_ros.bench.floor_probe`), and a lone floor probe's, on instants of its own;
- the per-message cost of storing the DDS bytes unchanged against decoding and re-serialising.

    flock /tmp/asap-bench.lock .venv/bin/python benchmarks/record_session.py --duration 600
"""

from __future__ import annotations

import argparse
import json
import os
import signal
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

import numpy as np

from asap_ros.bench.floor_probe import FloorProbe, Lateness, beside_the_floor, with_a_step
from asap_ros.bench.rate_ratio import compared_text
from asap_ros.recording import topics as T
from asap_ros.runtime.domains import process_domain
from asap_ros.testing.ros_system import TEST_DEPLOY_PARAMS, System, node_process, simulator_line

CLOCK_TICKS = os.sysconf("SC_CLK_TCK")
BAG_NAME = "bench"
LOWSTATE_RATE_HZ = 500.0
MOCAP_RATE_HZ = 200.0
"""Default motion-capture rate (a Vicon's 100-200 Hz)."""
MOCAP_READERS = 2
"""Subscriptions of mocap/pose the simulator waits for before its first pose: the recorder's and
the deploy node's (it reads the pose into each step record). The writer keeps no history for late
joiners, so a pose sent before the recorder's subscription matched is never in the bag."""
MOTION_TIMEOUT_S = 120.0
LATE_AFTER_MS = 5.0
"""The deploy node's production deadline-miss threshold (config/deploy.yaml)."""
STEP_PROBE_POLICY = "kick_level1"
"""The step probe runs the motion the deploy node tracks (``default_motion`` of the test system)."""
STEP_PROBE_PHASE_MS = 10.0
"""The step probe's deadlines, ms past the control loop's (half its 20 ms period): on the loop's own,
its step and the loop's would wait for each other's CPU. The floor probe sleeps to the loop's own."""
LONE_PROBE_PHASE_MS = 15.0
"""The lone floor probe's deadlines, ms past the control loop's: 5 ms from the step probe's and from
the loop's next, so no other thread of the benchmark wakes with it. Against it, the floor probe's
share says what waking on the loop's very instants costs a thread that does nothing."""


def cpu_seconds(pid: int) -> float:
    """user + system CPU time of a running process."""
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / CLOCK_TICKS


def peak_rss_mb(pid: int) -> float:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmHWM:"):
            return int(line.split()[1]) / 1024
    raise RuntimeError(f"no VmHWM for process {pid}")


def udp_drops(pid: int) -> int:
    """Datagrams the kernel dropped on ``pid``'s UDP sockets (the drops column of /proc/net/udp)."""
    inodes = set()
    for fd in Path(f"/proc/{pid}/fd").iterdir():
        target = os.readlink(fd) if fd.is_symlink() else ""
        if target.startswith("socket:["):
            inodes.add(target[8:-1])
    drops = 0
    for table in ("/proc/net/udp", "/proc/net/udp6"):
        for line in Path(table).read_text().splitlines()[1:]:
            fields = line.split()
            if fields[9] in inodes:
                drops += int(fields[-1])
    return drops


def wait_for_recorder(timeout_s: float) -> None:
    """Until this process has discovered a reader of every recorded DDS topic outside itself (before
    the deploy node and the simulator exist, those are the recorder's): their publishers' first
    samples are then recorded too. (The simulator waits for the recorder's mocap subscription.)"""
    from cyclonedds.builtin import BuiltinDataReader, BuiltinTopicDcpsSubscription

    from asap_ros.runtime.dds import close_entity, participant

    dp = participant()
    reader = BuiltinDataReader(dp, BuiltinTopicDcpsSubscription)
    missing, deadline = set(T.DDS_TOPICS), time.monotonic() + timeout_s
    try:
        while missing:
            if time.monotonic() > deadline:
                raise SystemExit(f"the recorder's subscriptions were not discovered within {timeout_s} s: {sorted(missing)}")
            missing -= {s.topic_name for s in reader.take(N=64) if s.participant_key != dp.guid}
            time.sleep(0.05)
    finally:
        close_entity(reader)


def deploy_published(log: Path) -> dict[str, int]:
    """What ``asap_deploy`` wrote per DDS topic, from its ``published {json}`` exit log line."""
    for line in reversed(log.read_text().splitlines()):
        if "published {" in line:
            return json.loads(line[line.index("published {") + len("published "):])
    raise SystemExit(f"asap_deploy did not report its published counts (log: {log})")


def deploy_loop_stats(log: Path) -> dict[str, Any]:
    """The deploy node's :class:`~asap_ros.runtime.control_loop.LoopStats` from its ``control loop
    {json}`` exit log line."""
    for line in reversed(log.read_text().splitlines()):
        if "control loop {" in line:
            return json.loads(line[line.index("control loop {") + len("control loop "):])
    raise SystemExit(f"asap_deploy did not report its control loop statistics (log: {log})")


def late_causes_line(stats: dict[str, Any]) -> str:
    """Which of the loop's late steps woke late, which a garbage collection overlapped, and where
    their time went on the control thread (:class:`~asap_ros.runtime.control_loop.LateSplit`)."""
    return (f"deploy node's loop: per step on a CPU {stats['ran_us_per_step']:.0f} us, waiting for one "
            f"{stats['cpu_wait_us_per_step']:.0f} us (mean); "
            f"{stats['deadline_misses']} late steps, {stats['late_woke']} of them woke more "
            f"than {LATE_AFTER_MS:g} ms late, {stats['late_in_gc']} overlapped a garbage collection "
            f"(longest {stats['gc_max_ms']:.1f} ms); wake-up lateness p99 {stats.get('wake_late_p99_us', 0) / 1e3:.2f} / "
            f"max {stats.get('wake_late_max_us', 0) / 1e3:.1f} ms; compute p99 {stats.get('compute_p99_us', 0) / 1e3:.2f} / "
            f"max {stats.get('compute_max_us', 0) / 1e3:.1f} ms; from their deadlines to their ends the control "
            f"thread ran {stats['late_ran_ms']:.1f} ms, waited {stats['late_cpu_wait_ms']:.1f} ms for a "
            f"CPU and was neither {stats['late_off_cpu_ms']:.1f} ms (timer slack, the GIL, a lock, a fault)")


MAX_FAILED_STANDS = 3
"""Consecutive failed Reset + Stand attempts that end a session."""


def run_motions(system: System, duration_s: float) -> tuple[int, list[str], str | None]:
    """Start the default motion again and again until ``duration_s`` has passed: (completed
    runs, fault reasons, why the session ended early or None). As an operator (and ``asap-ros
    sim``) does, the band is released once the standing actor holds the robot: hanging in the
    pelvis-only band, the actor leaves its training distribution (a raw output of -267 against
    the +-100 clip, a 600 s session). DAMPING (a fall or a safety fault) is followed by
    the band attached again, Reset and Stand; :data:`MAX_FAILED_STANDS` failed stand-ups in a
    row end the session."""
    ros = system.ros

    def mode() -> str | None:
        return ros.latched.get("/asap_deploy/mode")

    runs, faults, failed_stands = 0, [], 0
    end = time.monotonic() + duration_s
    while time.monotonic() < end:
        if mode() in ("PASSIVE", "DAMPING"):  # PASSIVE: the first stand-up
            if mode() == "DAMPING":
                ros.spin_until(lambda: ros.latched.get("/asap_deploy/fault"), 2.0)  # latched beside the mode
                faults.append(ros.latched.get("/asap_deploy/fault") or "(no reason received)")
            try:
                system.stand_off_the_band()
                failed_stands = 0
            except AssertionError as exc:  # e.g. another fault while standing up
                failed_stands += 1
                if failed_stands == MAX_FAILED_STANDS:
                    return runs, faults, f"{failed_stands} stand-ups in a row failed: {str(exc).splitlines()[0]}"
            continue
        ok, message = ros.trigger("/asap_deploy/start")
        if not ok:
            if mode() == "DAMPING":
                continue
            raise SystemExit(f"start refused: {message}")
        started = ros.spin_until(lambda: mode() != "HOLD", 30.0)
        if not (started and ros.spin_until(lambda: mode() in ("HOLD", "DAMPING"), MOTION_TIMEOUT_S)):
            raise SystemExit(f"motion did not finish: {ros.latched}")
        runs += mode() == "HOLD"
    return runs, faults, None


def read_bag(bag: Path) -> tuple[dict[str, int], np.ndarray, np.ndarray]:
    """Messages per topic read back with rosbags, the LowState ticks, and per policy step its
    control tick, latency (ns), late flag and compute time (ns)."""
    from rosbags.rosbag2 import Reader

    from asap_ros.g1.layout import LOWSTATE_WIRE
    from asap_ros.recording.typestore import recording_typestore

    store = recording_typestore()
    counts: dict[str, int] = {}
    lowstate_ticks, steps = [], []
    with Reader(bag) as reader:
        for connection, _, raw in reader.messages():
            counts[connection.topic] = counts.get(connection.topic, 0) + 1
            if connection.topic == T.LOWSTATE:
                lowstate_ticks.append(int(LOWSTATE_WIRE.from_cdr(raw)["tick"]))
            elif connection.topic == T.POLICY_STEP:
                step = store.deserialize_cdr(raw, connection.msgtype)
                steps.append((step.control_tick, step.latency_ns, step.late, step.compute_ns))
    return counts, np.asarray(lowstate_ticks), np.asarray(steps, dtype=np.int64).reshape(-1, 4)


def missing(recorded: np.ndarray, expected: np.ndarray) -> str:
    """``none``, or how many of ``expected`` are not in ``recorded`` and the first few of them."""
    lost = np.setdiff1d(expected, recorded)
    return "none" if not len(lost) else f"{len(lost)}: {', '.join(map(str, lost[:10]))}{' ...' if len(lost) > 10 else ''}"


def per_message_costs(samples: int = 2000) -> dict[str, float]:
    """µs per LowState into the bag: the received bytes as they are, vs decoded and re-serialised
    (what a recorder built on the SDK's ChannelSubscriber, which hands out decoded objects, pays)."""
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowState_

    from asap_ros.g1.layout import LOWSTATE_LAYOUT, LOWSTATE_WIRE
    from asap_ros.recording.bag_writer import BagWriter

    payload = LOWSTATE_WIRE.to_cdr(np.zeros((), dtype=LOWSTATE_LAYOUT))
    with tempfile.TemporaryDirectory() as tmp:
        writer = BagWriter(Path(tmp) / "cost", list(T.DDS_TOPICS.values()), fsync=False)
        start = time.perf_counter()
        for i in range(samples):
            writer.write(T.LOWSTATE, i, payload)
        raw_us = (time.perf_counter() - start) / samples * 1e6
        start = time.perf_counter()
        for i in range(samples):
            writer.write(T.LOWSTATE, i, LowState_.deserialize(payload).serialize())
        decode_us = (time.perf_counter() - start) / samples * 1e6
        writer.close()
    return {"raw_write_us": raw_us, "decode_reserialise_us": decode_us}


def print_latency(steps: np.ndarray, sim: dict[str, Any], probe: Lateness | None = None,
                  step_probe: Lateness | None = None, probe_late_ns: list[int] | None = None,
                  lone_probe: Lateness | None = None) -> None:  # fmt: skip
    """Step latency (LowCmd write - LowState arrival) over the recorded steps built from a
    LowState, deadline misses beside the floor and step probes' (and the floor probe's wake-ups
    with the loop's median step added, and the floor probe against the lone one), and the
    simulator's LowState publish gaps."""
    from_a_state = steps[:, 1] > 0
    latency_ms = steps[from_a_state, 1] / 1e6
    p50, p99, pmax = np.percentile(latency_ms, [50, 99, 100])
    print(f"control step latency over {len(latency_ms)} steps: p50 {p50:.2f} ms  p99 {p99:.2f} ms  max {pmax:.2f} ms; "
          f"deadline misses (> {LATE_AFTER_MS:g} ms past the deadline): {int(steps[:, 2].sum())}")
    if probe is not None:
        print(beside_the_floor(steps[:, 2].astype(bool), probe, step_probe))
    if probe_late_ns:
        print(with_a_step(probe_late_ns, float(np.median(steps[from_a_state, 3]))))
    if probe is not None and lone_probe is not None:
        print(lone_probe.line(f"lone floor probe ({LONE_PROBE_PHASE_MS:g} ms past the loop's deadlines)")
              + ": the floor probe on the loop's deadlines against it: "
              + compared_text(probe.misses, probe.count, lone_probe.misses, lone_probe.count, "lone probe"))
    print(simulator_line(sim))


def recorder_param(text: str) -> tuple[str, str]:
    """``name:=value`` -> (name, value)."""
    name, sep, value = text.partition(":=")
    if not sep or not name:
        raise argparse.ArgumentTypeError(f"expected name:=value, got {text!r}")
    return name, value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--duration", type=float, default=600.0, help="seconds of motions (whole runs)")
    parser.add_argument("--output", type=Path, help="bag parent directory (default: a temporary one)")
    parser.add_argument("--domain", type=int, default=process_domain())
    parser.add_argument("--mocap-rate", type=float, default=MOCAP_RATE_HZ, help="simulated mocap, Hz (0: none)")
    parser.add_argument("-p", dest="params", action="append", default=[], type=recorder_param,
                        help="extra recorder parameter name:=value")
    args = parser.parse_args(argv)

    logs = Path(tempfile.mkdtemp(prefix="record_session_"))
    output = args.output or logs
    params = {"output_dir": str(output), "bag_name": BAG_NAME, "min_free_mb": 100.0,
              **dict(args.params)}
    recorder = node_process("recorder_node", args.domain, params, logs / "recorder.log")
    probe = FloorProbe(TEST_DEPLOY_PARAMS["realtime_priority"])
    step_probe = FloorProbe(TEST_DEPLOY_PARAMS["realtime_priority"], step_policy=STEP_PROBE_POLICY,
                            phase_ms=STEP_PROBE_PHASE_MS)
    lone_probe = FloorProbe(TEST_DEPLOY_PARAMS["realtime_priority"], phase_ms=LONE_PROBE_PHASE_MS)
    try:
        system = System(args.domain, logs,
                        lowstate_rate_hz=LOWSTATE_RATE_HZ, mocap_rate_hz=args.mocap_rate,
                        mocap_readers=MOCAP_READERS if args.mocap_rate > 0 else 0)
        try:
            wait_for_recorder(60.0)
            cpu_start, wall_start = cpu_seconds(recorder.pid), time.monotonic()
            system.start_supervisor()
            system.start_deploy()
            system.sim.start()
            with probe, step_probe, lone_probe:
                runs, faults, ended_early = run_motions(system, args.duration)
        finally:
            system.close()  # supervisor, deploy (it logs its counts), then the simulator
        cpu, wall = cpu_seconds(recorder.pid) - cpu_start, time.monotonic() - wall_start
        time.sleep(1.0)  # reliable writers' last repairs
        rss, drops = peak_rss_mb(recorder.pid), udp_drops(recorder.pid)
        recorder.send_signal(signal.SIGINT)
        if recorder.wait(timeout=120) != 0:
            print(f"recorder exit {recorder.returncode} (log: {logs / 'recorder.log'})", file=sys.stderr)
            return 1
    finally:
        if recorder.poll() is None:
            recorder.kill()
            recorder.wait()

    sim = system.sim.stats()
    deploy = deploy_published(logs / "deploy1.log")
    published = {
        T.LOWSTATE: ("asap_sim", sim["lowstates_published"]),
        T.LOWCMD: ("asap_deploy", deploy["rt/lowcmd"]),
        T.POLICY_STEP: ("asap_deploy", deploy["rt/asap/policy_step"]),
        T.TRANSITION: ("asap_deploy", deploy["rt/asap/transition"]),
    }
    if args.mocap_rate > 0:
        published[T.MOCAP_POSE] = ("asap_sim mocap", sim["mocap"]["published"])
    bag = output / BAG_NAME
    recorded, lowstate_ticks, steps = read_bag(bag)
    size_mb = sum(f.stat().st_size for f in bag.glob("*.mcap")) / 1e6

    print(f"session {wall:.0f} s: {runs} runs of the motion, {len(faults)} faults (DAMPING, then Reset + Stand); "
          f"bag {size_mb:.0f} MB (logs: {logs})")
    for reason in faults:
        print(f"  fault: {reason}")
    if ended_early:
        print(f"  session ended early: {ended_early}")
    print(f"{'topic':<20} {'publisher':<15} {'published':>10} {'recorded':>10}")
    complete = True
    for topic, (source, sent) in published.items():
        complete &= recorded.get(topic, 0) == sent
        print(f"{topic:<20} {source:<15} {sent:>10} {recorded.get(topic, 0):>10}")
    for topic in sorted(set(recorded) - set(published)):
        print(f"{topic:<20} {'(not counted)':<15} {'':>10} {recorded[topic]:>10}")
    period_ms = round(1000 / LOWSTATE_RATE_HZ)
    print(f"missing LowState ticks: {missing(lowstate_ticks, np.arange(1, sim['lowstates_published'] + 1) * period_ms)}")
    print(f"missing policy-step control ticks: {missing(steps[:, 0], np.arange(1, deploy['rt/asap/policy_step'] + 1))}")
    print(f"UDP datagrams dropped on the recorder's sockets (receive buffer full): {drops}")
    print(f"every published message recorded: {'yes' if complete else 'NO'}")
    print(f"recorder CPU: {cpu / wall * 100:.1f} % of one core over {wall:.0f} s; peak RSS {rss:.0f} MB")
    print_latency(steps, sim, probe.lateness, step_probe.lateness, probe.late_ns, lone_probe.lateness)
    print(late_causes_line(deploy_loop_stats(logs / "deploy1.log")))
    costs = per_message_costs()
    print(f"per LowState: raw bytes into the bag {costs['raw_write_us']:.1f} µs; "
          f"decode + re-serialise {costs['decode_reserialise_us']:.1f} µs")
    return 0 if complete else 1


if __name__ == "__main__":
    sys.exit(main())
