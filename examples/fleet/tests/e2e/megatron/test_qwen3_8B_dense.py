from testfleet import register_cuda_ci

register_cuda_ci(est_time=1100, suite="stage-c-4-gpu-h200", labels=['megatron'])


def test_qwen3_8B_dense():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
