"""One check's outcome (ok / warn / FAIL with the fix) and the report's text and JSON forms."""

from __future__ import annotations

import json
from dataclasses import asdict, dataclass

OK = "ok"
WARN = "warn"
FAIL = "FAIL"


@dataclass(frozen=True)
class Check:
    """One line of the report. ``fix`` says what to do; it is empty when nothing needs doing."""

    name: str
    status: str
    message: str
    fix: str = ""


def ok(name: str, message: str) -> Check:
    return Check(name, OK, message)


def warn(name: str, message: str, fix: str) -> Check:
    return Check(name, WARN, message, fix)


def fail(name: str, message: str, fix: str) -> Check:
    return Check(name, FAIL, message, fix)


def exit_status(checks: list[Check]) -> int:
    """0 when no check failed, else 1."""
    return 1 if any(c.status == FAIL for c in checks) else 0


def format_line(check: Check) -> str:
    line = f"{check.status:<4}  {check.name}: {check.message}"
    return f"{line}\n      fix: {check.fix}" if check.fix else line


def format_text(checks: list[Check]) -> str:
    counts = {status: sum(c.status == status for c in checks) for status in (OK, WARN, FAIL)}
    summary = f"{counts[OK]} ok, {counts[WARN]} warn, {counts[FAIL]} FAIL"
    return "\n".join([*map(format_line, checks), summary])


def format_json(checks: list[Check], settings: dict) -> str:
    return json.dumps(
        {"ok": exit_status(checks) == 0, "settings": settings, "checks": [asdict(c) for c in checks]}, indent=2
    )
