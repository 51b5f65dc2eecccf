"""Starting asap_deploy's control process: a refused setting reaches the node as one reason."""

from __future__ import annotations

import subprocess
import sys

import pytest

from asap_ros.config.node_params import DEPLOY
from asap_ros.core.errors import AsapError
from asap_ros.runtime.loop_process import LoopProcess


def test_a_setting_the_control_process_refuses_is_the_nodes_error(tmp_path):
    values = {**DEPLOY.defaults(), "policies": [str(tmp_path / "missing.yaml")]}
    with pytest.raises(AsapError, match="missing.yaml"):
        LoopProcess({"values": values, "source": "asap_deploy parameters", "cpus": [], "mocap_topic": None})


def test_the_control_process_refuses_to_run_without_its_link():
    done = subprocess.run([sys.executable, "-m", "asap_ros.runtime.control_process"], capture_output=True,
                          text=True, timeout=60)
    assert done.returncode == 2 and "asap_deploy starts it" in done.stderr, done
