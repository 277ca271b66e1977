from fleetlib.schedule import warmup_cosine


def test_warmup_is_linear():
    assert warmup_cosine(0, 100, 10, 1.0) == 0.1
    assert warmup_cosine(9, 100, 10, 1.0) == 1.0


def test_cosine_reaches_floor():
    assert abs(warmup_cosine(100, 100, 10, 1.0, floor=0.1) - 0.1) < 1e-9
