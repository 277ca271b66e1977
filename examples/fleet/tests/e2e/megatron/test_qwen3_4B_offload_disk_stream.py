from tests.ci.ci_register import register_cuda_ci, register_rocm_ci

register_cuda_ci(est_time=900, suite="stage-c-4-gpu-h200", labels=['megatron', 'offload'])
register_rocm_ci(
    est_time=900,
    suite="stage-c-4-gpu-mi300x",
    labels=['megatron', 'offload', 'amd'],
    disabled="Disk stream offload slow on MI300X runner disks until 2026-09-01",
)


def test_qwen3_4B_offload_disk_stream():
    import torch  # noqa: F401  (only on GPU runners)

    assert torch.cuda.is_available()
