"""A policy runner whose actor output is corrupted on one step (test double).

A trained actor does not output NaN, inf or wild values, nor raise, on a healthy state, so the
controller's checks of an actor's output can only be reached by corrupting it. The runner is
the real one (real spec, real ONNX actor); only its raw output at one step is replaced, before
the runner clips it, as a diverging actor would produce it.
"""

from __future__ import annotations

import numpy as np

from asap_ros.core.policy import PolicyRunner


def corrupted_runner(real: PolicyRunner, at_tick: int, index: int, value: float | Exception) -> PolicyRunner:
    """A new runner of ``real``'s spec and actor whose raw output ``index`` is ``value`` (or which
    raises ``value``) at its step ``at_tick``; ``real`` itself is left unchanged."""
    runner = PolicyRunner(real.spec, real.robot, real.actor)

    def actor(obs: np.ndarray) -> np.ndarray:
        output = real.actor(obs)
        if runner.tick == at_tick:
            if isinstance(value, Exception):
                raise value
            output[index] = value
        return output

    runner.actor = actor
    return runner
