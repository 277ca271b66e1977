from fleetlib.advantage import discounted_returns, normalize


def test_returns():
    assert discounted_returns([1.0, 1.0], 0.5) == [1.5, 1.0]


def test_normalize_zero_mean():
    out = normalize([1.0, 2.0, 3.0])
    assert abs(sum(out)) < 1e-9
