"""``asap-ros sim``: the simulated G1, the runtime and the scripted operator, in real time over DDS.

``asap_sim`` runs as a separate process (physics and control do not share a GIL, as on the
real robot), on this run's own DDS domain on loopback. This process runs the
:class:`~asap_ros.control_loop.ControlLoop` (50 Hz, absolute deadlines) on ``rt/lowstate`` /
``rt/lowcmd``, follows the simulator's ground truth, drives the state machine with the
:class:`~asap_ros.session.OperatorScript` and writes the run's summary JSON. ``--record``
adds the ``asap_recorder`` process.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import json
import os
import signal
import struct
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

DEFAULT_POLICY = "CR7_level1.yaml"
SIM_READY_TIMEOUT_S = 30.0
SIM_STOP_TIMEOUT_S = 10.0
GROUND_TRUTH_WAIT_S = 0.05
POLL_PERIOD_S = 0.01
RECORDER_MODULE = "asap_ros.ros.recorder_node"
RECORDER_READY_S = 3.0
"""Time given to asap_recorder to subscribe before the robot stands up."""
GIL_SWITCH_INTERVAL_S = 0.0002
"""The control thread waits at most this long for the GIL held by a DDS thread (CPython: 5 ms)."""


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``sim`` and ``rollout``."""
    parser.add_argument("--policy", type=Path, help=f"policy spec YAML (default: policies/{DEFAULT_POLICY})")
    parser.add_argument("--onnx", type=Path, help="actor ONNX file replacing the spec's (same observation layout)")
    parser.add_argument("--clip", type=Path, help="motion clip pickle replacing the spec's (sets the phase length)")
    parser.add_argument("--profile", default="nominal", help="robot profile name (config/profiles/) or YAML path")
    parser.add_argument("--stand-up-s", type=float, help="stand-up duration, s (default: config/controller.yaml)")
    parser.add_argument("--out", type=Path, help="output directory (default: runs/<UTC timestamp>)")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_run_arguments(parser)
    view = parser.add_mutually_exclusive_group()
    view.add_argument("--headless", dest="viewer", action="store_false", help="no viewer window (default)")
    view.add_argument("--viewer", dest="viewer", action="store_true", help="MuJoCo viewer in the simulator (needs a display)")
    parser.set_defaults(viewer=False)
    parser.add_argument("--video", type=Path, help="render the run offscreen to this MP4 file afterwards (EGL/OSMesa)")
    parser.add_argument("--record", type=Path, metavar="DIR", help="record the session with asap_recorder into DIR")
    parser.add_argument(
        "--rt-priority", type=int, default=0, metavar="N",
        help="SCHED_FIFO priority (2-99) for the control thread and the simulator process, one less for the runtime's "
        "other threads (needs root or CAP_SYS_NICE; default 0: normal scheduling)",
    )  # fmt: skip


def output_dir(out: Path | None) -> Path:
    path = out if out is not None else Path("runs") / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path.mkdir(parents=True, exist_ok=True)
    return path


def started_at() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def policy_path(policy: Path | None) -> Path:
    from asap_ros.paths import policies_dir

    return policy if policy is not None else policies_dir() / DEFAULT_POLICY


class GroundTruthBuffer:
    """The simulator's ground truth by LowState tick (raw samples of the newest ``capacity`` ticks).

    Samples stay serialised until asked for: 500 per second arrive, one per control step is used.
    """

    TICK = struct.Struct("<I")  # GroundTruth_.tick: the first field after the 4-byte CDR header

    def __init__(self, capacity: int = 4096):
        self._payloads: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._capacity = capacity
        self._cond = threading.Condition()
        self.received = 0

    def on_payload(self, payload: bytes, _stamp_ns: int) -> None:
        """RawReader handler (DDS thread)."""
        tick = self.TICK.unpack_from(payload, 4)[0]
        with self._cond:
            self._payloads[tick] = payload
            if len(self._payloads) > self._capacity:
                self._payloads.popitem(last=False)
            self.received += 1
            self._cond.notify_all()

    def get(self, tick: int, timeout_s: float):
        """The :class:`~asap_ros.tracking.BodyPose` published with LowState ``tick``; ``None`` if it did not arrive."""
        import numpy as np

        from asap_ros.sim.dds_types import GroundTruth_
        from asap_ros.tracking import BodyPose

        with self._cond:
            self._cond.wait_for(lambda: tick in self._payloads, timeout=timeout_s)
            payload = self._payloads.get(tick)
        if payload is None:
            return None
        sample = GroundTruth_.deserialize(payload)
        return BodyPose(np.array(sample.pelvis_pos), np.array(sample.pelvis_quat_wxyz), np.array(sample.q))


def _start_simulator(args: argparse.Namespace, domain: int, out_dir: Path, record: bool) -> subprocess.Popen:
    command = [
        sys.executable, "-m", "asap_ros.sim.main", "--domain", str(domain), "--interface", "lo",
        "--profile", str(args.profile), "--stats-json", str(out_dir / "sim_stats.json"),
    ]  # fmt: skip
    if not record:
        command += ["--mocap-rate", "0"]

    if args.viewer:
        command.append("--viewer")
    if args.rt_priority:
        command = ["chrt", "--fifo", str(args.rt_priority), *command]
    log = (out_dir / "asap_sim.log").open("w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ROS_DOMAIN_ID": str(domain)})


