"""Asset manifest, verification, lookup errors, and fetching from a real local HTTP server."""

from __future__ import annotations

import functools
import http.server
import re
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

from asap_ros.cli import main as cli_main
from asap_ros.config import assets as asap_assets
from asap_ros.core.errors import AssetError

CORRUPTED = "policies/mimic/CR7_level1/model_191500.onnx"
ABSENT_UPSTREAM = "robots/g1/meshes/head_link.STL"


def test_manifest_matches_source_md(assets: Path) -> None:
    source_md = (assets / "SOURCE.md").read_text()
    listed = {path: sha for sha, path in re.findall(r"^([0-9a-f]{64})  \./(\S+)$", source_md, re.M)}
    manifest = {item.path: item.sha256 for item in asap_assets.MANIFEST}
    assert len(listed) == 12
    assert {path: manifest.get(path) for path in listed} == listed


def test_manifest_covers_every_published_file(assets: Path) -> None:
    on_disk = {p.relative_to(assets).as_posix() for p in assets.rglob("*") if p.is_file()}
    assert on_disk - {item.path for item in asap_assets.MANIFEST} == {"SOURCE.md"}
    assert assets.joinpath("robots/g1/meshes").is_dir()
    upstream = {item.path: item.upstream for item in asap_assets.MANIFEST}
    assert upstream["policies/dec_loco/model_6600.onnx"].startswith("sim2real/models/dec_loco/2025")
    assert upstream["robots/g1/meshes/pelvis.STL"] == "humanoidverse/data/robots/g1/meshes/pelvis.STL"
    assert upstream["LICENSE"] == "LICENSE"


def test_workplace_copy_verifies(assets: Path) -> None:
    report = asap_assets.verify(assets)
    assert report.ok, report.problems()
    assert report.checked == 49


def _linked_copy(src: Path, dest: Path) -> None:
    """The published files under ``dest`` as symlinks (no 25 MB copy)."""
    for item in asap_assets.MANIFEST:
        (dest / item.path).parent.mkdir(parents=True, exist_ok=True)
        (dest / item.path).symlink_to(src / item.path)


def test_verify_names_missing_and_mismatched_files(assets: Path, tmp_path: Path) -> None:
    _linked_copy(assets, tmp_path)
    (tmp_path / "motions" / "0-motions_raw_tairantestbed_smpl_video_APT_level1_amass.pkl").unlink()
    (tmp_path / "config/g1_29dof_hist.yaml").unlink()
    (tmp_path / "config/g1_29dof_hist.yaml").write_text("tampered: true\n")

    report = asap_assets.verify(tmp_path)

    assert not report.ok
    assert report.missing == ["motions/0-motions_raw_tairantestbed_smpl_video_APT_level1_amass.pkl"]
    assert [m.path for m in report.mismatched] == ["config/g1_29dof_hist.yaml"]
    assert report.mismatched[0].expected.startswith("152d4674")
    assert any("g1_29dof_hist.yaml" in line and "152d4674" in line for line in report.problems())


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, format: str, *args: object) -> None:
        pass


