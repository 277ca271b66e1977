import pytest

from fleetlib.tokenize import pack, whitespace_tokens


def test_whitespace_tokens():
    assert whitespace_tokens("  a b\tc\n") == ["a", "b", "c"]


def test_pack_fills_bins():
    assert pack([[1, 2], [3], [4, 5, 6]], 3) == [[1, 2, 3], [4, 5, 6]]


def test_pack_rejects_long():
    with pytest.raises(ValueError):
        pack([[1, 2, 3, 4]], 3)
