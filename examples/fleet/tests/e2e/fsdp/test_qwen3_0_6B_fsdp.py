from testfleet import register_cuda_ci

register_cuda_ci(est_time=600, suite="stage-c-4-gpu-h200", labels=['fsdp'])


def test_qwen3_0_6B_fsdp():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
