"""The node's side of the link to a real control process (no simulator: the loop damps for want of
state, which is all these checks need)."""

from __future__ import annotations

import os
import signal

from asap_ros.config.node_params import DEPLOY
from asap_ros.runtime.loop_process import REPLY_TIMEOUT_S, LoopProcess


def test_an_answer_that_comes_after_its_call_gave_up_is_dropped(dds_domain):
    """A control process stopped past the reply timeout: the call reads it as silent; its answer,
    sent once the process runs again, is not kept (nothing waits for it) and the next call gets
    its own answer."""
    values = {**DEPLOY.defaults(), "dds_domain": dds_domain, "supervised": False}
    loop = LoopProcess({"values": values, "source": "test", "cpus": [], "mocap_topic": None})
    try:
        loop.start()
        os.kill(loop.pid, signal.SIGSTOP)
        try:
            silent = loop.status()
        finally:
            os.kill(loop.pid, signal.SIGCONT)
        assert silent.fatal_error == f"control process silent: the control process did not answer status within {REPLY_TIMEOUT_S:g} s"
        # one link, answered in order: the late answer has reached this side before the next one
        assert loop.status().alive
        assert loop._replies == {}, "an answer nobody waits for was kept"
    finally:
        loop.stop("test over")
