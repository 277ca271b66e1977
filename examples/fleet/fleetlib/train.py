"""A deterministic toy trainer whose loss and grad-norm curves look like real ones."""

import math


def run(steps: int, lr: float = 0.1, drift: float = 0.0) -> list[tuple[int, float, float]]:
    points = []
    w = 3.0
    for step in range(steps):
        grad = 2 * w
        w -= lr * grad
        loss = w * w + 0.01 * math.sin(step) + drift
        points.append((step, loss, abs(grad) * (1 + drift)))
    return points
