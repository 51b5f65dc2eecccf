"""``asap-ros doctor``: preflight before ``ros2 launch``; one line per check, exit 0 only when none fails.

Reads ``rt/lowstate`` and ``rt/lowcmd`` (never writes), the ROS graph, the network, the assets,
the policy specs and the clock; see :mod:`asap_ros.doctor`.
"""

from __future__ import annotations

import argparse
import sys

from asap_ros.doctor.settings import CHECK_GROUPS, EXPECTED_RMW, LOWSTATE_RATE_HZ, ROBOT_SUBNET


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("--interface", help="NIC wired to the robot (default: network_interface of config/deploy.yaml)")
    parser.add_argument("--domain", type=int, help="unitree DDS domain (default: dds_domain of config/deploy.yaml)")
    parser.add_argument("--subnet", default=ROBOT_SUBNET, help="the robot's subnet (default: %(default)s)")
    parser.add_argument("--duration", type=float, default=3.0, help="seconds to listen on the bus (default: %(default)s)")
    parser.add_argument("--lowstate-rate", type=float, default=LOWSTATE_RATE_HZ,
                        help="expected rt/lowstate rate, Hz (default: %(default)s, the G1's)")
    parser.add_argument("--mode-machine", type=int, help="mode_machine the robot must report (default: any)")
    parser.add_argument("--rmw", default=EXPECTED_RMW, help="RMW_IMPLEMENTATION the shells must use (default: %(default)s)")
    parser.add_argument("--controller-config", help="controller YAML with the safety limits (default: deploy's)")
    parser.add_argument("--robot", help="robot model YAML (default: deploy's, config/g1_29dof.yaml)")
    parser.add_argument("--policy", action="append", dest="policies", metavar="SPEC",
                        help="policy spec to check (repeatable; default: deploy's policies and the hold policy)")
    parser.add_argument("--assets-dir", help="ASAP asset folder (default: the usual search)")
    parser.add_argument("--checks", default=",".join(CHECK_GROUPS),
                        help="comma-separated subset of: %(default)s")
    parser.add_argument("--json", action="store_true", help="print the results as JSON")


def run(args: argparse.Namespace) -> int:
    from asap_ros.doctor.report import exit_status, format_json, format_text
    from asap_ros.doctor.run import run_doctor
    from asap_ros.doctor.settings import load_settings

    try:
        settings = load_settings(
            interface=args.interface, domain=args.domain, subnet=args.subnet, duration_s=args.duration,
            lowstate_rate_hz=args.lowstate_rate, mode_machine=args.mode_machine, rmw=args.rmw,
            controller_config=args.controller_config, robot_config=args.robot, policies=args.policies,
            assets_dir=args.assets_dir, groups=tuple(g.strip() for g in args.checks.split(",") if g.strip()),
        )  # fmt: skip
    except ValueError as exc:
        print(f"asap-ros doctor: error: {exc}", file=sys.stderr)
        return 2
    checks = run_doctor(settings, progress=lambda line: print(line, file=sys.stderr, flush=True))
    print(format_json(checks, settings.describe()) if args.json else format_text(checks), flush=True)
    return exit_status(checks)
