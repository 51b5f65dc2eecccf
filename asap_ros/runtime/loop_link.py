"""One message link between ``asap_deploy`` and its control process: pickled tuples over a
``SOCK_SEQPACKET`` Unix socket pair (one ``send`` is one message, whole or not at all)."""

from __future__ import annotations

import pickle
import select
import socket
from dataclasses import dataclass
from typing import Any

__all__ = ["LINK_BUFFER_BYTES", "Link", "LinkClosed", "LoopStatus"]

LINK_BUFFER_BYTES = 1 << 21
"""Socket buffer each way, bytes: ~2 s of step messages (~10 kB each at 50 Hz) before the
sender's non-blocking sends start dropping them."""
MAX_MESSAGE_BYTES = 1 << 20
"""The largest message a receive takes whole, bytes (a step message is ~10 kB)."""


class LinkClosed(Exception):
    """The other process closed its end (it ended, however it ended)."""


@dataclass(frozen=True)
class LoopStatus:
    """The control loop as the control process reads it, for the node's mode timer and diagnostics."""

    mode: str
    fault: str | None
    motion: str | None
    motion_abort: Any
    fatal_error: str | None
    alive: bool
    sink_errors: tuple[str, ...]
    supervisor: str
    """``obeys supervisor <id>``, ``no supervisor obeyed`` or ``unsupervised``."""
    unsent_steps: int = 0
    """Step records the control process dropped because the node's end of the link was full."""


class Link:
    """Send and receive whole messages on one end of a ``socketpair(AF_UNIX, SOCK_SEQPACKET)``.

    :meth:`send` with ``block=False`` never waits: a full buffer drops the message and returns
    False (the reader lags; the sender's thread must not). Both ends may send from several
    threads: a ``SOCK_SEQPACKET`` send is atomic.
    """

    def __init__(self, sock: socket.socket) -> None:
        if sock.type != socket.SOCK_SEQPACKET:
            raise ValueError(f"a loop link needs a SOCK_SEQPACKET socket, got {sock.type!r}")
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_SNDBUF, LINK_BUFFER_BYTES)
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, LINK_BUFFER_BYTES)
        self.sock = sock

    @staticmethod
    def pair() -> tuple[Link, socket.socket]:
        """This process's link and the socket to hand to the other process (``pass_fds``)."""
        ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
        return Link(ours), theirs

    def send(self, message: tuple[Any, ...], block: bool = True) -> bool:
        """Send one message; False when ``block`` is False and the buffer is full (dropped).
        Raises :class:`LinkClosed` when the other end is gone."""
        data = pickle.dumps(message, protocol=pickle.HIGHEST_PROTOCOL)
        try:
            self.sock.send(data, 0 if block else socket.MSG_DONTWAIT)
        except BlockingIOError:
            return False
        except (BrokenPipeError, ConnectionResetError) as exc:
            raise LinkClosed(str(exc)) from exc
        return True

    def receive(self, timeout_s: float | None = None) -> tuple[Any, ...] | None:
        """The next message; None when ``timeout_s`` passed without one. Raises
        :class:`LinkClosed` at the other end's close."""
        if timeout_s is not None:
            ready, _, _ = select.select([self.sock], [], [], max(0.0, timeout_s))
            if not ready:
                return None
        try:
            data = self.sock.recv(MAX_MESSAGE_BYTES)
        except ConnectionResetError as exc:
            raise LinkClosed(str(exc)) from exc
        if not data:
            raise LinkClosed("the other end closed the link")
        message = pickle.loads(data)
        if not isinstance(message, tuple) or not message or not isinstance(message[0], str):
            raise ValueError(f"not a loop-link message: {type(message).__name__}")
        return message

    def close(self) -> None:
        self.sock.close()
