def clip(x, lo, hi):
    return max(lo, min(hi, x))


def test_clip():
    assert [clip(v, -1, 1) for v in (-3, 0.5, 9)] == [-1, 0.5, 1]
