"""``asap-ros sim``: the simulated G1, the runtime and the scripted operator, in real time over DDS.

``asap_sim`` runs as a separate process (physics and control do not share a GIL, as on the
real robot), on this run's own DDS domain on loopback. This process runs the
:class:`~asap_ros.runtime.control_loop.ControlLoop` (50 Hz, absolute deadlines) on ``rt/lowstate`` /
``rt/lowcmd``, follows the simulator's ground truth, drives the state machine with the
:class:`~asap_ros.sim.session.OperatorScript` and writes the run's summary JSON. ``--record``
adds the ``asap_recorder`` process.
"""

from __future__ import annotations

import argparse
import collections
import datetime
import os
import struct
import subprocess
import sys
import time
from pathlib import Path
from typing import TYPE_CHECKING, Any

from asap_ros.runtime.scheduling import GIL_SWITCH_INTERVAL_S, below, fifo_permitted
from asap_ros.sim.process import dying_with_this_process, read_stats, sim_command, stop_gracefully

if TYPE_CHECKING:
    from asap_ros.sim.session import OperatorScript, RunSetup

DEFAULT_POLICY = "CR7_level1.yaml"
SIM_READY_TIMEOUT_S = 30.0
GROUND_TRUTH_WAIT_S = 0.05
POLL_PERIOD_S = 0.01
DEFAULT_RT_PRIORITY = 80
"""The control thread's SCHED_FIFO priority (as asap_deploy's on the robot)."""
SIMULATOR_ABOVE = 10
"""The simulator's physics thread and DDS receive threads run this far above the control thread:
in the place of the robot's own board, out of reach of the computer's load. Its rt/lowcmd reader
runs one below the control thread: the board takes LowCmd without the computer's CPU."""
RECORDER_MODULE = "asap_ros.ros.recorder_node"
RECORDER_READY_S = 3.0
"""Time given to asap_recorder to subscribe before the robot stands up."""


def add_run_arguments(parser: argparse.ArgumentParser) -> None:
    """Options shared by ``sim`` and ``rollout``."""
    parser.add_argument("--policy", type=Path, help=f"policy spec YAML (default: policies/{DEFAULT_POLICY})")
    parser.add_argument("--onnx", type=Path, help="actor ONNX file replacing the spec's (same observation layout)")
    parser.add_argument("--clip", type=Path, help="motion clip pickle replacing the spec's (sets the phase length)")
    parser.add_argument("--profile", default="nominal", help="robot profile name (config/profiles/) or YAML path")
    parser.add_argument("--stand-up-s", type=float, help="stand-up duration, s (default: config/controller.yaml)")
    parser.add_argument("--controller-config", type=Path,
                        help="controller YAML: gains, safety limits (default: config/controller.yaml)")
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
        "--rt-priority", type=int, default=DEFAULT_RT_PRIORITY, metavar="N",
        help=f"SCHED_FIFO priority (2-89) of the control thread; the simulator's physics runs {SIMULATOR_ABOVE} above it "
        "(the robot's own board), this process's DDS receive threads one above, its other threads one below; 0: "
        f"normal scheduling (default {DEFAULT_RT_PRIORITY}; without root or CAP_SYS_NICE the run says so and uses "
        "normal scheduling)",
    )  # fmt: skip


def output_dir(out: Path | None) -> Path:
    path = out if out is not None else Path("runs") / datetime.datetime.now(datetime.timezone.utc).strftime("%Y%m%d-%H%M%S")
    path.mkdir(parents=True, exist_ok=True)
    return path


def started_at() -> str:
    return datetime.datetime.now(datetime.timezone.utc).isoformat(timespec="seconds")


def policy_path(policy: Path | None) -> Path:
    from asap_ros.config.paths import policies_dir

    return policy if policy is not None else policies_dir() / DEFAULT_POLICY


