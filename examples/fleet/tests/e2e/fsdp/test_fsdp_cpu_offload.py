from testfleet import register_cuda_ci

register_cuda_ci(est_time=800, suite="stage-c-4-gpu-h200", labels=['fsdp', 'offload'])


def test_fsdp_cpu_offload():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
