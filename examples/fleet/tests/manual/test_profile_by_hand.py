def test_manual():
    pass
