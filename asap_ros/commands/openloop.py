"""``asap-ros openloop RECORDING...``: ASAP's open-loop protocol in MuJoCo, with and without a delta model."""

from __future__ import annotations

import argparse
from pathlib import Path


def add_recording_arguments(parser: argparse.ArgumentParser) -> None:
    """Arguments shared by ``openloop`` and ``delta fit``: recordings and the trainer simulator."""
    from asap_ros.recording import topics

    parser.add_argument("recordings", nargs="+", type=Path, metavar="RECORDING",
                        help="session bags (directories) or their asap-ros export --format asap pickles")  # fmt: skip
    parser.add_argument("--episode", type=int, action="append", metavar="N",
                        help="only episode N of each bag (repeatable; default: all)")  # fmt: skip
    parser.add_argument("--mocap-topic", default=topics.MOCAP_POSE, help="mocap pose topic of bags (default %(default)s)")
    parser.add_argument("--mocap-filter-ms", type=float, default=0.0,
                        help="root pose of bags: parabola fit over this half window, 0: interpolated as "
                             "asap-ros export writes it (default %(default)s)")  # fmt: skip
    parser.add_argument("--reset-velocity", choices=("measured", "recorded", "trainer"), default="measured",
                        help="velocities at a reset: measured (the gyro, stance-foot leg odometry with the mocap "
                             "pose, LowState dq), recorded (the mocap fit's root velocities), or the finite "
                             "differences ASAP's motion library computes from the rows (default %(default)s)")  # fmt: skip
    parser.add_argument("--skip-start", type=float, default=0.0, metavar="S",
                        help="leave out the first S seconds of each recording, e.g. a simulated session's "
                             "elastic-band release as the motion starts (default %(default)s)")  # fmt: skip
    parser.add_argument("--physics-hz", type=float, default=200.0, help="physics rate (default %(default)s, ASAP's)")
    parser.add_argument("--decimation", type=int, default=4,
                        help="physics steps per policy step (default %(default)s, ASAP's)")  # fmt: skip
    parser.add_argument("--sim-config", default=None, help="simulator config for the model (default config/sim.yaml)")
    parser.add_argument("--targets", choices=("trainer", "runtime"), default="trainer",
                        help="PD targets 0.25·(a + Δa) + default as ASAP's trainer applies them (unclamped), or "
                             "clipped to the joint limits as the runtime sent them to the robot (default %(default)s)")  # fmt: skip


def add_arguments(parser: argparse.ArgumentParser) -> None:
    add_recording_arguments(parser)
    parser.add_argument("--window", type=float, default=1.0, help="replay window, s (default %(default)s)")
    parser.add_argument("--stride", type=float, default=1.0, help="window start every S seconds (default %(default)s)")
    parser.add_argument("--delta", type=Path, default=None, metavar="MODEL",
                        help="delta-action model (ONNX actor_obs [1, 108] -> action [1, 23]) to replay with")  # fmt: skip
    parser.add_argument("--physics-rate-delta", action="store_true",
                        help="also replay with the delta recomputed every physics step (the trainer's and ASAP's "
                             "perfect delta computed in the PD; an oracle's ceiling)")  # fmt: skip
    parser.add_argument("--finetune-semantics", action="store_true",
                        help="also replay with the delta as ASAP's fine-tuning adds it (unscaled, one step late)")  # fmt: skip
    floor = parser.add_mutually_exclusive_group()
    floor.add_argument("--floor", type=Path, nargs="+", default=None, metavar="NOMINAL_RECORDING",
                       help="nominal recordings of the same motions: their replay is each motion's floor E_floor "
                            "for the share of the closable gap S and the measurability R")  # fmt: skip
    floor.add_argument("--profile", default=None, metavar="PROFILE",
                       help="simulated data: the floor is the recordings' replay by a simulator given this robot "
                            "profile's true torque scale (e.g. weak_knees)")  # fmt: skip
    parser.add_argument("--json", type=Path, default=None, metavar="PATH", help="write every figure as JSON")
    parser.add_argument("--png", type=Path, default=None, metavar="PATH",
                        help="error against horizon and per-joint bars (default: beside --json, else none)")  # fmt: skip


