from testfleet import register_cuda_ci

register_cuda_ci(est_time=3600, suite="stage-c-8-gpu-h100", labels=['megatron', 'long'], nightly=True)


def test_long_context_128k():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
