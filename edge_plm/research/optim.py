"""Optimisers over a dict of named parameter arrays: Adam and plain SGD, with global-norm
gradient clipping. Parameters not present in the gradient dict are frozen for that step."""

from __future__ import annotations

import numpy as np


def clip_by_global_norm(grads: dict[str, np.ndarray], max_norm: float) -> float:
    """Scale all gradients in place so their joint L2 norm is at most max_norm; returns the norm."""
    norm = float(np.sqrt(sum(float((g * g).sum()) for g in grads.values())))
    if max_norm > 0 and norm > max_norm:
        scale = max_norm / (norm + 1e-12)
        for g in grads.values():
            g *= scale
    return norm


class SGD:
    def __init__(self, lr: float = 0.01):
        self.lr = lr
        self.steps = 0

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        for name, g in grads.items():
            params[name] -= self.lr * g
        self.steps += 1

    def state(self) -> dict:
        return {"steps": self.steps}


class Adam:
    def __init__(self, lr: float = 0.01, beta1: float = 0.9, beta2: float = 0.999, eps: float = 1e-8):
        self.lr, self.beta1, self.beta2, self.eps = lr, beta1, beta2, eps
        self.m: dict[str, np.ndarray] = {}
        self.v: dict[str, np.ndarray] = {}
        self.steps = 0

    def step(self, params: dict[str, np.ndarray], grads: dict[str, np.ndarray]) -> None:
        self.steps += 1
        c1 = 1 - self.beta1**self.steps
        c2 = 1 - self.beta2**self.steps
        for name, g in grads.items():
            if name not in self.m or self.m[name].shape != g.shape:
                self.m[name] = np.zeros_like(g)
                self.v[name] = np.zeros_like(g)
            m, v = self.m[name], self.v[name]
            m *= self.beta1
            m += (1 - self.beta1) * g
            v *= self.beta2
            v += (1 - self.beta2) * g * g
            params[name] -= self.lr * (m / c1) / (np.sqrt(v / c2) + self.eps)

    def state(self) -> dict:
        return {"steps": self.steps, **{f"m.{k}": v for k, v in self.m.items()}, **{f"v.{k}": v for k, v in self.v.items()}}


def make_optimizer(name: str, lr: float):
    if name == "adam":
        return Adam(lr)
    if name == "sgd":
        return SGD(lr)
    raise ValueError(f"unknown optimiser {name!r} (adam, sgd)")
