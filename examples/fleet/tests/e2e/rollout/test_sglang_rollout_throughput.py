from testfleet import register_cuda_ci

register_cuda_ci(est_time=700, suite="stage-c-8-gpu-h100", labels=['rollout'])


def test_sglang_rollout_throughput():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
