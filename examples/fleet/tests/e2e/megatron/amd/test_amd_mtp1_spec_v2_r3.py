from testfleet import register_amd_ci

register_amd_ci(est_time=1700, suite="stage-c-4-gpu-mi300x", labels=['megatron', 'amd'], disabled="Spec V2 decode mismatch on ROCm, see #2236")


def test_amd_mtp1_spec_v2_r3():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
