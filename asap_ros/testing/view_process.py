"""``asap-ros view`` as a process of its own, as an operator starts it, for tests and benchmarks."""

from __future__ import annotations

import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request
from pathlib import Path

from asap_ros.config.paths import share_dir
from asap_ros.sim.process import dying_with_this_process


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class ViewProcess:
    """``python -m asap_ros.cli view ARGS --port P``; :meth:`close` stops it with SIGINT."""

    def __init__(self, args: list[str], log: Path, env: dict[str, str] | None = None) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.log = log
        command = [sys.executable, "-m", "asap_ros.cli", "view", *args, "--port", str(self.port)]
        self.process = subprocess.Popen(dying_with_this_process(command), cwd=share_dir(), env=env, stdin=subprocess.DEVNULL,
                                        stdout=log.open("w"), stderr=subprocess.STDOUT)  # fmt: skip

    def wait_served(self, timeout_s: float = 120.0) -> None:
        """Until the page is served; ``AssertionError`` with the log if the process dies or never serves."""
        deadline = time.monotonic() + timeout_s
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise AssertionError(f"asap-ros view exited with {self.process.returncode}:\n{self.log_tail()}")
            try:
                with urllib.request.urlopen(self.url, timeout=2.0) as response:
                    if response.status == 200:
                        return
            except (urllib.error.URLError, OSError):
                time.sleep(0.5)
        raise AssertionError(f"asap-ros view never served {self.url}:\n{self.log_tail()}")

    def log_tail(self) -> str:
        return self.log.read_text(errors="replace")[-3000:]

    def close(self) -> int:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGINT)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        return self.process.returncode
