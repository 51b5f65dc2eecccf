"""Locating, verifying and fetching ASAP's published assets (actors, clips, deploy config, G1 model).

Search order: an explicit directory (the ``assets_dir`` config key), the ``ASAP_ASSETS``
environment variable, the workplace copy ``../shared/asap-assets`` beside the source
checkout, then the user cache (``$XDG_CACHE_HOME/asap_ros/assets``).

:data:`MANIFEST` lists every file with its path in the ASAP repository at
:data:`UPSTREAM_COMMIT` and its SHA-256. :func:`fetch` downloads them into a folder laid out
like ``../shared/asap-assets``; a download whose checksum differs is never installed.
"""

from __future__ import annotations

import hashlib
import http.client
import os
import tempfile
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path, PurePosixPath

from asap_ros.config.paths import share_dir
from asap_ros.core.errors import AssetError

ENV_VAR = "ASAP_ASSETS"
MARKER = "SOURCE.md"
"""Present in a complete asset folder; :func:`fetch` writes it last."""

UPSTREAM_REPO = "LeCAR-Lab/ASAP"
UPSTREAM_COMMIT = "91df82c9d0a1f1439dd0bc8e063eef675c23d596"
"""The commit the assets come from (91df82c, 2025-09-09), in full as the workplace copy's
``SOURCE.md`` records it: a raw URL with it never becomes ambiguous."""
DEFAULT_BASE_URL = f"https://raw.githubusercontent.com/{UPSTREAM_REPO}/{UPSTREAM_COMMIT}"

_LOCO_RUN = (
    "20250109_231507-noDR_rand_history_loco_stand_height_noise-decoupled_locomotion-g1_29dof"
)
UPSTREAM_DIRS: dict[str, str] = {
    ".": ".",
    "config": "sim2real/config",
    "policies/dec_loco": f"sim2real/models/dec_loco/{_LOCO_RUN}",
    "policies/mimic/APT_level1": "sim2real/models/mimic/APT_level1",
    "policies/mimic/CR7_level1": "sim2real/models/mimic/CR7_level1",
    "policies/mimic/kick_level1": "sim2real/models/mimic/kick_level1",
    "motions": "humanoidverse/data/motions/g1_29dof_anneal_23dof/TairanTestbed/singles",
    "robots/g1": "humanoidverse/data/robots/g1",
    "robots/g1/meshes": "humanoidverse/data/robots/g1/meshes",
}
"""Local folder -> folder in the ASAP repository (see ``SOURCE.md``)."""

