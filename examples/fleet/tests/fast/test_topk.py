def topk(xs, k):
    return sorted(xs, reverse=True)[:k]


def test_topk():
    assert topk([3, 1, 4, 1, 5], 2) == [5, 4]
