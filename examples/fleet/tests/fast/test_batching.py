def batches(n, size):
    return [list(range(i, min(n, i + size))) for i in range(0, n, size)]


def test_last_batch_short():
    assert batches(5, 2)[-1] == [4]
