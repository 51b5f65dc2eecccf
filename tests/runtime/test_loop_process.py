"""Starting asap_deploy's control process: a refused setting reaches the node as one reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from asap_ros.config.node_params import DEPLOY
from asap_ros.core.errors import AsapError
from asap_ros.core.state_machine import Stand
from asap_ros.runtime.control_process import too_late
from asap_ros.runtime.loop_process import LoopProcess


def test_a_setting_the_control_process_refuses_is_the_nodes_error(tmp_path):
    values = {**DEPLOY.defaults(), "policies": [str(tmp_path / "missing.yaml")]}
    with pytest.raises(AsapError, match="missing.yaml"):
        LoopProcess({"values": values, "source": "asap_deploy parameters", "cpus": [], "mocap_topic": None})


def test_the_control_process_refuses_to_run_without_its_link():
    done = subprocess.run([sys.executable, "-m", "asap_ros.runtime.control_process"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "asap_deploy starts it" in done.stderr, done


def test_a_request_past_its_deadline_is_not_applied():
    """The node reports a request refused once its reply timeout passes; the control process must
    then not apply it (it would stand the robot up after the operator was told no)."""
    assert too_late(("request", 1, Stand(), 2_000), 1_999) is None
    late = too_late(("request", 1, Stand(), 2_000), 5_000_000)
    assert late is not None and "Stand not applied" in late and "past its deadline" in late
    assert too_late(("request", 1, Stand()), 10**18) is None  # no deadline: an older node's message
