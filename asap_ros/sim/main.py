"""``asap_sim``: run the simulated G1 on DDS until Ctrl-C, SIGTERM or ``--duration``.

Prints its counters and timing as JSON at exit (and writes them to ``--stats-json``).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import signal
import sys
import threading
from pathlib import Path

from asap_ros.core.errors import AsapError
from asap_ros.runtime.scheduling import GIL_SWITCH_INTERVAL_S
from asap_ros.sim.config import SimConfig, check_sim_config, load_sim_config

READERS_WAIT_S = 30.0


def build_parser() -> argparse.ArgumentParser:
    parser = argparse.ArgumentParser(prog="asap_sim", description=__doc__.splitlines()[0])
    env_domain = os.environ.get("ROS_DOMAIN_ID")
    parser.add_argument("--domain", type=int, default=int(env_domain) if env_domain else None,
                        required=not env_domain, help="DDS domain id (default: $ROS_DOMAIN_ID)")
    parser.add_argument("--interface", default="lo", help="network interface for unitree DDS (default: lo)")
    parser.add_argument("--config", type=Path, help="simulator settings (default: config/sim.yaml)")
    parser.add_argument("--profile", help="robot profile name (config/profiles/) or YAML path")
    parser.add_argument("--rate", type=float, help="physics rate, Hz (>= 200); LowState at the same rate")
    parser.add_argument("--lowstate-rate", type=float, help="rt/lowstate rate, Hz (must divide the physics rate)")
    parser.add_argument("--mode-machine", type=int, help="mode_machine the robot reports (5 or 6 on real G1s)")
    parser.add_argument("--mocap-rate", type=float, help="motion-capture rate, Hz (0: off)")
    parser.add_argument("--mocap-latency-ms", type=float, help="motion-capture latency, ms")
    parser.add_argument("--mocap-noise", type=float, help="motion-capture position noise std dev, m")
    parser.add_argument("--mocap-dropout", type=float, help="probability a motion-capture frame is lost")
    parser.add_argument("--no-band", action="store_true", help="start without the elastic band")
    parser.add_argument("--realtime-priority", type=int, default=0, metavar="N",
                        help="SCHED_FIFO priority 1..99 of the physics thread (0: normal)")
    parser.add_argument("--lowcmd-priority", type=int, metavar="N",
                        help="SCHED_FIFO priority 1..99 of the rt/lowcmd reader (0: normal; default: "
                             "--realtime-priority); below the control thread's, the board's intake takes "
                             "none of that thread's CPU")
    parser.add_argument("--wait-for-readers", type=int, default=0, metavar="N",
                        help="start the physics once rt/lowstate has N matched readers (at most "
                             f"{READERS_WAIT_S:g} s): a recorder or client started first misses no sample")
    parser.add_argument("--wait-for-mocap-readers", type=int, default=0, metavar="N",
                        help="... and mocap/pose N matched subscriptions")
    parser.add_argument("--duration", type=float, help="stop after this many seconds (default: run until stopped)")
    parser.add_argument("--viewer", action="store_true", help="show the MuJoCo passive viewer (needs a display)")
    parser.add_argument("--stats-json", type=Path, help="write the exit statistics to this file")
    return parser


def config_from_args(args: argparse.Namespace) -> SimConfig:
    """``config/sim.yaml`` (or ``--config``) with the command-line overrides applied."""
    config = load_sim_config(args.config)
    top: dict = {"source": f"{config.source} + command line"}
    if args.profile is not None:
        top["profile"] = args.profile
    if args.rate is not None:
        top["physics_rate_hz"] = top["lowstate_rate_hz"] = args.rate
    if args.lowstate_rate is not None:
        top["lowstate_rate_hz"] = args.lowstate_rate
    if args.mode_machine is not None:
        top["mode_machine"] = args.mode_machine
    mocap = {
        field: value
        for field, value in (
            ("rate_hz", args.mocap_rate),
            ("latency_ms", args.mocap_latency_ms),
            ("position_noise_m", args.mocap_noise),
            ("dropout", args.mocap_dropout),
        )
        if value is not None
    }
    config = dataclasses.replace(
        config,
        mocap=dataclasses.replace(config.mocap, **mocap),
        band=dataclasses.replace(config.band, enabled=config.band.enabled and not args.no_band),
        **top,
    )
    check_sim_config(config)
    return config


def main(argv: list[str] | None = None) -> int:
    parser = build_parser()
    args = parser.parse_args(argv)
    for option, value in (("--wait-for-readers", args.wait_for_readers), ("--wait-for-mocap-readers", args.wait_for_mocap_readers)):
        if value < 0:
            parser.error(f"{option} must be >= 0, got {value}")
    for option, value in (("--realtime-priority", args.realtime_priority), ("--lowcmd-priority", args.lowcmd_priority)):
        if value is not None and not 0 <= value <= 99:
            parser.error(f"{option} must be 0..99, got {value}")
    if args.realtime_priority:
        sys.setswitchinterval(GIL_SWITCH_INTERVAL_S)  # the mocap stream and DDS readers yield to the physics
    try:
        from asap_ros.sim.simulator import Simulator

        config = config_from_args(args)
        sim = Simulator(config, args.domain, args.interface, viewer=args.viewer, realtime_priority=args.realtime_priority,
                        lowcmd_priority=args.lowcmd_priority)
        done = threading.Event()
        for signum in (signal.SIGINT, signal.SIGTERM):
            signal.signal(signum, lambda *_: done.set())
        sim.start(args.wait_for_readers, args.wait_for_mocap_readers, READERS_WAIT_S)
    except AsapError as exc:
        print(f"asap_sim: error: {exc}", file=sys.stderr)
        return 2
    mocap = f"mocap {config.mocap.rate_hz:g} Hz on {config.mocap.topic}" if config.mocap.rate_hz else "no mocap"
    print(
        f"asap_sim: domain {args.domain} on {args.interface}, profile {sim.profile.name}, "
        f"physics {config.physics_rate_hz:g} Hz, rt/lowstate {config.lowstate_rate_hz:g} Hz, "
        f"mode_machine {config.mode_machine}, band {'on' if config.band.enabled else 'off'}, {mocap}",
        file=sys.stderr,
        flush=True,
    )
    done.wait(args.duration)
    sim.stop()
    stats = json.dumps(sim.stats(), indent=2)
    print(stats, flush=True)
    if args.stats_json is not None:
        args.stats_json.write_text(stats + "\n", encoding="utf-8")
    return 0


if __name__ == "__main__":
    sys.exit(main())
