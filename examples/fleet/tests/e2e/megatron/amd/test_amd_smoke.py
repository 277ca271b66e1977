from testfleet import register_rocm_ci

register_rocm_ci(est_time=300, suite="stage-c-4-gpu-mi300x", labels=["amd"])


def test_amd_smoke():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
