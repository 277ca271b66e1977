def merge(a, b):
    out = dict(a)
    out.update(b)
    return out


def test_merge_overrides():
    assert merge({'a': 1, 'b': 2}, {'b': 3}) == {'a': 1, 'b': 3}