# `sha256sum -c` format. The first 12 are copied from SOURCE.md; LICENSE and the meshes were
# hashed from the workplace copy.
_SHA256SUMS = """\
152d4674f78eb829df4bce10a679ef87cdd7e953031751e358ee4756679c7845  config/g1_29dof_hist.yaml
da9777c049737ae5bd975d35c9d7ee9813f48160f164b5c80f11889222666ee1  motions/0-TairanTestbed_TairanTestbed_CR7_video_CR7_level1_filter_amass.pkl
e59b86210ef017f43e3ac746130feb2c375cf4dfe580fe0249f83ddb95c77bb1  motions/0-motions_raw_tairantestbed_smpl_video_APT_level1_amass.pkl
09af6f06c90243c7af24d0c2365f68bb0a0745a6031bd1e53344aa023bfd58df  motions/0-motions_raw_tairantestbed_smpl_video_kick_level1_filter_amass.pkl
188aea28fac59adc561b6c5effabc8add608aab3955368755e322831de9af652  policies/dec_loco/model_6600.onnx
e72e26a914f10b42e08501342553d44a8675bae7c39ced493eabd1180a851bbe  policies/mimic/APT_level1/model_176500.onnx
100b853d5f66a0bf53c03d2bea1064430b52723d2a1bdd5ba19748c60497a67e  policies/mimic/CR7_level1/model_191500.onnx
a393eb8ac0bc70276bd09d33620e4cdf58a2c164f84e4e40811ccd8a0c9668c1  policies/mimic/kick_level1/model_168000.onnx
1af96d4f1b3e2d608f4b73df9eb8ef765f6139f64364971e599649c6f059af1d  robots/g1/g1_29dof_anneal_23dof.xml
87ec95217784c886469027294b23046070abdf139b2e59ae3b691f3b8d0b2309  robots/g1/g1_29dof_old.xml
88d75960add89dcc523f417203bb48777f05e8f2f87d56ba5f3fdee843b6ebde  robots/g1/scene_29dof.xml
548972bfbcb33c4b6f999ee2a1e9df5ec24321ae95a2aa09fc666bde4add6369  robots/g1/g1_29dof_anneal_23dof.urdf
827e9ada34219d983ff857374dd368c9cd46d22ecceead42036bc2be14c3eae1  LICENSE
005fb67fbd3eff94aa8bf4a6e83238174e9f91b6721f7111594322f223724411  robots/g1/meshes/head_link.STL
d49e3abc6f5b12e532062cd575b87b5ef40cd2a3fc18f54a1ca5bba4f773d51d  robots/g1/meshes/left_ankle_pitch_link.STL
c4092af943141d4d9f74232f3cfa345afc6565f46a077793b8ae0e68b39dc33f  robots/g1/meshes/left_ankle_roll_link.STL
fa752198accd104d5c4c3a01382e45165b944fbbc5acce085059223324e5bed3  robots/g1/meshes/left_elbow_link.STL
4725168105ee768ee31638ef22b53f6be2d7641bfd7cfefe803488d884776fa4  robots/g1/meshes/left_hip_pitch_link.STL
91f25922ee8a7c3152790051bebad17b4d9cd243569c38fe340285ff93a97acf  robots/g1/meshes/left_hip_roll_link.STL
a16d88aa6ddac8083aa7ad55ed317bea44b1fa003d314fba88965b7ed0f3b55b  robots/g1/meshes/left_hip_yaw_link.STL
8d92b9e3d3a636761150bb8025e32514c4602b91c7028d523ee42b3e632de477  robots/g1/meshes/left_knee_link.STL
cff2221a690fa69303f61fce68f2d155c1517b52efb6ca9262dd56e0bc6e70fe  robots/g1/meshes/left_rubber_hand.STL
f0d1cfd02fcf0d42f95e678eeca33da3afbcc366ffba5c052847773ec4f31d52  robots/g1/meshes/left_shoulder_pitch_link.STL
fb9df21687773522598dc384f1a2945c7519f11cbc8bd372a49170316d6eee88  robots/g1/meshes/left_shoulder_roll_link.STL
1aa97e9748e924336567992181f78c7cd0652fd52a4afcca3df6b2ef6f9e712e  robots/g1/meshes/left_shoulder_yaw_link.STL
b251d8e05047f695d0f536cd78c11973cfa4e78d08cfe82759336cc3471de3a9  robots/g1/meshes/left_wrist_pitch_link.STL
edc387c9a0ba8c2237e9b296d32531426fabeb6f53e58df45c76106bca74148c  robots/g1/meshes/left_wrist_roll_link.STL
83f8fb3a726bf9613d65dd14f0f447cb918c3c95b3938042a0c9c09749267d3b  robots/g1/meshes/left_wrist_yaw_link.STL
8571a0a19bc4916fa55f91449f51d5fdefd751000054865a842449429d5f155b  robots/g1/meshes/logo_link.STL
5ba6bbc888e630550140d3c26763f10206da8c8bd30ed886b8ede41c61f57a31  robots/g1/meshes/pelvis.STL
5cc5c2c7a312329e3feeb2b03d3fc09fc29705bd01864f6767e51be959662420  robots/g1/meshes/pelvis_contour_link.STL
15be426539ec1be70246d4d82a168806db64a41301af8b35c197a33348c787a9  robots/g1/meshes/right_ankle_pitch_link.STL
4b66222ea56653e627711b56d0a8949b4920da5df091da0ceb343f54e884e3a5  robots/g1/meshes/right_ankle_roll_link.STL
1be925d7aa268bb8fddf5362b9173066890c7d32092c05638608126e59d1e2ab  robots/g1/meshes/right_elbow_link.STL
e4f3c99d7f4a7d34eadbef9461fc66e3486cb5442db1ec50c86317d459f1a9c6  robots/g1/meshes/right_hip_pitch_link.STL
4c254ef66a356f492947f360dd931965477b631e3fcc841f91ccc46d945d54f6  robots/g1/meshes/right_hip_roll_link.STL
e479c2936ca2057e9eb2f7dff6c189b7419d7b8484dea0b298cbb36a2a6aa668  robots/g1/meshes/right_hip_yaw_link.STL
63c4008449c9bbe701a6e2b557b7a252e90cf3a5abcf54cee46862b9a69f8ec8  robots/g1/meshes/right_knee_link.STL
99533b778bca6246144fa511bb9d4e555e075c641f2a0251e04372869cd99d67  robots/g1/meshes/right_rubber_hand.STL
24cdb387e0128dfe602770a81c56cdce3a0181d34d039a11d1aaf8819b7b8c02  robots/g1/meshes/right_shoulder_pitch_link.STL
962b97c48f9ce9e8399f45dd9522e0865d19aa9fd299406b2d475a8fc4a53e81  robots/g1/meshes/right_shoulder_roll_link.STL
a0b76489271da0c72461a344c9ffb0f0c6e64f019ea5014c1624886c442a2fe5  robots/g1/meshes/right_shoulder_yaw_link.STL
d22f8f3b3127f15a63e5be1ee273cd5075786c3142f1c3d9f76cbf43d2a26477  robots/g1/meshes/right_wrist_pitch_link.STL
a7ee9212ff5b94d6cb7f52bb1bbf3f352194d5b598acff74f4c77d340c5b344f  robots/g1/meshes/right_wrist_roll_link.STL
bc9dece2d12509707e0057ba2e48df8f3d56db0c79410212963a25e8a50f61a6  robots/g1/meshes/right_wrist_yaw_link.STL
e96d023f0368a4e3450b86ca5d4f10227d8141156a373e7da8cb3c93266523e0  robots/g1/meshes/torso_link.STL
34f0aa73f41131230be4d25876c944fdf6c24d62553f199ff8b980c15e8913df  robots/g1/meshes/waist_roll_link.STL
1fae9e1bb609848a1667d32eed8d6083ae443538a306843056a2a660f1b2926a  robots/g1/meshes/waist_support_link.STL
2883f20e03f09b669b5b4ce10677ee6b5191c0934b584d7cbaef2d0662856ffb  robots/g1/meshes/waist_yaw_link.STL
"""