class GroundTruthBuffer:
    """The simulator's ground truth by LowState tick (raw samples of the newest ``capacity`` ticks).

    Taken in batches by the thread that asks (the loop's sink thread, once per step), not handed
    to a Python thread 500 times a second: fewer wake-ups contending for the GIL the control
    thread needs. Samples stay serialised until asked for.
    """

    TICK = struct.Struct("<I")  # GroundTruth_.tick: the first field after the 4-byte CDR header
    HISTORY = 1024
    """Samples the DDS reader keeps between two takes (2 s at 500 Hz)."""

    def __init__(self, capacity: int = 4096):
        from cyclonedds.core import Policy
        from cyclonedds.qos import Qos

        from asap_ros.runtime.dds import PolledReader
        from asap_ros.sim.dds_types import GROUND_TRUTH_TOPIC, GroundTruth_

        self._reader = PolledReader(GROUND_TRUTH_TOPIC, GroundTruth_, Qos(Policy.History.KeepLast(self.HISTORY)),
                                    depth=self.HISTORY)
        self._payloads: collections.OrderedDict[int, bytes] = collections.OrderedDict()
        self._capacity = capacity
        self.received = 0

    def _take(self) -> None:
        for payload in self._reader.take_all():
            self._payloads[self.TICK.unpack_from(payload, 4)[0]] = payload
            if len(self._payloads) > self._capacity:
                self._payloads.popitem(last=False)
            self.received += 1

    def get(self, tick: int, timeout_s: float):
        """The :class:`~asap_ros.tracking.evaluation.BodyPose` published with LowState ``tick``; ``None`` if it did not arrive."""
        import numpy as np

        from asap_ros.sim.dds_types import GroundTruth_
        from asap_ros.tracking.evaluation import BodyPose

        deadline = time.monotonic() + timeout_s
        self._take()
        while tick not in self._payloads and (left := deadline - time.monotonic()) > 0:
            self._reader.wait(left)
            self._take()
        payload = self._payloads.get(tick)
        if payload is None:
            return None
        sample = GroundTruth_.deserialize(payload)
        return BodyPose(np.array(sample.pelvis_pos), np.array(sample.pelvis_quat_wxyz), np.array(sample.q))

    def close(self) -> None:
        self._reader.close()


def _start_simulator(args: argparse.Namespace, domain: int, out_dir: Path, record: bool, rt_priority: int) -> subprocess.Popen:
    command = sim_command(domain, stats_json=out_dir / "sim_stats.json", profile=str(args.profile),
                          mocap_rate_hz=None if record else 0, viewer=args.viewer,
                          realtime_priority=rt_priority + SIMULATOR_ABOVE if rt_priority else 0,
                          lowcmd_priority=below(rt_priority))
    log = (out_dir / "asap_sim.log").open("w")
    return subprocess.Popen(dying_with_this_process(command), stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "ROS_DOMAIN_ID": str(domain)})


def _start_recorder(directory: Path, domain: int, out_dir: Path) -> subprocess.Popen:
    """``asap_recorder`` (rclpy node) on this run's domain, bags under ``directory``."""
    import importlib.util

    from asap_ros.core.errors import AsapError

    if importlib.util.find_spec(RECORDER_MODULE) is None:
        raise AsapError(f"--record: asap_recorder is not part of this installation ({RECORDER_MODULE})")
    directory.mkdir(parents=True, exist_ok=True)
    params = {"dds_domain": domain, "network_interface": "lo", "output_dir": str(directory.resolve())}
    command = [sys.executable, "-m", RECORDER_MODULE, "--ros-args"]
    for name, value in params.items():
        command += ["-p", f"{name}:={value}"]
    log = (out_dir / "asap_recorder.log").open("w")
    return subprocess.Popen(dying_with_this_process(command), stdout=log, stderr=subprocess.STDOUT,
                            env={**os.environ, "ROS_DOMAIN_ID": str(domain)})


