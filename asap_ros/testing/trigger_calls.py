"""Trigger calls that survive a restarted server: a lost request is sent again, a recorded one never."""

from __future__ import annotations

import dataclasses
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

__all__ = ["MAX_SENDS", "RESEND_AFTER_S", "LoggedService", "call_trigger", "node_records"]

RESEND_AFTER_S = 1.5
"""Seconds an unanswered call waits before the server's log is read for its record. A client
that outlived a ``kill -9``'d server stays matched to the dead server's request reader until
Fast DDS drops that participant (its lease, 20 s by default), so ``wait_for_service`` passes at
once and a request written before the client matched the new server's reader is lost: volatile,
never delivered later. The nodes record a call in its callback, before they answer."""
MAX_SENDS = 3
"""Sends of one call at most (the first and two more), each only while no record exists."""


@dataclasses.dataclass(frozen=True)
class LoggedService:
    """Where the node behind a service records each call: ``log``, the line holding ``marker``;
    ``answer`` reads ``(success, message)`` from such a line, None where the line does not say."""

    log: Path
    marker: str
    answer: Callable[[str], tuple[bool, str] | None]

    def size(self) -> int:
        """Bytes in the log now (0 before the node wrote it)."""
        return self.log.stat().st_size if self.log.exists() else 0

    def record_since(self, offset: int) -> str | None:
        """The first record line written after byte ``offset``, or None."""
        if not self.log.exists():
            return None
        with self.log.open("rb") as file:
            file.seek(offset)
            text = file.read().decode("utf-8", "replace")
        return next((line for line in text.splitlines() if self.marker in line), None)


def node_records(service: str, deploy_log: Path, supervisor_log: Path) -> LoggedService | None:
    """How asap_deploy and asap_supervisor record a call to ``service`` (None: another service).

    asap_deploy logs :func:`~asap_ros.ros.deploy_node.operator_line` for each Trigger call;
    asap_supervisor logs ``~/reset: <message>`` (INFO when it succeeded) and ``e-stop from ~/estop
    service``."""
    deploy = "/asap_deploy/"
    if service.startswith(deploy):
        marker = f" via ~/{service[len(deploy):]}: "

        def deploy_answer(line: str) -> tuple[bool, str] | None:
            verdict, _, message = line.partition(marker)[2].partition(": ")
            return {"accepted": (True, message), "REFUSED": (False, message)}.get(verdict)

        return LoggedService(deploy_log, marker, deploy_answer)
    if service == "/asap_supervisor/reset":
        return LoggedService(supervisor_log, "]: ~/reset: ",
                             lambda line: (line.startswith("[INFO]"), line.partition("]: ~/reset: ")[2]))
    if service == "/asap_supervisor/estop":
        return LoggedService(supervisor_log, "e-stop from ~/estop service", lambda _line: None)
    return None


def call_trigger(client: Any, logged: LoggedService | None, spin: Callable[[], None],
                 timeout_s: float) -> tuple[int, tuple[bool, str]]:
    """``(time.time_ns() just before the answered send, (success, message))`` of one Trigger call.

    Unanswered after :data:`RESEND_AFTER_S` with no record in ``logged``'s log, the request is
    sent again (at most :data:`MAX_SENDS` sends; each gets ``RESEND_AFTER_S`` to answer even past
    ``timeout_s``). Unanswered at the deadline but recorded, the answer is the record's (the
    response was lost: Fast DDS drops one whose client it has not matched within 100 ms).
    AssertionError if none of that gives an answer. ``spin`` runs the client's executor once."""
    from std_srvs.srv import Trigger

    offset = logged.size() if logged is not None else 0
    sends: list[tuple[int, Any]] = []

    def send() -> None:
        sends.append((time.time_ns(), client.call_async(Trigger.Request())))

    send()
    deadline = time.monotonic() + timeout_s
    check_at = time.monotonic() + RESEND_AFTER_S
    record: str | None = None
    while True:
        for sent, future in sends:
            if future.done():
                return sent, (future.result().success, future.result().message)
        now = time.monotonic()
        if logged is not None and record is None and now >= check_at:
            record = logged.record_since(offset)
            check_at = now + RESEND_AFTER_S  # the log is read once per RESEND_AFTER_S, not per spin
            if record is None and len(sends) < MAX_SENDS:
                send()
                deadline = max(deadline, check_at)
        if now > deadline:
            break
        spin()
    if logged is not None:
        record = record or logged.record_since(offset)
        if record is not None and (answer := logged.answer(record)) is not None:
            return sends[0][0], answer
    seen = "no log to read" if logged is None else (f"its log records it: {record.strip()!r}" if record
                                                   else "its log has no record of it")
    raise AssertionError(f"{client.srv_name} did not answer within {timeout_s:g} s ({len(sends)} sends; {seen})")
