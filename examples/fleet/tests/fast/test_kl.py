import math


def kl(p, q):
    return sum(pi * math.log(pi / qi) for pi, qi in zip(p, q) if pi > 0)


def test_kl_self_is_zero():
    assert kl([0.5, 0.5], [0.5, 0.5]) == 0


def test_kl_positive():
    assert kl([0.9, 0.1], [0.5, 0.5]) > 0
