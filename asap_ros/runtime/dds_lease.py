"""The Cyclone DDS participant lease this process runs with, from ``CYCLONEDDS_URI``.

A process stalled longer than its participant lease has been forgotten by its peers, which must
discover it again before its beats and grants flow (:data:`asap_ros.core.lease.DDS_LEASE_NS`,
Cyclone's default of 10 s). ``CYCLONEDDS_URI`` may set another
(``CycloneDDS/Domain/Discovery/LeaseDuration``): inline XML, a ``file://`` URI or a path, several
separated by commas, the last one that sets it winning, as Cyclone reads them.
"""

from __future__ import annotations

import os
import re
import xml.etree.ElementTree as ElementTree
from pathlib import Path

from asap_ros.core.errors import ConfigError
from asap_ros.core.lease import DDS_LEASE_NS

__all__ = ["configured_lease_ns"]

_UNITS_NS = {"ns": 1, "us": 1_000, "ms": 1_000_000, "s": 1_000_000_000, "min": 60_000_000_000,
             "hr": 3_600_000_000_000, "day": 86_400_000_000_000}
_DURATION = re.compile(r"^\s*(?P<value>\d+(\.\d*)?|\.\d+)\s*(?P<unit>ns|us|ms|s|min|hr|day)\s*$")


_PART = re.compile(r"\s*(?P<xml><(?P<root>[\w:]+)[^>]*>.*?</(?P=root)\s*>|<[\w:]+[^>]*/>)\s*|(?P<file>[^,]+)", re.S)


def _parts(uri: str) -> list[str]:
    """The XML documents of ``uri``: inline ones as they are, files read (comma-separated)."""
    texts = []
    for match in _PART.finditer(uri):
        if match["xml"]:
            texts.append(match["xml"])
            continue
        part = (match["file"] or "").strip()
        if not part:
            continue
        if part.startswith("<"):  # inline, but not well formed: the parse below says so
            texts.append(part)
            continue
        path = Path(part.removeprefix("file://"))
        try:
            texts.append(path.read_text())
        except OSError as exc:
            raise ConfigError("$CYCLONEDDS_URI", None, f"cannot read {path}: {exc.strerror}", part) from exc
    return texts


def _duration_ns(text: str, source: str) -> int:
    match = _DURATION.match(text)
    if match is None:
        raise ConfigError(source, "Discovery/LeaseDuration", "expected a number and a unit (ns, us, ms, s, min, hr, "
                          "day)", text)
    return int(float(match["value"]) * _UNITS_NS[match["unit"]])


def configured_lease_ns(uri: str | None = None) -> int:
    """The participant lease (ns) that ``uri`` (default: ``$CYCLONEDDS_URI``) sets, else Cyclone's
    default; ConfigError naming the variable, the file or the value when it cannot be read."""
    uri = os.environ.get("CYCLONEDDS_URI", "") if uri is None else uri
    lease = DDS_LEASE_NS
    for text in _parts(uri) if uri.strip() else []:
        try:
            root = ElementTree.fromstring(text)
        except ElementTree.ParseError as exc:
            raise ConfigError("$CYCLONEDDS_URI", None, f"not XML: {exc}", text[:80]) from exc
        for element in root.iter():
            if element.tag.rsplit("}", 1)[-1] == "LeaseDuration" and element.text:
                lease = _duration_ns(element.text, "$CYCLONEDDS_URI")
    return lease