@pytest.fixture
def upstream(assets: Path, tmp_path: Path) -> Iterator[tuple[str, Path]]:
    """A real HTTP server on 127.0.0.1 serving a folder laid out like the ASAP repository at
    the pinned commit, with one corrupted file and one file absent. Yields (base URL, folder)."""
    served = tmp_path / "served"
    commit_dir = served / "LeCAR-Lab" / "ASAP" / asap_assets.UPSTREAM_COMMIT
    for item in asap_assets.MANIFEST:
        target = commit_dir / item.upstream
        target.parent.mkdir(parents=True, exist_ok=True)
        if item.path == CORRUPTED:
            data = bytearray((assets / item.path).read_bytes())
            data[len(data) // 2] ^= 0xFF
            target.write_bytes(bytes(data))
        elif item.path != ABSENT_UPSTREAM:
            target.symlink_to(assets / item.path)
    handler = functools.partial(_QuietHandler, directory=str(served))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    try:
        yield f"http://127.0.0.1:{server.server_port}/LeCAR-Lab/ASAP/{asap_assets.UPSTREAM_COMMIT}", commit_dir
    finally:
        server.shutdown()
        server.server_close()
        thread.join()


def _repair(commit_dir: Path, source: Path) -> None:
    """Make the served repository whole again."""
    for relative in (CORRUPTED, ABSENT_UPSTREAM):
        item = next(i for i in asap_assets.MANIFEST if i.path == relative)
        target = commit_dir / item.upstream
        target.unlink(missing_ok=True)
        target.symlink_to(source / relative)


def test_fetch_rejects_corrupted_download_and_installs_nothing_for_it(
    upstream: tuple[str, Path], assets: Path, tmp_path: Path
) -> None:
    base_url, commit_dir = upstream
    dest = tmp_path / "cache"

    with pytest.raises(AssetError) as failure:
        asap_assets.fetch(dest, base_url)

    message = str(failure.value)
    assert "2 of 49" in message
    assert CORRUPTED in message and "sha256 mismatch" in message
    assert ABSENT_UPSTREAM in message and "404" in message
    assert not (dest / CORRUPTED).exists(), "a corrupted download must not be installed"
    assert not (dest / asap_assets.MARKER).exists(), "an incomplete folder must not look like an asset root"
    assert not list(dest.rglob("*.part")), "temporary downloads must be cleaned up"
    report = asap_assets.verify(dest)
    assert sorted(report.missing) == sorted([CORRUPTED, ABSENT_UPSTREAM])
    assert report.mismatched == []
    with pytest.raises(AssetError):
        asap_assets.asset_root(dest)

    _repair(commit_dir, assets)
    seen: list[tuple[str, str]] = []
    fetched = asap_assets.fetch(dest, base_url, progress=lambda item, status: seen.append((item.path, status)))

    assert sorted(fetched.downloaded) == sorted([CORRUPTED, ABSENT_UPSTREAM])
    assert len(fetched.already_valid) == 47
    assert (CORRUPTED, "downloaded") in seen and len(seen) == 49
    assert asap_assets.asset_root(dest) == dest.resolve()
    assert asap_assets.verify(dest).ok
    assert "91df82c9d0a1f1439dd0bc8e063eef675c23d596" in (dest / asap_assets.MARKER).read_text()


def test_fetch_never_replaces_a_file_with_a_bad_download(
    upstream: tuple[str, Path], tmp_path: Path
) -> None:
    base_url, _ = upstream
    dest = tmp_path / "cache"
    local = dest / CORRUPTED
    local.parent.mkdir(parents=True)
    local.write_bytes(b"previous content")

    with pytest.raises(AssetError):
        asap_assets.fetch(dest, base_url)

    assert local.read_bytes() == b"previous content"


def test_cli_fetch_and_verify(upstream: tuple[str, Path], assets: Path, tmp_path: Path, capsys) -> None:
    base_url, commit_dir = upstream
    dest = tmp_path / "cache"

    assert cli_main(["assets", "fetch", "--dest", str(dest), "--base-url", base_url]) == 2
    out, err = capsys.readouterr()
    assert f"rejected  {CORRUPTED}" in out
    assert "asap-ros assets: error:" in err and CORRUPTED in err

    assert cli_main(["assets", "verify", "--dir", str(dest)]) == 1
    out, _ = capsys.readouterr()
    assert f"missing: {dest / CORRUPTED}" in out and "2 of 49 files bad" in out

    _repair(commit_dir, assets)
    assert cli_main(["assets", "fetch", "--dest", str(dest), "--base-url", base_url]) == 0
    out, _ = capsys.readouterr()
    assert "ok: 2 downloaded, 47 already valid" in out
    assert cli_main(["assets", "verify", "--dir", str(dest)]) == 0
    assert "ok: 49 files match" in capsys.readouterr().out
    assert cli_main(["assets", "where", "--dir", str(dest)]) == 0
    out, _ = capsys.readouterr()
    assert out.splitlines()[0] == str(dest.resolve())
    assert f"* assets_dir config key: {dest}" in out


def test_explicit_or_env_location_must_exist(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    with pytest.raises(AssetError, match=r"not found at .*nowhere \(from assets_dir config key\)"):
        asap_assets.asset_root(tmp_path / "nowhere")
    monkeypatch.setenv(asap_assets.ENV_VAR, str(tmp_path / "empty"))
    (tmp_path / "empty").mkdir()
    with pytest.raises(AssetError, match=r"empty \(from \$ASAP_ASSETS\): no SOURCE.md there"):
        asap_assets.asset_root()


def test_default_url_names_the_full_commit_that_source_md_records(assets: Path) -> None:
    commit = asap_assets.UPSTREAM_COMMIT
    assert len(commit) == 40 and all(c in "0123456789abcdef" for c in commit)
    assert asap_assets.DEFAULT_BASE_URL == f"https://raw.githubusercontent.com/LeCAR-Lab/ASAP/{commit}"
    assert commit in (assets / asap_assets.MARKER).read_text()