_CHUNK = 1 << 20


@dataclass(frozen=True)
class AssetFile:
    """One published file: where it goes locally, where it is upstream, its checksum."""

    path: str
    """Relative to the asset root, ``/``-separated."""
    upstream: str
    """Path in the ASAP repository at :data:`UPSTREAM_COMMIT`."""
    sha256: str

    def url(self, base_url: str) -> str:
        return f"{base_url.rstrip('/')}/{urllib.parse.quote(self.upstream)}"


def _parse_manifest(sums: str) -> tuple[AssetFile, ...]:
    files = []
    for line in sums.splitlines():
        sha256, path = line.split(maxsplit=1)
        local = PurePosixPath(path)
        upstream = PurePosixPath(UPSTREAM_DIRS[str(local.parent)]) / local.name
        files.append(AssetFile(path=path, upstream=str(upstream), sha256=sha256))
    return tuple(files)


MANIFEST: tuple[AssetFile, ...] = _parse_manifest(_SHA256SUMS)


# --- locating ---------------------------------------------------------------------------


def user_cache_dir() -> Path:
    """Where ``asap-ros assets fetch`` puts the assets by default."""
    base = os.environ.get("XDG_CACHE_HOME") or str(Path.home() / ".cache")
    return Path(base) / "asap_ros" / "assets"


def candidate_dirs(explicit: str | os.PathLike | None = None) -> list[tuple[str, Path]]:
    """Every place searched, in order, with where each came from."""
    found: list[tuple[str, Path]] = []
    if explicit:
        found.append(("assets_dir config key", Path(explicit).expanduser()))
    if os.environ.get(ENV_VAR):
        found.append((f"${ENV_VAR}", Path(os.environ[ENV_VAR]).expanduser()))
    found.append(("workplace copy", share_dir().parent / "shared" / "asap-assets"))
    found.append(("user cache", user_cache_dir()))
    return found


_OPTIONAL_ORIGINS = ("workplace copy", "user cache")


def asset_root(explicit: str | os.PathLike | None = None) -> Path:
    """The first asset directory that exists; an explicit or env location must exist."""
    for origin, path in candidate_dirs(explicit):
        if path.is_dir() and (path / MARKER).is_file():
            return path.resolve()
        if origin not in _OPTIONAL_ORIGINS:
            raise AssetError(f"ASAP assets not found at {path} (from {origin}): no {MARKER} there")
    searched = "; ".join(f"{o}: {p}" for o, p in candidate_dirs(explicit))
    raise AssetError(
        f"ASAP assets not found (searched {searched}). Set {ENV_VAR} to a folder with ASAP's "
        f"policies/, motions/, config/ and robots/, or run `asap-ros assets fetch`."
    )


def asset_path(relative: str | os.PathLike, explicit: str | os.PathLike | None = None) -> Path:
    """Absolute path of one asset file; a missing file is an :class:`AssetError`."""
    path = asset_root(explicit) / relative
    if not path.exists():
        raise AssetError(f"asset {relative} missing from {asset_root(explicit)}")
    return path


# --- verifying --------------------------------------------------------------------------


def file_sha256(path: Path) -> str:
    digest = hashlib.sha256()
    with open(path, "rb") as stream:
        while chunk := stream.read(_CHUNK):
            digest.update(chunk)
    return digest.hexdigest()


@dataclass(frozen=True)
class Mismatch:
    path: str
    expected: str
    actual: str


