"""Models of Δa from the delta model's 108 inputs: ridge regression and a small MLP, in numpy.

A model may also read, per joint, how far the joint limits cut the target of the recorded action
(:class:`asap_ros.export.onnx_file.ClampFeature`, computed inside its graph): the robot clamps its
targets and ASAP's trainer does not, a gap no linear function of the inputs can express.
Inputs and targets are standardised for fitting (mean, standard deviation per column; a
constant column keeps scale 1); the standardisation is folded into the first and last layers,
so a model is plain ``Gemm``/``Elu`` layers on the raw inputs (:mod:`asap_ros.export.onnx_file`).
Models are compared and their settings chosen on held-out motions only: for each motion of the
training data, a model fitted on the others predicts it (never random ticks, which share a
motion's state with their neighbours).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

import numpy as np

from asap_ros.export.onnx_file import ClampFeature, mlp_forward

Layers = list[tuple[np.ndarray, np.ndarray]]
RIDGE, JOINT, MLP, AUTO, NONE = "ridge", "joint", "mlp", "auto", "none"
MODEL_KINDS = (RIDGE, JOINT, MLP, AUTO)
JOINT_TERMS = ("actions_open_loop", "dof_pos", "dof_vel")
"""What a ``joint`` model reads for each joint: its own recorded action, angle and velocity (and
the joint-limit cut of its target, with a clamp feature): a motor that differs from the nominal
one (torque, gain, friction, offset) shows up as exactly such a function."""
JOINT_ALPHA = 1e-3
RIDGE_ALPHAS = (1e-3, 1e-2, 1e-1, 1.0, 10.0, 100.0, 1000.0)
"""Ridge penalties tried, per standardised input and per tick (``XᵀX/N + αI``)."""
MLP_HIDDEN = (64, 64)
MLP_EPOCHS = 150
MLP_BATCH = 256
MLP_LEARNING_RATE = 1e-3
MLP_WEIGHT_DECAY = 1e-4
SEED = 0


@dataclass(frozen=True)
class Standardiser:
    mean: np.ndarray
    scale: np.ndarray

    @classmethod
    def of(cls, values: np.ndarray) -> Standardiser:
        mean = values.mean(axis=0)
        scale = values.std(axis=0)
        return cls(mean, np.where(scale > 1e-8, scale, 1.0))

    def apply(self, values: np.ndarray) -> np.ndarray:
        return (values - self.mean) / self.scale


@dataclass(frozen=True)
class FittedModel:
    """A model as layers on the raw inputs (float64), with the clamp columns if it reads them."""

    kind: str
    layers: Layers
    setting: str
    """The chosen penalty (ridge) or epochs (MLP)."""
    clamp: ClampFeature | None = None

    def predict(self, inputs: np.ndarray) -> np.ndarray:
        return mlp_forward(self.layers, inputs, self.clamp)

    def as_delta(self) -> Callable[[np.ndarray], np.ndarray]:
        """The model as a delta model of one float32 observation (what its ONNX file computes)."""
        return lambda obs: self.predict(np.asarray(obs, dtype=np.float64)[None])[0].astype(np.float32)


def _features(inputs: np.ndarray, clamp: ClampFeature | None) -> np.ndarray:
    return inputs if clamp is None else np.concatenate([inputs, clamp.excess(inputs)], axis=1)


def _fold(layers: Layers, inputs: Standardiser, targets: Standardiser) -> Layers:
    """Layers on standardised data -> layers on raw data."""
    first_w, first_b = layers[0]
    weight = first_w / inputs.scale[:, None]
    bias = first_b - (inputs.mean / inputs.scale) @ first_w
    folded = [(weight, bias)] + list(layers[1:])
    last_w, last_b = folded[-1]
    folded[-1] = (last_w * targets.scale[None, :], last_b * targets.scale + targets.mean)
    return folded


def fit_ridge(inputs: np.ndarray, targets: np.ndarray, alpha: float | np.ndarray,
              clamp: ClampFeature | None = None) -> FittedModel:  # fmt: skip
    """Least squares with penalty ``alpha`` (one, or one per output joint) on standardised inputs
    (intercept unpenalised); each output is its own ridge problem."""
    inputs = _features(inputs, clamp)
    x_std, y_std = Standardiser.of(inputs), Standardiser.of(targets)
    x, y = x_std.apply(inputs), y_std.apply(targets)
    alphas = np.broadcast_to(np.asarray(alpha, dtype=np.float64), (y.shape[1],))
    gram, moment = x.T @ x / len(x), x.T @ y / len(x)
    weight = np.empty((x.shape[1], y.shape[1]))
    for value in np.unique(alphas):
        columns = alphas == value
        weight[:, columns] = np.linalg.solve(gram + value * np.eye(x.shape[1]), moment[:, columns])
    setting = f"alpha={alphas[0]:g}" if np.all(alphas == alphas[0]) else "alpha per joint=" + ",".join(
        f"{a:g}" for a in alphas)
    return FittedModel(RIDGE, _fold([(weight, np.zeros(y.shape[1]))], x_std, y_std), setting, clamp)


def zero_model(inputs: int, outputs: int) -> FittedModel:
    """Δa = 0 for every input: what ``auto`` answers when no model helps on held-out motions."""
    return FittedModel(NONE, [(np.zeros((inputs, outputs)), np.zeros(outputs))], "Δa = 0")


def fit_joint(inputs: np.ndarray, targets: np.ndarray, clamp: ClampFeature | None = None,
              alpha: float = JOINT_ALPHA) -> FittedModel:  # fmt: skip
    """One small ridge problem per joint on its own ``JOINT_TERMS`` (standardised), with an intercept."""
    from asap_ros.export.delta import term_offset

    features = _features(inputs, clamp)
    joints = targets.shape[1]
    weight, bias = np.zeros((features.shape[1], joints)), np.zeros(joints)
    for j in range(joints):
        columns = [term_offset(name)[0] + j for name in JOINT_TERMS]
        if clamp is not None:
            columns.append(inputs.shape[1] + j)
        x_std = Standardiser.of(features[:, columns])
        x = x_std.apply(features[:, columns])
        y = targets[:, j] - targets[:, j].mean()
        coef = np.linalg.solve(x.T @ x / len(x) + alpha * np.eye(len(columns)), x.T @ y / len(x))
        weight[columns, j] = coef / x_std.scale
        bias[j] = targets[:, j].mean() - (x_std.mean / x_std.scale) @ coef
    return FittedModel(JOINT, [(weight, bias)], f"alpha={alpha:g}", clamp)


def _elu(x: np.ndarray) -> tuple[np.ndarray, np.ndarray]:
    """ELU and its derivative."""
    negative = np.expm1(np.minimum(x, 0.0))
    return np.where(x > 0, x, negative), np.where(x > 0, 1.0, negative + 1.0)


def fit_mlp(inputs: np.ndarray, targets: np.ndarray, epochs: int = MLP_EPOCHS,
            monitor: Callable[[FittedModel], float] | None = None,
            clamp: ClampFeature | None = None) -> tuple[FittedModel, list[float]]:  # fmt: skip
    """An ELU MLP (``MLP_HIDDEN``) by Adam on the mean squared error of standardised targets.

    ``monitor(model)`` after each epoch (e.g. a held-out motion's error) is returned per epoch.
    """
    rng = np.random.default_rng(SEED)
    inputs = _features(inputs, clamp)
    x_std, y_std = Standardiser.of(inputs), Standardiser.of(targets)
    x, y = x_std.apply(inputs), y_std.apply(targets)
    widths = [x.shape[1], *MLP_HIDDEN, y.shape[1]]
    params = []
    for fan_in, fan_out in zip(widths[:-1], widths[1:]):
        params += [rng.normal(0.0, np.sqrt(1.0 / fan_in), (fan_in, fan_out)), np.zeros(fan_out)]
    moments = [np.zeros_like(p) for p in params]
    squares = [np.zeros_like(p) for p in params]
    step, history = 0, []
    beta1, beta2 = 0.9, 0.999
    for _ in range(epochs):
        order = rng.permutation(len(x))
        for first in range(0, len(x), MLP_BATCH):
            batch = order[first : first + MLP_BATCH]
            grads = _gradients(params, x[batch], y[batch])
            step += 1
            for n, (p, g) in enumerate(zip(params, grads)):
                g = g + MLP_WEIGHT_DECAY * p if p.ndim == 2 else g
                moments[n] = beta1 * moments[n] + (1 - beta1) * g
                squares[n] = beta2 * squares[n] + (1 - beta2) * g * g
                corrected = moments[n] / (1 - beta1**step)
                p -= MLP_LEARNING_RATE * corrected / (np.sqrt(squares[n] / (1 - beta2**step)) + 1e-8)
        if monitor is not None:
            history.append(monitor(_model(params, x_std, y_std, len(history) + 1, clamp)))
    return _model(params, x_std, y_std, epochs, clamp), history


def _model(params: list[np.ndarray], x_std: Standardiser, y_std: Standardiser, epochs: int,
           clamp: ClampFeature | None) -> FittedModel:  # fmt: skip
    layers = [(params[i].copy(), params[i + 1].copy()) for i in range(0, len(params), 2)]
    return FittedModel(MLP, _fold(layers, x_std, y_std), f"epochs={epochs}", clamp)


def _gradients(params: list[np.ndarray], x: np.ndarray, y: np.ndarray) -> list[np.ndarray]:
    """Gradients of the mean squared error (per output, halved) by backpropagation."""
    activations, slopes = [x], []
    out = x
    layers = len(params) // 2
    for n in range(layers):
        out = out @ params[2 * n] + params[2 * n + 1]
        if n < layers - 1:
            out, slope = _elu(out)
            slopes.append(slope)
        activations.append(out)
    error = (activations[-1] - y) / len(x)
    grads: list[np.ndarray] = [np.empty(0)] * len(params)
    for n in reversed(range(layers)):
        grads[2 * n] = activations[n].T @ error
        grads[2 * n + 1] = error.sum(axis=0)
        if n:
            error = (error @ params[2 * n].T) * slopes[n - 1]
    return grads


def unexplained(model: FittedModel, inputs: np.ndarray, targets: np.ndarray) -> float:
    """Mean squared error over the mean square of the targets (1: no better than Δa = 0)."""
    return float(np.mean((model.predict(inputs) - targets) ** 2) / np.mean(targets**2))


def unexplained_per_joint(model: FittedModel, inputs: np.ndarray, targets: np.ndarray) -> np.ndarray:
    """(23,) :func:`unexplained` of each output joint."""
    return np.mean((model.predict(inputs) - targets) ** 2, axis=0) / np.maximum(np.mean(targets**2, axis=0), 1e-12)
