from testfleet import register_cuda_ci

register_cuda_ci(est_time=1400, suite="stage-c-4-gpu-h200", labels=['megatron', 'model-scripts'])


def test_glm47_flash_r3_mtp():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
