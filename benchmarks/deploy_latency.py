"""Control step latency with everything on: asap_deploy publishing all its topics, the
supervisor watching, asap_recorder recording, the simulated G1 at 500 Hz.

Latency = LowCmd write time - arrival time of the LowState it was computed from, read from
every ``PolicyStep_`` the deploy node publishes on rt/asap/policy_step (the recorder's input),
so the figures come from an independent reader over the whole run. The deploy node runs with
its production timing parameters (late_after_ms 5); the control thread at SCHED_FIFO 80.

    .venv/bin/python benchmarks/deploy_latency.py [--motions 3] [--no-recorder] [--switch-interval-ms 5]
                                                  [--control-cpu 1] [--view | --view-browser]

``--view`` also runs ``asap-ros view`` (live, its own process at nice 10) for the whole run,
started before the robot stands up, its page served for a browser on another computer, as an
operator runs it: the figures then say what the view costs the control loop on the same cores.
``--view-browser`` adds a headless Chromium showing the page on these cores (SCHED_IDLE; WebGL in
software), which a robot computer would not run.

``--control-cpu N`` runs the deploy node's control thread alone on CPU N (its ``control_cpu``
parameter) and every process of the benchmark (simulator, recorder, supervisor, the deploy
node's other threads, this reader) on the other CPUs, as on a robot computer with a core kept
for control.

Beside the motions a floor probe (:mod:`asap_ros.bench.floor_probe`) sleeps to the control
loop's own deadlines (multiples of 20 ms on the monotonic clock; with ``--control-cpu``, on that
CPU, 5 ms after them) at the control thread's priority (SCHED_FIFO 80), and a step probe runs the
same kick_level1 step, alone in its process, 10 ms after them: the loop's late steps are printed
beside the probes' of the same interval.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import tempfile
import threading
from pathlib import Path

import numpy as np
from record_session import (  # the sibling benchmark (benchmarks/ is the script's path)
    STEP_PROBE_PHASE_MS,
    STEP_PROBE_POLICY,
    cpu_seconds,
    deploy_loop_stats,
    late_causes_line,
)

from asap_ros.bench.floor_probe import FloorProbe, beside_the_floor, with_a_step
from asap_ros.runtime.domains import process_domain
from asap_ros.testing.ros_system import TEST_DEPLOY_PARAMS, System, node_process, simulator_line


class PolicyStepReader:
    """Collects (latency_ns, late, mode, compute_ns) of every PolicyStep_ (on a RawReader thread)."""

    def __init__(self) -> None:
        from asap_ros.runtime.dds import RawReader
        from asap_ros.runtime.step_topics import POLICY_STEP_TOPIC, PolicyStep_

        self.rows: list[tuple[int, bool, str, int]] = []
        self._lock = threading.Lock()
        self._type = PolicyStep_
        self._reader = RawReader(POLICY_STEP_TOPIC, PolicyStep_, self._on_payload, depth=256)

    def _on_payload(self, payload: bytes, _stamp_ns: int, _writer: int) -> None:
        step = self._type.deserialize(payload)
        with self._lock:
            self.rows.append((step.latency_ns, step.late, step.mode, step.compute_ns))

    def close(self) -> None:
        self._reader.close()


def start_view(stack: contextlib.ExitStack, domain: int, logs: Path, browser: bool):
    """``asap-ros view`` on the benchmark's domain, and with ``browser`` a headless Chromium
    showing it (closed by ``stack``)."""
    from asap_ros.testing.browser import ViewBrowser
    from asap_ros.testing.view_process import ViewProcess

    env = {**os.environ, "ROS_DOMAIN_ID": str(domain)}
    view = ViewProcess(["--domain", str(domain), "--ros-domain", str(domain), "--policies", "kick_level1.yaml"],
                       logs / "view.log", env=env)  # fmt: skip
    stack.callback(view.close)
    view.wait_served()
    if browser:
        stack.enter_context(ViewBrowser(view.url, logs)).open()
    return view


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--motions", type=int, default=3, help="kick_level1 runs to track in full")
    parser.add_argument("--no-recorder", action="store_true")
    parser.add_argument("--switch-interval-ms", type=float, default=0.1,
                        help="deploy's sys.setswitchinterval (Python's default is 5 ms)")
    parser.add_argument("--control-cpu", type=int, help="CPU kept for the control thread alone")
    parser.add_argument("--view", action="store_true", help="run asap-ros view (its page served, opened elsewhere)")
    parser.add_argument("--view-browser", action="store_true", help="--view and a headless Chromium on its page, here")
    parser.add_argument("--domain", type=int, default=process_domain())
    args = parser.parse_args()
    args.view = args.view or args.view_browser
    deploy_params = {"switch_interval_ms": args.switch_interval_ms}
    if args.control_cpu is not None:
        os.sched_setaffinity(0, os.sched_getaffinity(0) - {args.control_cpu})  # inherited by every child
        deploy_params["control_cpu"] = args.control_cpu
    logs = Path(tempfile.mkdtemp(prefix="deploy_latency_"))
    system = System(args.domain, logs, deploy_params=deploy_params)
    steps = PolicyStepReader()
    # on the control thread's CPU the floor probe keeps a quarter period off the loop's deadlines:
    # alone on one CPU, one of the two would wait for the other's wake-up
    probe = FloorProbe(TEST_DEPLOY_PARAMS["realtime_priority"], cpu=args.control_cpu,
                       phase_ms=0.0 if args.control_cpu is None else STEP_PROBE_PHASE_MS / 2)
    step_probe = FloorProbe(TEST_DEPLOY_PARAMS["realtime_priority"], cpu=args.control_cpu, step_policy=STEP_PROBE_POLICY,
                            phase_ms=STEP_PROBE_PHASE_MS)
    recorder = None
    view: contextlib.ExitStack = contextlib.ExitStack()
    view_cpu_s = None
    try:
        if not args.no_recorder:
            recorder = node_process("recorder_node", args.domain, {"output_dir": str(logs / "bags")},
                                    logs / "recorder.log")
        if args.view:
            view_process = start_view(view, args.domain, logs, args.view_browser)
        system.start()
        # off the band, as an operator runs a motion (record_session.run_motions): hanging in the
        # pelvis band the kick actor can leave its training distribution (raw outputs past its clip)
        system.release_band()
        if args.view:
            view_cpu_s = -cpu_seconds(view_process.process.pid)
        with probe, step_probe:
            first_step = len(steps.rows)
            for _ in range(args.motions):
                system.track()
                if not system.ros.wait_mode("HOLD", 120.0):
                    raise SystemExit(f"motion did not finish: {system.ros.latched}")
            last_step = len(steps.rows)
        if args.view:
            view_cpu_s += cpu_seconds(view_process.process.pid)
    finally:
        view.close()
        if recorder is not None:
            recorder.terminate()
            recorder.wait(30)
        system.close()
        steps.close()
    with steps._lock:
        rows = list(steps.rows)
    latency_us = np.array([r[0] for r in rows if r[0] > 0], dtype=np.float64) / 1e3
    tracking = np.array([r[0] for r in rows if r[0] > 0 and r[2] == "TRACKING"], dtype=np.float64) / 1e3
    compute_us = np.array([r[3] for r in rows if r[0] > 0], dtype=np.float64) / 1e3
    misses = sum(r[1] for r in rows)
    placement = "shared CPUs" if args.control_cpu is None else f"control thread alone on CPU {args.control_cpu}"
    browser = ", a headless Chromium on its page here" if args.view_browser else ", its page not opened here"
    viewing = f"on (asap-ros view: {view_cpu_s:.1f} s CPU during the motions{browser})" if args.view else "off"
    print(f"steps: {len(rows)} ({len(tracking)} tracking), recorder: {'on' if recorder else 'off'}, view: {viewing}, "
          f"switch interval {args.switch_interval_ms:g} ms, {placement}")
    for name, values in (("latency, all steps", latency_us), ("latency, tracking", tracking), ("compute", compute_us),
                         ("arrival to compute start", latency_us - compute_us)):
        p50, p90, p99, pmax = np.percentile(values, [50, 90, 99, 100])
        print(f"{name}: p50 {p50:.0f} us  p90 {p90:.0f} us  p99 {p99:.0f} us  max {pmax:.0f} us")
    print(f"deadline misses (late steps, > 5 ms past the deadline): {misses}  (logs: {logs})")
    print(beside_the_floor([r[1] for r in rows[first_step:last_step]], probe.lateness, step_probe.lateness))
    print(with_a_step(probe.late_ns, float(np.median(compute_us)) * 1e3))
    print(simulator_line(system.sim.stats()))
    print(late_causes_line(deploy_loop_stats(logs / "deploy1.log")))


if __name__ == "__main__":
    main()