def _start_recorder(directory: Path, domain: int, out_dir: Path) -> subprocess.Popen:
    """``asap_recorder`` (rclpy node) on this run's domain, bags under ``directory``."""
    import importlib.util

    from asap_ros.errors import AsapError

    if importlib.util.find_spec(RECORDER_MODULE) is None:
        raise AsapError(f"--record: asap_recorder is not part of this installation ({RECORDER_MODULE})")
    directory.mkdir(parents=True, exist_ok=True)
    params = {"dds_domain": domain, "network_interface": "lo", "output_dir": str(directory.resolve())}
    command = [sys.executable, "-m", RECORDER_MODULE, "--ros-args"]
    for name, value in params.items():
        command += ["-p", f"{name}:={value}"]
    log = (out_dir / "asap_recorder.log").open("w")
    return subprocess.Popen(command, stdout=log, stderr=subprocess.STDOUT, env={**os.environ, "ROS_DOMAIN_ID": str(domain)})


class StepPublisherSink:
    """Publishes every control step (and mode change) on ``rt/asap/*`` for ``asap_recorder``,
    the same samples ``asap_deploy`` publishes (sink thread, never the control thread)."""

    def __init__(self, controller) -> None:
        from asap_ros.dds_types import PolicyStepPublisher

        self._publisher = PolicyStepPublisher()
        self._controller = controller
        self._episode = 0

    def __call__(self, record) -> None:
        out, policy = record.output, record.output.policy
        motion = self._controller.motion or ""
        if out.transition is not None:
            t = out.transition
            self._publisher.publish_transition(
                stamp_ns=t.stamp_ns, from_mode=t.from_mode.name, to_mode=t.to_mode.name, reason=t.reason, motion=motion
            )
            self._episode += t.to_mode.name == "TRACKING"
        self._publisher.publish_step(
            stamp_ns=record.stamp_ns, control_tick=record.control_tick, mode=out.mode.name,
            motion=motion if policy is not None else "", episode=self._episode,
            motion_tick=policy.tick if policy is not None else -1, phase=policy.phase if policy is not None else 0.0,
            lowstate_tick=record.lowstate_tick, lowstate_stamp_ns=record.lowstate_stamp_ns,
            mocap_stamp_ns=record.mocap_stamp_ns, obs=policy.obs if policy is not None else (),
            raw_action=policy.raw_action if policy is not None else (), q_target=out.command.q,
            compute_ns=record.compute_ns, latency_ns=record.latency_ns, late=record.late,
        )  # fmt: skip

    def close(self) -> None:
        self._publisher.close()


def _stop(process: subprocess.Popen) -> None:
    """SIGINT (clean exit, statistics written), then SIGKILL if it does not exit in time."""
    if process.poll() is None:
        process.send_signal(signal.SIGINT)
        try:
            process.wait(SIM_STOP_TIMEOUT_S)
        except subprocess.TimeoutExpired:
            process.kill()
            process.wait()


