from testfleet import register_cuda_ci

register_cuda_ci(
    est_time=750,
    suite="stage-c-4-gpu-h200",
    labels=["fsdp"],
    disabled="Waiting for the FSDP2 mixed-precision API to stabilise (#2190)",
)


def test_fsdp2_mixed_precision():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
