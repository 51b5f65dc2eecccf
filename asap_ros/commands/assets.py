"""``asap-ros assets where|verify|fetch``: find, check and download ASAP's published assets."""

from __future__ import annotations

import argparse

from asap_ros.config import assets


def add_arguments(parser: argparse.ArgumentParser) -> None:
    actions = parser.add_subparsers(dest="action", required=True, metavar="ACTION")
    where = actions.add_parser("where", help="print the asset folder in use and the search order")
    where.add_argument("--dir", help="explicit asset folder (as the assets_dir config key)")
    check = actions.add_parser("verify", help="check every manifest file's SHA-256")
    check.add_argument("--dir", help="folder to check (default: the asset folder in use)")
    get = actions.add_parser(
        "fetch", help=f"download the assets from {assets.UPSTREAM_REPO}@{assets.UPSTREAM_COMMIT}"
    )
    get.add_argument("--dest", help=f"target folder (default: {assets.user_cache_dir()})")
    get.add_argument(
        "--base-url",
        default=assets.DEFAULT_BASE_URL,
        help="URL of the repository's raw files at the pinned commit (default: %(default)s)",
    )


def _where(args: argparse.Namespace) -> int:
    root = assets.asset_root(args.dir)
    print(root)
    print("search order (* = in use):")
    for origin, path in assets.candidate_dirs(args.dir):
        in_use = "*" if path.resolve() == root else " "
        print(f"  {in_use} {origin}: {path}")
    return 0


def _verify(args: argparse.Namespace) -> int:
    report = assets.verify(args.dir or assets.asset_root())
    for line in report.problems():
        print(line)
    if not report.ok:
        print(f"{len(report.problems())} of {report.checked} files bad in {report.root}")
        return 1
    print(f"ok: {report.checked} files match their SHA-256 in {report.root}")
    return 0


def _show_progress(item: assets.AssetFile, status: str) -> None:
    if status in ("kept", "downloaded"):
        print(f"{status:>10}  {item.path}", flush=True)
    else:
        print(f"  rejected  {item.path}: {status}", flush=True)


def _fetch(args: argparse.Namespace) -> int:
    report = assets.fetch(args.dest, args.base_url, progress=_show_progress)
    print(
        f"ok: {len(report.downloaded)} downloaded, {len(report.already_valid)} already valid, "
        f"in {report.dest}"
    )
    return 0


def run(args: argparse.Namespace) -> int:
    return {"where": _where, "verify": _verify, "fetch": _fetch}[args.action](args)