def run(args: argparse.Namespace) -> int:
    if args.video is not None:
        from asap_ros.video import select_gl_backend

        select_gl_backend()  # before anything imports mujoco
    from unitree_sdk2py.idl.unitree_hg.msg.dds_ import LowCmd_, LowState_

    from asap_ros import dds
    from asap_ros.control_loop import ControlLoop
    from asap_ros.errors import ConfigError, RejectedRequest
    from asap_ros.session import COMPLETED, BandAction, OperatorScript, prepare_run
    from asap_ros.sim.control import SimControlClient
    from asap_ros.sim.dds_types import GROUND_TRUTH_TOPIC, GroundTruth_
    from asap_ros.sim.simulator import LOWCMD_TOPIC, LOWSTATE_TOPIC
    from asap_ros.summary import format_result, summarize_run, write_summary
    from asap_ros.tracking import RunTrace

    if args.rt_priority != 0 and not 2 <= args.rt_priority <= 99:
        raise ConfigError(None, "--rt-priority", "must be 0 (normal scheduling) or a SCHED_FIFO priority 2..99", args.rt_priority)
    setup = prepare_run(policy_path(args.policy), args.onnx, args.clip, args.stand_up_s)
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    priority_note = _raise_priority(args.rt_priority - 1) if args.rt_priority else None
    out_dir = output_dir(args.out)
    domain = dds.process_domain()
    stamp, began = started_at(), time.monotonic()
    processes = [_start_simulator(args, domain, out_dir, record=args.record is not None)]
    loop: ControlLoop | None = None
    try:
        if args.record is not None:
            processes.append(_start_recorder(args.record, domain, out_dir))
        dds.init_channels(domain, "lo")
        lowcmd = dds.RawWriter(LOWCMD_TOPIC, LowCmd_)
        loop = ControlLoop(setup.controller, lowcmd.write, realtime_priority=args.rt_priority)
        ground_truth = GroundTruthBuffer()
        readers = [
            dds.RawReader(GROUND_TRUTH_TOPIC, GroundTruth_, ground_truth.on_payload),
            dds.RawReader(LOWSTATE_TOPIC, LowState_, loop.latest.put),  # stamped on arrival, decoded by the loop
        ]
        trace = RunTrace()

        def record_step(record) -> None:
            pose = ground_truth.get(record.lowstate_tick, GROUND_TRUTH_WAIT_S) if record.lowstate_stamp_ns else None
            trace.add(record.output.mode, record.output.policy, pose)

        loop.add_sink(record_step)
        step_publisher = StepPublisherSink(setup.controller) if args.record is not None else None
        if step_publisher is not None:
            loop.add_sink(step_publisher)
        _wait_for_simulator(loop, processes[0], out_dir)
        if args.record is not None:
            time.sleep(RECORDER_READY_S)
        band = SimControlClient()
        loop.start()
        script = OperatorScript(setup.plan)
        t0 = time.monotonic()
        controller = setup.controller
        while not script.finished:
            t_s = time.monotonic() - t0
            if processes[0].poll() is not None:
                script.abort(t_s, f"asap_sim exited with code {processes[0].returncode} (see {out_dir / 'asap_sim.log'})")
                break
            for action in script.poll(t_s, controller.mode, controller.fault_reason):
                if isinstance(action, BandAction):
                    band.send(action.action, action.value)
                    continue
                try:
                    loop.request(action)
                except RejectedRequest as exc:
                    script.rejected(t_s, action, str(exc))
            time.sleep(POLL_PERIOD_S)
        sim_time_s = time.monotonic() - t0
        loop.stop()
        timing = {**loop.stats.summary(), "dropped_records": loop.dropped_records, "sink_errors": loop.sink_errors,
                  "ground_truth_samples": ground_truth.received}  # fmt: skip
        notes = [note for note in (priority_note, loop.priority_note) if note]
        if notes:
            timing["priority_note"] = "; ".join(notes)
        band.close()
        for reader in readers:
            reader.close()
        lowcmd.close()
        if step_publisher is not None:
            step_publisher.close()
    finally:
        if loop is not None:
            loop.stop()
        for process in processes:
            _stop(process)
    files = {"asap_sim_log": str(out_dir / "asap_sim.log")}
    if args.record is not None:
        files.update(recording=str(args.record), asap_recorder_log=str(out_dir / "asap_recorder.log"))
    if args.video is not None:
        files.update(_render(args.video, trace))
    sim_stats = _read_sim_stats(out_dir / "sim_stats.json")
    summary = summarize_run(
        "sim", setup, script, trace, profile=str(sim_stats.get("profile", args.profile)), started_at=stamp,
        wall_time_s=time.monotonic() - began, sim_time_s=float(sim_stats.get("sim_time_s", sim_time_s)),
        timing=timing, sim_stats=sim_stats, files=files,
    )  # fmt: skip
    path = write_summary(summary, out_dir / "summary.json")
    print(format_result(summary.to_dict()))
    print(f"summary: {path}")
    return 0 if summary.outcome == COMPLETED and not summary.fell else 1


def _raise_priority(priority: int) -> str | None:
    """SCHED_FIFO for this thread and the threads it starts next (DDS, sinks), one below the control thread.

    Without it a busy machine can starve a thread that holds the GIL the control thread needs.
    """
    try:
        os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))
    except PermissionError:
        return "SCHED_FIFO not permitted for the runtime threads; they run at normal priority"
    return None


def _wait_for_simulator(loop, process: subprocess.Popen, out_dir: Path) -> None:
    from asap_ros.errors import AsapError

    deadline = time.monotonic() + SIM_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        msg, _, _ = loop.latest.newest_after(0, 0.1)
        if msg is not None:
            return
        if process.poll() is not None:
            raise AsapError(f"asap_sim exited with code {process.returncode} before publishing (see {out_dir / 'asap_sim.log'})")
    raise AsapError(f"no rt/lowstate from asap_sim within {SIM_READY_TIMEOUT_S:g} s (see {out_dir / 'asap_sim.log'})")


def _read_sim_stats(path: Path) -> dict[str, Any]:
    try:
        return json.loads(path.read_text(encoding="utf-8"))
    except (OSError, ValueError) as exc:
        return {"error": f"no simulator statistics ({path}: {exc})"}


def _render(video: Path, trace) -> dict[str, str]:
    """Render the run; a missing GL context is reported (stderr and summary), not fatal."""
    from asap_ros.assets import asset_path
    from asap_ros.sim.config import load_sim_config
    from asap_ros.video import VideoError, render_video

    try:
        return {"video": str(render_video(asset_path(load_sim_config().model), trace.qpos(), video, step_dt=0.02))}
    except VideoError as exc:
        print(f"asap-ros sim: video not written: {exc}", file=sys.stderr)
        return {"video_error": str(exc)}
