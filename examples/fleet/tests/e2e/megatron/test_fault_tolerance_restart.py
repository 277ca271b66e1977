from testfleet import register_cuda_ci

register_cuda_ci(est_time=900, suite="stage-c-8-gpu-h100", labels=['ft-short'])


def test_fault_tolerance_restart():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
