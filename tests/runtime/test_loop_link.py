"""The node <-> control process link on a real SEQPACKET socket pair."""

from __future__ import annotations

import pickle
import socket

import numpy as np
import pytest

from asap_ros.runtime.loop_link import Link, LinkClosed


def pair() -> tuple[Link, Link]:
    ours, theirs = Link.pair()
    return ours, Link(theirs)


def test_a_message_arrives_whole_and_in_order():
    a, b = pair()
    payload = np.arange(29, dtype=np.float32)
    a.send(("step", 1, payload))
    a.send(("reply", 2, True, "accepted"))
    kind, tick, values = b.receive(1.0)
    assert (kind, tick) == ("step", 1) and np.array_equal(values, payload)
    assert b.receive(1.0) == ("reply", 2, True, "accepted")
    assert b.receive(0.01) is None


def test_a_full_link_drops_a_non_blocking_send_and_keeps_the_rest():
    a, b = pair()
    big = ("step", b"x" * 60_000)
    sent = 0
    while a.send(big, block=False):
        sent += 1
        assert sent < 10_000, "the buffer never filled"
    assert sent > 0
    received = 0
    while b.receive(0.05) is not None:
        received += 1
    assert received == sent


def test_the_other_end_closing_is_link_closed_on_both_calls():
    a, b = pair()
    b.close()
    with pytest.raises(LinkClosed):
        a.receive(1.0)
    with pytest.raises(LinkClosed):
        a.send(("status", 1))


def test_a_message_that_is_not_a_tagged_tuple_is_refused():
    ours, theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_SEQPACKET)
    link = Link(ours)
    theirs.send(pickle.dumps(["status", 1]))
    with pytest.raises(ValueError, match="not a loop-link message: list"):
        link.receive(1.0)


def test_a_stream_socket_is_refused():
    ours, _theirs = socket.socketpair(socket.AF_UNIX, socket.SOCK_STREAM)
    with pytest.raises(ValueError, match="SOCK_SEQPACKET"):
        Link(ours)
