import random


def test_seeded_is_repeatable():
    a = random.Random(7).random()
    b = random.Random(7).random()
    assert a == b
