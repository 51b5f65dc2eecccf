"""The e2e harness's children (``asap_sim``, ``asap_deploy``, ``asap_supervisor``) die with it,
however it dies: a harness killed with SIGKILL leaves nothing running on its DDS domain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time

from asap_ros.testing.ros_system import ROOT

HARNESS = """
import json, sys, time
from pathlib import Path
from asap_ros.testing.ros_system import System
system = System(int(sys.argv[1]), Path(sys.argv[2]))
system.start()
print(json.dumps({"asap_sim": system.sim.pid, "asap_deploy": system.deploy.pid,
                  "asap_supervisor": system.supervisor.pid}), flush=True)
time.sleep(600)
"""


def alive(pid: int) -> bool:
    """A process ``pid`` exists and is not a zombie."""
    try:
        with open(f"/proc/{pid}/stat") as stat:
            return stat.read().rsplit(")", 1)[1].split()[0] != "Z"
    except FileNotFoundError:
        return False


def test_killing_the_harness_kills_the_simulator_and_both_nodes(tmp_path):
    domain = 1 + (os.getpid() + 100) % 200  # not this test process's own domain: the harness is another process
    children: dict[str, int] = {}
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(domain), str(tmp_path)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=(tmp_path / "harness.log").open("w"), text=True)
    try:
        line = harness.stdout.readline()
        assert line, f"the harness did not start its system:\n{(tmp_path / 'harness.log').read_text()[-3000:]}"
        children = json.loads(line)
        assert all(alive(pid) for pid in children.values()), children
        os.kill(harness.pid, signal.SIGKILL)
        harness.wait(10)
        deadline = time.monotonic() + 10.0
        while any(alive(pid) for pid in children.values()) and time.monotonic() < deadline:
            time.sleep(0.05)
        assert not [name for name, pid in children.items() if alive(pid)], "still running after the harness died"
    finally:
        if harness.poll() is None:
            harness.kill()
            harness.wait()
        for pid in children.values():  # what a failure left behind
            if alive(pid):
                os.kill(pid, signal.SIGKILL)