@dataclass
class VerifyReport:
    """Outcome of :func:`verify`: manifest files that are missing or differ."""

    root: Path
    checked: int
    missing: list[str] = field(default_factory=list)
    mismatched: list[Mismatch] = field(default_factory=list)

    @property
    def ok(self) -> bool:
        return not self.missing and not self.mismatched

    def problems(self) -> list[str]:
        """One line per problem, naming the file."""
        lines = [f"missing: {self.root / path}" for path in self.missing]
        lines += [
            f"sha256 mismatch: {self.root / m.path} (expected {m.expected}, got {m.actual})"
            for m in self.mismatched
        ]
        return lines


def verify(root: str | os.PathLike) -> VerifyReport:
    """Check every :data:`MANIFEST` file under ``root`` against its SHA-256."""
    root = Path(root)
    report = VerifyReport(root=root, checked=len(MANIFEST))
    for item in MANIFEST:
        path = root / item.path
        if not path.is_file():
            report.missing.append(item.path)
            continue
        actual = file_sha256(path)
        if actual != item.sha256:
            report.mismatched.append(Mismatch(item.path, item.sha256, actual))
    return report


# --- fetching ---------------------------------------------------------------------------


@dataclass
class FetchReport:
    """Outcome of a successful :func:`fetch`."""

    dest: Path
    downloaded: list[str] = field(default_factory=list)
    already_valid: list[str] = field(default_factory=list)


def _download_verified(url: str, target: Path, sha256: str, timeout_s: float) -> str | None:
    """Download ``url`` to ``target`` atomically; return why it was rejected, or None."""
    target.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp_name = tempfile.mkstemp(dir=target.parent, prefix=f".{target.name}.", suffix=".part")
    tmp = Path(tmp_name)
    try:
        digest = hashlib.sha256()
        with os.fdopen(fd, "wb") as out, urllib.request.urlopen(url, timeout=timeout_s) as resp:
            while chunk := resp.read(_CHUNK):
                digest.update(chunk)
                out.write(chunk)
            out.flush()
            os.fsync(out.fileno())
        if digest.hexdigest() != sha256:
            return f"sha256 mismatch (expected {sha256}, got {digest.hexdigest()})"
        tmp.chmod(0o644)
        os.replace(tmp, target)
        return None
    except (urllib.error.URLError, http.client.HTTPException, OSError, ValueError) as exc:
        return f"download failed: {exc}"
    finally:
        tmp.unlink(missing_ok=True)


def _source_text(base_url: str) -> str:
    return (
        "# Source of these files\n\n"
        f"Downloaded by `asap-ros assets fetch` from {base_url}, i.e. the public ASAP repository\n"
        f"({UPSTREAM_REPO}) at commit {UPSTREAM_COMMIT}, under its MIT licence (`LICENSE` beside\n"
        "this file). Every file matched its SHA-256 below before it was installed.\n\n"
        "SHA-256:\n```\n"
        + "".join(f"{item.sha256}  ./{item.path}\n" for item in MANIFEST)
        + "```\n"
    )


def _write_atomic(target: Path, text: str) -> None:
    tmp = target.with_name(f".{target.name}.part")
    tmp.write_text(text, encoding="utf-8")
    os.replace(tmp, target)


def fetch(
    dest: str | os.PathLike | None = None,
    base_url: str = DEFAULT_BASE_URL,
    *,
    timeout_s: float = 60.0,
    progress: Callable[[AssetFile, str], None] | None = None,
) -> FetchReport:
    """Download every :data:`MANIFEST` file into ``dest`` (default :func:`user_cache_dir`).

    Files already present with the right checksum are kept. Each download goes to a
    temporary file beside its target and is renamed into place only if its SHA-256 matches.
    ``SOURCE.md`` (the marker :func:`asset_root` looks for) is written last, once every file
    is valid (an existing one is left alone when nothing was downloaded), and removed when any
    file is not. ``progress(item, status)`` is called per file with ``"kept"``, ``"downloaded"``
    or the reason it was rejected. Raises :class:`AssetError` naming every rejected file after
    trying them all.
    """
    root = Path(dest) if dest is not None else user_cache_dir()
    report = FetchReport(dest=root)
    rejected: list[str] = []
    for item in MANIFEST:
        target = root / item.path
        if target.is_file() and file_sha256(target) == item.sha256:
            report.already_valid.append(item.path)
            status = "kept"
        else:
            url = item.url(base_url)
            reason = _download_verified(url, target, item.sha256, timeout_s)
            if reason is None:
                report.downloaded.append(item.path)
                status = "downloaded"
            else:
                rejected.append(f"{item.path} from {url}: {reason}")
                status = reason
        if progress is not None:
            progress(item, status)
    if rejected:
        (root / MARKER).unlink(missing_ok=True)  # the set is incomplete: not an asset root
        raise AssetError(
            f"{len(rejected)} of {len(MANIFEST)} asset files rejected, not installed in {root}: "
            + "; ".join(rejected)
        )
    if report.downloaded or not (root / MARKER).is_file():
        _write_atomic(root / MARKER, _source_text(base_url))
    return report
