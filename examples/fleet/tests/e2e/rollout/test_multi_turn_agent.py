from testfleet import register_cuda_ci

register_cuda_ci(est_time=500, suite="stage-c-4-gpu-h200", labels=['rollout'])


def test_multi_turn_agent():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
