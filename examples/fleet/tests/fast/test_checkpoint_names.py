def ckpt_name(step):
    return f'iter_{step:07d}'


def test_zero_padded():
    assert ckpt_name(42) == 'iter_0000042'