def load_for(args: argparse.Namespace):  # noqa: ANN201 - heavy types imported lazily
    """The recordings and a replayer for the shared arguments."""
    from asap_ros.export.motion_rows import load_recordings
    from asap_ros.export.openloop import OpenLoopReplayer
    from asap_ros.export.trainer_sim import TrainerSim

    recordings = load_recordings(args.recordings, args.episode, args.mocap_topic, args.mocap_filter_ms)
    replayer = OpenLoopReplayer(TrainerSim(args.physics_hz, args.decimation, args.sim_config, args.targets),
                                reset_velocity=args.reset_velocity)  # fmt: skip
    return recordings, replayer


def replay_floor(args: argparse.Namespace, recordings: list):  # noqa: ANN201 - heavy types imported lazily
    """The floor's replays (``--floor`` recordings, or ``--profile``'s true defect) and what they are."""
    from asap_ros.export.motion_rows import load_recordings
    from asap_ros.export.openloop import OpenLoopReplayer, run_openloop, windows_of
    from asap_ros.export.progress import Progress
    from asap_ros.export.trainer_sim import TrainerSim

    if args.floor is None and args.profile is None:
        return None, None
    sim = TrainerSim(args.physics_hz, args.decimation, args.sim_config, args.targets, profile=args.profile)
    replayer = OpenLoopReplayer(sim, reset_velocity=args.reset_velocity)
    if args.floor is not None:
        recordings = load_recordings(args.floor, args.episode, args.mocap_topic, args.mocap_filter_ms)
        source = "nominal recordings " + ", ".join(map(str, args.floor))
    else:
        source = f"the recordings replayed by the simulator with profile {args.profile}'s torque scale"
    total = sum(len(windows_of(r, args.window, args.stride, args.skip_start)) for r in recordings)
    with Progress(total, "floor", "windows") as bar:
        result = run_openloop(recordings, replayer, args.window, args.stride, skip_start_s=args.skip_start,
                              on_window=bar.advance)  # fmt: skip
    return result, source


def run(args: argparse.Namespace) -> int:
    import sys

    from asap_ros.core.errors import ConfigError
    from asap_ros.export.openloop import horizon_steps, load_delta_model, run_openloop, targets_mismatch, windows_of
    from asap_ros.export.openloop_report import text_report, to_dict, write_json, write_png
    from asap_ros.export.progress import Progress

    for flag, wanted in (("--finetune-semantics", args.finetune_semantics), ("--physics-rate-delta", args.physics_rate_delta)):
        if wanted and args.delta is None:
            raise ConfigError(None, flag, "needs a delta model (--delta MODEL)")
    delta = load_delta_model(str(args.delta)) if args.delta is not None else None
    mismatch = None if delta is None else targets_mismatch(delta, args.targets)
    if mismatch is not None:
        print(mismatch, file=sys.stderr)
    recordings, replayer = load_for(args)
    total = sum(len(windows_of(r, args.window, args.stride, args.skip_start)) for r in recordings)
    if total == 0:
        shortest = horizon_steps(args.window, replayer.sim.policy_dt) + 2
        raise ConfigError(args.recordings[0], None, f"no recording is long enough for one {args.window:g} s window "
                          f"({shortest} rows)", [len(r) for r in recordings])  # fmt: skip
    with Progress(total, "openloop", "windows") as bar:
        result = run_openloop(recordings, replayer, args.window, args.stride, delta, args.finetune_semantics,
                              delta_path=None if args.delta is None else str(args.delta),
                              skip_start_s=args.skip_start, on_window=bar.advance,
                              physics_rate=args.physics_rate_delta)  # fmt: skip
    floor, floor_source = replay_floor(args, recordings)
    summary = to_dict(result, floor, floor_source)
    print(text_report(summary))
    if args.json is not None:
        print(f"json: {write_json(summary, args.json)}")
    png = args.png or (args.json.with_suffix(".png") if args.json is not None else None)
    if png is not None:
        print(f"png: {write_png(result, png)}")
    return 0
