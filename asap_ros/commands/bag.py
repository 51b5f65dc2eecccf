"""``asap-ros bag info BAG [--json]`` and ``asap-ros bag repair BAG [--out OUT]``."""

from __future__ import annotations

import argparse


def add_arguments(parser: argparse.ArgumentParser) -> None:
    sub = parser.add_subparsers(dest="bag_command", required=True, metavar="ACTION")
    info = sub.add_parser("info", help="topics, counts, rates, gaps, episodes, sync quality",
                          description="Summarise a session bag: topics, counts, rates, largest gaps, "
                                      "episodes and sync quality (policy step -> LowState/mocap age).")
    info.add_argument("bag", help="bag directory (with metadata.yaml)")
    info.add_argument("--json", action="store_true", help="print JSON instead of text")
    repair = sub.add_parser("repair", help="recover a bag whose recorder died before closing it",
                            description="Rebuild metadata.yaml and the MCAP summaries of a bag whose writer "
                                        "died. Without --out the bag is repaired in place, after a verified "
                                        "copy of the original is kept at BAG.orig; the original is never "
                                        "changed when the repair fails.")
    repair.add_argument("bag", help="bag directory")
    repair.add_argument("--out", help="write the repaired bag here (a new path) and leave BAG as it is")


def run(args: argparse.Namespace) -> int:
    if args.bag_command == "info":
        from asap_ros.recording.info import bag_info

        info = bag_info(args.bag)
        print(info.to_json() if args.json else info.to_text())
        return 0
    from asap_ros.recording.repair import repair_bag

    print(repair_bag(args.bag, args.out).describe())
    return 0
