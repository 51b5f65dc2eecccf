"""`python -m asap_ros.commands.check_policy` in a fresh process."""

from __future__ import annotations

import subprocess
import sys


def test_runs_as_a_module():
    done = subprocess.run(
        [sys.executable, "-m", "asap_ros.cli", "check-policy", "kick_level1"], capture_output=True, text=True, timeout=60
    )
    assert done.returncode == 0, done.stderr
    assert "(kick_level1)" in done.stdout
