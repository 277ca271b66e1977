from testfleet import register_amd_ci

register_amd_ci(est_time=1800, suite="stage-c-4-gpu-mi300x", labels=['megatron', 'amd'], disabled="Disable due to failure")


def test_amd_r3_mtp():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
