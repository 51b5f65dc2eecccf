"""Trigger calls over real rclpy and DDS: a request lost before the server matched is sent again,
one the server recorded never is, and a recorded call whose answer never comes is read from the log."""

from __future__ import annotations

import os
import threading
import time
from pathlib import Path

import pytest
import rclpy
from rclpy.callback_groups import ReentrantCallbackGroup
from rclpy.executors import SingleThreadedExecutor
from rclpy.task import Future
from std_srvs.srv import Trigger

from asap_ros.ros.deploy_node import operator_line
from asap_ros.testing.trigger_calls import MAX_SENDS, RESEND_AFTER_S, LoggedService, call_trigger, node_records

DOMAIN = 91
MARKER = " via probe: "


def answer(line: str) -> tuple[bool, str] | None:
    verdict, _, message = line.partition(MARKER)[2].partition(": ")
    return {"accepted": (True, message), "REFUSED": (False, message)}.get(verdict)


class ProbeServer:
    """A Trigger server in its own context: each call appends ``<n> via probe: accepted: call <n>``
    to ``log`` (unless ``record`` is False), then answers, or never does (``answer`` False)."""

    def __init__(self, name: str, log: Path, record: bool = True, answers: bool = True):
        self.calls, self.log, self.record, self.answers = 0, log, record, answers
        self.context = rclpy.Context()
        rclpy.init(context=self.context, domain_id=DOMAIN)
        self.node = rclpy.create_node(name, context=self.context)
        self.node.create_service(Trigger, "~/call", self._on_call, callback_group=ReentrantCallbackGroup())  # each call taken
        self.executor = SingleThreadedExecutor(context=self.context)
        self.executor.add_node(self.node)
        self.running = True
        self.thread = threading.Thread(target=self._spin, daemon=True)
        self.thread.start()

    def _spin(self) -> None:
        while self.running:
            self.executor.spin_once(timeout_sec=0.02)

    async def _on_call(self, _request: Trigger.Request, response: Trigger.Response) -> Trigger.Response:
        self.calls += 1
        if self.record:
            with self.log.open("a") as file:
                file.write(f"[INFO] {self.calls}{MARKER}accepted: call {self.calls}\n")
        if not self.answers:
            await Future()  # never done: the request was taken, its answer never leaves
        response.success, response.message = True, f"call {self.calls}"
        return response

    def close(self) -> None:
        self.running = False
        self.thread.join(5)
        self.executor.shutdown()
        self.node.destroy_node()
        self.context.try_shutdown()


@pytest.fixture
def client():
    context = rclpy.Context()
    rclpy.init(context=context, domain_id=DOMAIN)
    node = rclpy.create_node(f"trigger_client_{os.getpid()}", context=context)
    executor = SingleThreadedExecutor(context=context)
    executor.add_node(node)
    servers: list[ProbeServer] = []
    yield node, (lambda: executor.spin_once(timeout_sec=0.02)), servers
    for server in servers:
        server.close()
    context.try_shutdown()


def test_a_request_lost_before_the_server_matched_is_sent_again_once(client, tmp_path):
    node, spin, servers = client
    trigger = node.create_client(Trigger, "/probe_late/call")
    log = tmp_path / "late.log"
    threading.Timer(0.2, lambda: servers.append(ProbeServer("probe_late", log))).start()
    started = time.time_ns()
    sent, result = call_trigger(trigger, LoggedService(log, MARKER, answer), spin, 5.0)
    assert result == (True, "call 1")
    assert servers[0].calls == 1, "the first request reached no server: only the second is recorded"
    assert (sent - started) / 1e9 >= RESEND_AFTER_S * 0.9, "the answered send is the second one"


def test_a_recorded_call_is_never_sent_again_and_its_lost_answer_is_read_from_the_log(client, tmp_path):
    node, spin, servers = client
    log = tmp_path / "mute.log"
    servers.append(ProbeServer("probe_mute", log, answers=False))
    trigger = node.create_client(Trigger, "/probe_mute/call")
    assert trigger.wait_for_service(timeout_sec=5.0)
    time.sleep(0.5)  # matched both ways: the request arrives
    assert call_trigger(trigger, LoggedService(log, MARKER, answer), spin, 2 * RESEND_AFTER_S)[1] == (True, "call 1")
    assert servers[0].calls == 1


def test_an_unrecorded_unanswered_call_fails_after_its_last_send_naming_it(client, tmp_path):
    node, spin, servers = client
    log = tmp_path / "silent.log"
    servers.append(ProbeServer("probe_silent", log, record=False, answers=False))
    trigger = node.create_client(Trigger, "/probe_silent/call")
    assert trigger.wait_for_service(timeout_sec=5.0)
    time.sleep(0.5)
    with pytest.raises(AssertionError, match=rf"/probe_silent/call did not answer within 2 s \({MAX_SENDS} sends; "
                                             r"its log has no record of it\)"):
        call_trigger(trigger, LoggedService(log, MARKER, answer), spin, 2.0)
    assert servers[0].calls == MAX_SENDS


def test_without_a_log_an_unanswered_call_is_sent_once(client, tmp_path):
    node, spin, servers = client
    servers.append(ProbeServer("probe_nolog", tmp_path / "unused.log", answers=False))
    trigger = node.create_client(Trigger, "/probe_nolog/call")
    assert trigger.wait_for_service(timeout_sec=5.0)
    time.sleep(0.5)
    with pytest.raises(AssertionError, match=r"\(1 sends; no log to read\)"):
        call_trigger(trigger, None, spin, 2 * RESEND_AFTER_S)
    assert servers[0].calls == 1


def test_node_records_read_the_nodes_own_log_lines(tmp_path):
    deploy, supervisor = tmp_path / "deploy1.log", tmp_path / "supervisor1.log"
    stand = node_records("/asap_deploy/stand", deploy, supervisor)
    line = "[WARN] [1796556909.5] [asap_deploy]: " + operator_line("Stand", "~/stand", False,
                                                                     "Stand refused: reset the supervisor first")
    assert stand is not None and stand.log == deploy and stand.marker in line
    assert stand.answer(line) == (False, "Stand refused: reset the supervisor first")
    start = node_records("/asap_deploy/start/kick_level1", deploy, supervisor)
    assert start is not None and start.marker not in line and start.marker == " via ~/start/kick_level1: "
    reset = node_records("/asap_supervisor/reset", deploy, supervisor)
    assert reset is not None and reset.log == supervisor
    assert reset.answer("[INFO] [1.0] [asap_supervisor]: ~/reset: handing rt/lowcmd back") == \
        (True, "handing rt/lowcmd back")
    assert reset.answer("[WARN] [1.0] [asap_supervisor]: ~/reset: reset refused: x") == (False, "reset refused: x")
    assert node_records("/asap_mocap/stand", deploy, supervisor) is None
    deploy.write_text(f"{line}\n")
    assert stand.record_since(0) == line and stand.record_since(deploy.stat().st_size) is None