class RealTimeRun:
    """One real-time run: ``asap_sim`` (and ``asap_recorder``), the DDS endpoints, the control
    loop, the ground-truth trace; ``with`` closes all of it, processes last."""

    def __init__(self, args: argparse.Namespace, setup: RunSetup, out_dir: Path, rt_priority: int, priority_note: str | None):
        from asap_ros.tracking.evaluation import RunTrace

        self.args, self.setup, self.out_dir = args, setup, out_dir
        self.rt_priority, self.priority_note = rt_priority, priority_note
        self.trace = RunTrace()
        self.ground_truth: GroundTruthBuffer | None = None
        self.processes: list[subprocess.Popen] = []
        self.loop: Any = None
        self._closers: list[Any] = []

    def __enter__(self) -> RealTimeRun:
        try:
            self._start()
        except BaseException:
            self.__exit__()
            raise
        return self

    def _start(self) -> None:
        from asap_ros.runtime.domains import process_domain
        from asap_ros.runtime.fault_injection import FaultInjection
        from asap_ros.runtime.mocap import root_dds_topic
        from asap_ros.runtime.wiring import DdsControl
        from asap_ros.sim.config import MocapConfig
        from asap_ros.sim.control import SimControlClient

        args, recording = self.args, self.args.record is not None
        domain = process_domain()
        self.processes.append(_start_simulator(args, domain, self.out_dir, recording, self.rt_priority))
        if recording:
            self.processes.append(_start_recorder(args.record, domain, self.out_dir))
        if self.rt_priority:  # after the children (they must not inherit it), before any thread of ours
            _raise_priority(below(self.rt_priority))
        # publish_steps: the same samples asap_deploy publishes, for asap_recorder
        control = DdsControl(self.setup.controller, domain, "lo", publish_steps=recording,
                             realtime_priority=self.rt_priority, fault_injection=FaultInjection.from_env(),
                             receive_priority=self.rt_priority + 1 if self.rt_priority else 0,
                             mocap_topic=root_dds_topic(MocapConfig().topic) if recording else None)
        self._closers.append(control)
        self.loop = control.loop
        self.ground_truth = GroundTruthBuffer()  # after init_channels: its reader is on this run's domain
        self._closers.append(self.ground_truth)
        self.loop.add_sink(self._trace_step)
        _wait_for_simulator(self.loop, self.processes[0], self.out_dir)
        if recording:
            time.sleep(RECORDER_READY_S)
        self.band = SimControlClient()
        self._closers.append(self.band)
        self.loop.start()

    def _trace_step(self, record: Any) -> None:
        """Sink: the step, with the ground truth of the LowState it was built from."""
        has_state = bool(record.lowstate_stamp_ns)
        pose = self.ground_truth.get(record.lowstate_tick, GROUND_TRUTH_WAIT_S) if has_state else None
        self.trace.add(record.output.mode, record.output.policy, pose, record.lowstate_tick if has_state else -1)

    def operate(self) -> tuple[OperatorScript, float]:
        """Run the operator script to its end; returns it and the run's duration in seconds."""
        from asap_ros.core.errors import RejectedRequest
        from asap_ros.sim.session import BandAction, OperatorScript

        script, controller, simulator = OperatorScript(self.setup.plan), self.setup.controller, self.processes[0]
        t0 = time.monotonic()
        while not script.finished:
            t_s = time.monotonic() - t0
            if simulator.poll() is not None:
                script.abort(t_s, f"asap_sim exited with code {simulator.returncode} (see {self.out_dir / 'asap_sim.log'})")
                break
            for action in script.poll(t_s, controller.mode, controller.fault_reason):
                if isinstance(action, BandAction):
                    self.band.send(action.action, action.value)
                    continue
                try:
                    self.loop.request(action)
                except RejectedRequest as exc:
                    script.rejected(t_s, action, str(exc))
            time.sleep(POLL_PERIOD_S)
        return script, time.monotonic() - t0

    def timing(self) -> dict[str, Any]:
        loop = self.loop
        timing = {**loop.stats().as_dict(), "recent_steps": loop.recent_steps(), "sink_errors": loop.sink_errors,
                  "ground_truth_samples": self.ground_truth.received}  # fmt: skip
        notes = [note for note in (self.priority_note, loop.scheduling_note) if note]
        if notes:
            timing["priority_note"] = "; ".join(notes)
        return timing

    def __exit__(self, *_exc: object) -> None:
        if self.loop is not None:
            self.loop.stop()
        for endpoint in reversed(self._closers):
            endpoint.close()
        for process in self.processes:
            stop_gracefully(process)


