"""The participant lease the deploy node reads from ``CYCLONEDDS_URI``, and the real Cyclone
reading the same configuration."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from asap_ros.core.errors import ConfigError
from asap_ros.core.lease import DDS_LEASE_NS
from asap_ros.runtime.dds_lease import configured_lease_ns

TWO_S = "<CycloneDDS><Domain><Discovery><LeaseDuration>2 s</LeaseDuration></Discovery></Domain></CycloneDDS>"


def test_without_a_setting_the_lease_is_cyclones_default() -> None:
    assert configured_lease_ns("") == DDS_LEASE_NS
    assert configured_lease_ns("<CycloneDDS><Domain><General/></Domain></CycloneDDS>") == DDS_LEASE_NS


def test_inline_files_and_units(tmp_path) -> None:
    assert configured_lease_ns(TWO_S) == 2_000_000_000
    path = tmp_path / "cyclone.xml"
    path.write_text(TWO_S.replace("2 s", "500ms"))
    assert configured_lease_ns(f"file://{path}") == configured_lease_ns(str(path)) == 500_000_000
    assert configured_lease_ns(f"{TWO_S},file://{path}") == 500_000_000  # the last one that sets it


@pytest.mark.parametrize(("uri", "problem"), [
    (TWO_S.replace("2 s", "2 parsecs"), "expected a number and a unit"),
    ("<CycloneDDS><Domain>", "not XML"),
    ("file:///nonexistent/cyclone.xml", "cannot read /nonexistent/cyclone.xml"),
])
def test_a_bad_setting_names_the_variable_and_the_value(uri: str, problem: str) -> None:
    with pytest.raises(ConfigError, match=problem) as error:
        configured_lease_ns(uri)
    assert error.value.file == "$CYCLONEDDS_URI"


def _cyclone_starts(uri: str) -> bool:
    code = "from cyclonedds.domain import DomainParticipant; DomainParticipant(0)"
    done = subprocess.run([sys.executable, "-c", code], env={**os.environ, "CYCLONEDDS_URI": uri},
                          capture_output=True, text=True, timeout=60)
    return done.returncode == 0


def test_cyclone_reads_the_same_element() -> None:
    """The element read here is Cyclone's own: it starts with the 2 s lease and refuses the bad unit
    this module refuses."""
    assert _cyclone_starts(TWO_S)
    assert not _cyclone_starts(TWO_S.replace("2 s", "2 parsecs"))
