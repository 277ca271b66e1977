import math


def warmup_cosine(step: int, total: int, warmup: int, peak: float, floor: float = 0.0) -> float:
    if step < warmup:
        return peak * (step + 1) / warmup
    progress = min(1.0, (step - warmup) / max(1, total - warmup))
    return floor + 0.5 * (peak - floor) * (1 + math.cos(math.pi * progress))
