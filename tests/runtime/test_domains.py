"""DDS domain ids: this process's own and the ones beside it."""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from asap_ros.runtime.domains import DOMAINS, domain_beside, process_domain


def test_a_process_domain_is_one_of_the_first_ninety_and_loads_no_dds():
    assert process_domain() == 1 + os.getpid() % DOMAINS and 1 <= process_domain() <= 90
    probe = "import sys, asap_ros.runtime.domains; print(sorted(m for m in sys.modules if 'dds' in m))"
    loaded = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True).stdout
    assert loaded.strip() == "[]"  # tests/conftest.py takes its domain from it without DDS


@pytest.mark.parametrize("domain", [1, 45, 90])
def test_a_domain_beside_is_another_in_range_wrapping_around(domain):
    others = {domain_beside(domain, offset) for offset in range(1, DOMAINS)}
    assert others == set(range(1, DOMAINS + 1)) - {domain}
    assert domain_beside(90, 1) == 1 and domain_beside(1, -1) == 90
    assert domain_beside(domain, 23) == 1 + (domain + 22) % DOMAINS  # the e2e modules' offsets as before


@pytest.mark.parametrize("offset", [0, 90, -180])
def test_an_offset_that_comes_back_to_the_domain_is_refused(offset):
    with pytest.raises(ValueError, match=f"offset {offset} is a multiple of 90"):
        domain_beside(7, offset)
