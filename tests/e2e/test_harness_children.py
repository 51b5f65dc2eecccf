"""Children die with the process that started them, however it dies: the e2e harness's
(``asap_sim``, ``asap_deploy`` and its control process, ``asap_supervisor``) and ``asap-ros sim``'s (``asap_sim``,
``asap_recorder``). A parent killed with SIGKILL leaves nothing running on its DDS domain."""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

from asap_ros.runtime.domains import domain_beside, process_domain
from asap_ros.testing.ros_system import ROOT
from asap_ros.testing.ros_system import process_alive as alive

HARNESS = """
import json, sys, time
from pathlib import Path
from asap_ros.testing.ros_system import System
system = System(int(sys.argv[1]), Path(sys.argv[2]))
system.start()
print(json.dumps({"asap_sim": system.sim.pid, "asap_deploy": system.deploy.pid,
                  "asap_deploy's control process": system.control_pid(),
                  "asap_supervisor": system.supervisor.pid}), flush=True)
time.sleep(600)
"""


def children_of(pid: int) -> list[int]:
    """The processes whose parent is ``pid`` now."""
    found = []
    for stat in Path("/proc").glob("[0-9]*/stat"):
        try:
            fields = stat.read_text().rsplit(")", 1)[1].split()
        except (FileNotFoundError, ProcessLookupError):
            continue
        if int(fields[1]) == pid:
            found.append(int(stat.parent.name))
    return found


def assert_die_with(parent: subprocess.Popen, children: list[int]) -> None:
    """SIGKILL ``parent``; every one of ``children`` must be gone within 10 s."""
    assert all(alive(pid) for pid in children), children
    os.kill(parent.pid, signal.SIGKILL)
    parent.wait(10)
    deadline = time.monotonic() + 10.0
    while any(alive(pid) for pid in children) and time.monotonic() < deadline:
        time.sleep(0.05)
    assert [pid for pid in children if alive(pid)] == [], "still running after their parent died"


def kill_leftovers(parent: subprocess.Popen, children: list[int]) -> None:
    """What a failure left behind."""
    if parent.poll() is None:
        parent.kill()
        parent.wait()
    for pid in children:
        if alive(pid):
            os.kill(pid, signal.SIGKILL)


def test_killing_the_harness_kills_the_simulator_and_both_nodes(tmp_path):
    domain = domain_beside(process_domain(), 46)  # not this test process's own domain: the harness is another process
    children: dict[str, int] = {}
    harness = subprocess.Popen([sys.executable, "-c", HARNESS, str(domain), str(tmp_path)], cwd=ROOT,
                               stdout=subprocess.PIPE, stderr=(tmp_path / "harness.log").open("w"), text=True)
    try:
        line = harness.stdout.readline()
        assert line, f"the harness did not start its system:\n{(tmp_path / 'harness.log').read_text()[-3000:]}"
        children = json.loads(line)
        assert_die_with(harness, list(children.values()))
    finally:
        kill_leftovers(harness, list(children.values()))


def test_killing_asap_ros_sim_kills_the_simulator_and_the_recorder(tmp_path):
    run = subprocess.Popen([sys.executable, "-m", "asap_ros.cli", "sim", "--policy", "policies/kick_level1.yaml",
                            "--record", str(tmp_path / "bags"), "--out", str(tmp_path / "run"), "--rt-priority", "0"],
                           cwd=ROOT, stdin=subprocess.DEVNULL, stdout=(tmp_path / "sim.log").open("w"),
                           stderr=subprocess.STDOUT)  # fmt: skip
    children: list[int] = []
    try:
        deadline = time.monotonic() + 60.0
        while len(children) < 2 and run.poll() is None and time.monotonic() < deadline:
            time.sleep(0.1)
            children = children_of(run.pid)
        assert len(children) == 2, f"asap_sim and asap_recorder not both started:\n{(tmp_path / 'sim.log').read_text()[-3000:]}"
        assert_die_with(run, children)
    finally:
        kill_leftovers(run, children)
