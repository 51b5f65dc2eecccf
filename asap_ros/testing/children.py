"""Child processes that die with the process that started them."""

from __future__ import annotations

import os
import sys

DIE_WITH_PARENT = (
    "import ctypes, os, signal, sys\n"
    "ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG\n"
    "os.getppid() == int(sys.argv[1]) or sys.exit('parent gone')\n"
    "os.execvp(sys.argv[2], sys.argv[2:])\n"
)


def dying_with_this_process(args: list[str]) -> list[str]:
    """``args`` run so that the kernel kills the child when this process dies, however it dies
    (``PR_SET_PDEATHSIG``, kept across ``exec``): a crashed test run leaves no node behind on a
    DDS domain that a later run may reuse. Start the child from the main thread (the signal
    follows the thread that forked it)."""
    return [sys.executable, "-c", DIE_WITH_PARENT, str(os.getpid()), *args]
