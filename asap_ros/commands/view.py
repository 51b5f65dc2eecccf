"""``asap-ros view [BAG]``: the robot in the web browser, live or from a recorded session.

Without BAG: the running robot (or simulator) on the DDS domain and ROS topics given. With
BAG: the session in the bag, with a timeline, episode markers and plots. Read-only either way
(:mod:`asap_ros.view.page`); a process of its own, so the control loop never waits for it.
"""

from __future__ import annotations

import argparse
import os
import signal
import threading
from pathlib import Path

DEFAULT_PORT = 8080
DEFAULT_RATE_HZ = 15.0
DEFAULT_NICE = 10
DEFAULT_POLICIES = ("kick_level1.yaml", "CR7_level1.yaml", "APT_level1.yaml")


def add_arguments(parser: argparse.ArgumentParser) -> None:
    parser.add_argument("bag", nargs="?", type=Path, help="session bag directory; without it: the live robot")
    parser.add_argument("--host", default="127.0.0.1", help="address the page is served on (default %(default)s; "
                        "0.0.0.0 for every interface)")
    parser.add_argument("--port", type=int, default=DEFAULT_PORT, help="HTTP port (default %(default)s)")
    live = parser.add_argument_group("live")
    live.add_argument("--domain", type=int, default=0, help="unitree DDS domain of rt/* (default %(default)s, the G1's)")
    live.add_argument("--interface", default="lo", help="network interface of the robot's network (default %(default)s)")
    live.add_argument("--ros-domain", type=int, help="ROS 2 domain id (default: $ROS_DOMAIN_ID)")
    live.add_argument("--mocap-topic", default="mocap/pose", help="geometry_msgs/PoseStamped root pose (default %(default)s)")
    live.add_argument("--policies", nargs="+", default=list(DEFAULT_POLICIES), metavar="SPEC",
                      help="policy specs whose clips draw the ghost (relative: package policies/)")
    live.add_argument("--rate-hz", type=float, default=DEFAULT_RATE_HZ, help="page updates per second (default %(default)s)")
    parser.add_argument("--controller-config", type=Path,
                        help="controller YAML whose temperature limits colour the motors (default: config/controller.yaml)")
    parser.add_argument("--assets-dir", help="ASAP asset folder (default: the asset search, `asap-ros assets where`)")
    parser.add_argument("--nice", type=int, default=DEFAULT_NICE, help="CPU niceness of this process (default "
                        "%(default)s: on the robot's computer the control stack gets the CPU first)")


def _temperature_scale(path: Path | None):
    from asap_ros.config.controller import load_controller_config
    from asap_ros.view.page import TemperatureScale

    safety = load_controller_config(path).safety
    return TemperatureScale(safety.max_start_temperature_c, safety.max_temperature_c)


def _serve(page) -> threading.Event:
    """Say where the page is; the event is set on SIGINT/SIGTERM."""
    stop = threading.Event()
    print(f"asap-ros view: {page.url}", flush=True)
    for sig in (signal.SIGINT, signal.SIGTERM):
        signal.signal(sig, lambda *_: stop.set())
    return stop


def run(args: argparse.Namespace) -> int:
    """Everything is loaded and checked first (a bad bag, spec or asset is an error naming it);
    then the process lowers its priority and serves the page until SIGINT/SIGTERM."""
    from asap_ros.config.robot_description import load_robot_description
    from asap_ros.core.errors import ConfigError
    from asap_ros.view.page import ViewPage

    if not args.rate_hz > 0:
        raise ConfigError(None, "--rate-hz", "must be positive", args.rate_hz)
    if not 0 <= args.nice <= 19:
        raise ConfigError(None, "--nice", "must be 0..19", args.nice)
    scale = _temperature_scale(args.controller_config)
    description = load_robot_description(assets_dir=args.assets_dir)
    if args.bag is not None:
        from asap_ros.view.replay import ReplayView, load_session

        session = load_session(args.bag, args.assets_dir)
        os.nice(args.nice)
        page = ViewPage(description, scale, args.host, args.port, f"asap-ros view {args.bag.name}")
        try:
            ReplayView(page, session, description.motor_joints)
            _serve(page).wait()
        finally:
            page.close()
        return 0
    from asap_ros.config.policy_spec import resolve_policy_files
    from asap_ros.view.live import LiveFeed, LiveTopics, run_live
    from asap_ros.view.reference import ReferencePoser, clips_of_policies

    poser = ReferencePoser(clips_of_policies(resolve_policy_files(args.policies, "--policies"), args.assets_dir))
    topics = LiveTopics(args.domain, args.interface, args.mocap_topic, ros_domain=args.ros_domain)
    os.nice(args.nice)
    page = ViewPage(description, scale, args.host, args.port, "asap-ros view (live)")
    try:
        feed = LiveFeed(topics, poser)
        try:
            run_live(page, feed, args.rate_hz, _serve(page))
        finally:
            feed.close()
    finally:
        page.close()
    return 0