def run(args: argparse.Namespace) -> int:
    if args.video is not None:
        from asap_ros.sim.video import select_gl_backend

        select_gl_backend()  # before anything imports mujoco
    from asap_ros.core.errors import ConfigError
    from asap_ros.sim.profile import load_profile
    from asap_ros.sim.session import COMPLETED, prepare_run
    from asap_ros.sim.summary import format_result, summarize_run, write_summary

    if args.rt_priority != 0 and not 2 <= args.rt_priority <= 99 - SIMULATOR_ABOVE:
        raise ConfigError(None, "--rt-priority", f"must be 0 (normal scheduling) or a SCHED_FIFO priority 2..{99 - SIMULATOR_ABOVE}",
                          args.rt_priority)
    rt_priority, priority_note = args.rt_priority, None
    if rt_priority and not fifo_permitted():
        rt_priority, priority_note = 0, f"--rt-priority {args.rt_priority}: SCHED_FIFO not permitted (no root or CAP_SYS_NICE); normal scheduling"
        print(f"asap-ros sim: {priority_note}", file=sys.stderr)
    setup = prepare_run(policy_path(args.policy), args.onnx, args.clip, args.stand_up_s,
                        controller_config=args.controller_config)
    load_profile(args.profile, setup.robot.joint_names)  # a bad profile is refused here, not in asap_sim's log
    sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)
    out_dir = output_dir(args.out)
    stamp, began = started_at(), time.monotonic()
    with RealTimeRun(args, setup, out_dir, rt_priority, priority_note) as run_:
        script, duration_s = run_.operate()
    files = {"asap_sim_log": str(out_dir / "asap_sim.log")}
    if args.record is not None:
        files.update(recording=str(args.record), asap_recorder_log=str(out_dir / "asap_recorder.log"))
    if args.video is not None:
        files.update(_render(args.video, run_.trace))
    sim_stats = read_stats(out_dir / "sim_stats.json")
    summary = summarize_run(
        "sim", setup, script, run_.trace, profile=str(sim_stats.get("profile", args.profile)), started_at=stamp,
        wall_time_s=time.monotonic() - began, sim_time_s=float(sim_stats.get("sim_time_s", duration_s)),
        timing=run_.timing(), sim_stats=sim_stats, files=files,
    )  # fmt: skip
    path = write_summary(summary, out_dir / "summary.json")
    print(format_result(summary.to_dict()))
    print(f"summary: {path}")
    return 0 if summary.outcome == COMPLETED and not summary.fell else 1


def _raise_priority(priority: int) -> None:
    """SCHED_FIFO for this thread and the threads it starts next (DDS, sinks), one below the control thread.

    Without it a busy machine can starve a thread that holds the GIL the control thread needs.
    """
    os.sched_setscheduler(0, os.SCHED_FIFO, os.sched_param(priority))


def _wait_for_simulator(loop, process: subprocess.Popen, out_dir: Path) -> None:
    from asap_ros.core.errors import AsapError

    deadline = time.monotonic() + SIM_READY_TIMEOUT_S
    while time.monotonic() < deadline:
        if loop.states.next_arrival(0.1)[0] is not None:
            return
        if process.poll() is not None:
            raise AsapError(f"asap_sim exited with code {process.returncode} before publishing (see {out_dir / 'asap_sim.log'})")
    raise AsapError(f"no rt/lowstate from asap_sim within {SIM_READY_TIMEOUT_S:g} s (see {out_dir / 'asap_sim.log'})")


def _render(video: Path, trace) -> dict[str, str]:
    """Render the run; a missing GL context is reported (stderr and summary), not fatal."""
    from asap_ros.config.assets import asset_path
    from asap_ros.sim.config import load_sim_config
    from asap_ros.sim.video import VideoError, render_video

    try:
        return {"video": str(render_video(asset_path(load_sim_config().model), trace.qpos(), video, step_dt=0.02))}
    except VideoError as exc:
        print(f"asap-ros sim: video not written: {exc}", file=sys.stderr)
        return {"video_error": str(exc)}
