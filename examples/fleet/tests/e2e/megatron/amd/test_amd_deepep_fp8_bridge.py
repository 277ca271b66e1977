from testfleet import register_amd_ci

register_amd_ci(est_time=2100, suite="stage-c-4-gpu-mi300x", labels=['megatron', 'amd', 'long'], disabled="DeepEP FP8 bridge crashes in hipBLASLt, see #2235")


def test_amd_deepep_fp8_bridge():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
