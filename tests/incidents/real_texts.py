"""Failure texts seen in public issue threads, and synthetic outputs built around them.

Each ``*_LINES`` constant holds the error lines as the tools print them (the messages
of PyTorch, ROCm, NCCL/RCCL, the NVIDIA driver, Docker), cited by the thread that
shows them; the outputs around them (pytest headers, tracebacks, host names, PIDs,
temporary paths) are made here, varied per call so tests can check that noise does
not split one cause and that different causes never share a signature.
"""

from __future__ import annotations

import random

# ROCm/hip#3799 (torch/cuda/__init__.py _lazy_init on MI300)
NO_HIP_GPUS = "RuntimeError: No HIP GPUs are available"
# harryjo97/GDSS#6: an uncaught c10::HIPError at start-up
HIP_NO_DEVICE_LINES = (
    "terminate called after throwing an instance of 'c10::HIPError'",
    "  what():  HIP error: hipErrorNoDevice",
    "HIP kernel errors might be asynchronously reported at some other API call,so the "
    "stacktrace below might be incorrect.",
    "Exception raised from deviceCount at /pytorch/aten/src/ATen/hip/impl/"
    "HIPGuardImplMasqueradingAsCUDA.h:102 (most recent call first):",
    "frame #0: c10::Error::Error(c10::SourceLocation, std::string) + 0x42 "
    "(0x7f9eff1e7212 in /nethome/u/anaconda3/envs/e/lib/python3.7/site-packages/torch/lib/libc10.so)",
)
# ROCm/legacy-rocm-build#930 and #1070: rocminfo on a runner whose GPUs cannot be opened
HSA_OUT_OF_RESOURCES_LINES = (
    "hsa api call failure at: /data/jenkins_workspace/compute-rocm-rel-2.9/rocminfo/rocminfo.cc:1102",
    "Call returned HSA_STATUS_ERROR_OUT_OF_RESOURCES: The runtime failed to allocate the "
    "necessary resources. This error may also occur when the core runtime library needs to "
    "spawn threads or create internal OS-specific events.",
)
# the CUDA message the issue names; the older form: jwyang/faster-rcnn.pytorch#377
NO_CUDA_DEVICE = "RuntimeError: CUDA error: no CUDA-capable device is detected"
NO_CUDA_DEVICE_OLD = ("RuntimeError: cuda runtime error (38) : no CUDA-capable device is "
                      "detected at /opt/conda/conda-bld/pytorch_{build}/work/aten/src/THC/"
                      "THCGeneral.cpp:74")
# mozilla/translations#1167, intel/llvm#17614
NVML_MISMATCH_LINES = (
    "Failed to initialize NVML: Driver/library version mismatch",
    "NVML library version: 550.144",
)
# labdao/plex#18: the container does not start on a driver mismatch
DOCKER_NVML_LINES = (
    "docker: Error response from daemon: failed to create shim task: OCI runtime create failed: "
    "runc create failed: unable to start container process: error during container init: error "
    "running hook #0: error running hook: exit status 1, stdout: , stderr: Auto-detected mode as "
    "'legacy'",
    "nvidia-container-cli: initialization error: nvml error: driver/library version mismatch: "
    "unknown.",
)
# NVIDIA/nvidia-docker#1352
DOCKER_NO_GPU_DRIVER = ('docker: Error response from daemon: could not select device driver "" '
                        "with capabilities: [[gpu]].")
# docker/hub-feedback#2429
DOCKER_PULL_LIMIT = ("Error response from daemon: toomanyrequests: You have reached your pull rate "
                     "limit. You may increase the limit by authenticating and upgrading: "
                     "https://www.docker.com/increase-rate-limit")
# pytorch/pytorch#170045
NCCL_UNHANDLED_CUDA_LINES = (
    "torch.distributed.DistBackendError: NCCL error in: /pytorch/torch/csrc/distributed/c10d/"
    "NCCLUtils.cpp:77, unhandled cuda error (run with NCCL_DEBUG=INFO for details), NCCL "
    "version 2.26.2",
    "ncclUnhandledCudaError: Call to CUDA function failed.",
    "Last error:",
    "Cuda failure 999 'unknown error'",
)
# ROCm/rccl#1454: RCCL's own lines carry host:pid:tid
RCCL_WARN = ("{host}:{pid}:{tid} [0] /usr/src/debug/rccl/build/hipify/src/transport/p2p.cc:237 "
             "NCCL WARN Cuda failure 'invalid argument'")
# antgroup/echomimic_v2#115: the test's own allocation (not an infrastructure failure)
CUDA_OOM_TEST = ("torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB. GPU 0 "
                 "has a total capacity of 15.69 GiB of which 3.71 GiB is free. Including "
                 "non-PyTorch memory, this process has 11.14 GiB memory in use. Of the allocated "
                 "memory 10.14 GiB is allocated by PyTorch, and 771.43 MiB is reserved by PyTorch "
                 "but unallocated.")
# the same message shape when another process holds the device before the test starts
# (ROCm/TheRock#1054 shows "Of the allocated memory 0 bytes is allocated by PyTorch")
HIP_OOM_AT_START = ("torch.OutOfMemoryError: HIP out of memory. Tried to allocate 2.00 GiB. GPU 0 "
                    "has a total capacity of 191.98 GiB of which 12.00 MiB is free. Including "
                    "non-PyTorch memory, this process has 0 bytes memory in use. Of the allocated "
                    "memory 0 bytes is allocated by PyTorch, and 0 bytes is reserved by PyTorch "
                    "but unallocated.")
# facebookresearch/detectron2#3105
NO_NVIDIA_DRIVER = ("RuntimeError: Found no NVIDIA driver on your system. Please check that you "
                    "have an NVIDIA GPU and installed a driver from "
                    "http://www.nvidia.com/Download/index.aspx")
# etched-ai/open-oasis#27: a build for the wrong GPU architecture (a test-side problem)
HIP_INVALID_DEVICE_FUNCTION = "RuntimeError: HIP error: invalid device function"


def pytest_output(file: str, errors: list[tuple[str, str]], *, rng: random.Random,
                  phase: str = "ERROR", preamble: tuple[str, ...] = ()) -> str:
    """A pytest run of ``file`` whose tests failed with ``errors`` [(test, exception line)],
    with the noise a real runner adds: a host, a PID, a temporary directory, timings."""
    host = f"gpu-node{rng.randint(1, 99)}.cluster.local"
    tmp = f"/tmp/pytest-of-runner/pytest-{rng.randint(1, 999)}/tmp{rng.getrandbits(32):08x}"
    lines = [
        "============================= test session starts ==============================",
        f"platform linux -- Python 3.11.{rng.randint(0, 9)}, pytest-8.3.{rng.randint(0, 5)}, "
        "pluggy-1.5.0",
        f"rootdir: /home/runner/_work/fleet/fleet (host {host}, pid {rng.randint(1000, 99999)})",
        f"collected {len(errors) + rng.randint(0, 30)} items",
        "",
        *preamble,
        "",
        f"{file} {'E' * len(errors)}",
        "",
        "==================================== ERRORS ====================================",
    ]
    for test, error in errors:
        lines += [
            f"_________________ {phase} at setup of {test} _________________",
            "",
            "    def setup_module():",
            f">       model = load_model('{tmp}/model.bin', device='cuda:{rng.randint(0, 7)}')",
            "",
            f"{file}:{rng.randint(10, 400)}: ",
            "_ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _ _",
            f"E   {error}",
            "",
            f"/opt/venv/lib/python3.11/site-packages/torch/cuda/__init__.py:{rng.randint(300, 400)}: "
            f"{error.split(':')[0]}",
        ]
    lines.append("=========================== short test summary info ============================")
    lines += [f"{phase} {file}::{test} - {error}" for test, error in errors]
    lines.append(f"========================= {len(errors)} errors in "
                 f"{rng.uniform(1, 30):.2f}s =========================")
    return "\n".join(lines) + "\n"


def assertion_output(file: str, test: str, assertion: str, *, rng: random.Random) -> str:
    """A pytest failure of one test by a rewritten ``assert`` (no type in the message)."""
    return "\n".join([
        "=================================== FAILURES ===================================",
        f"_________________________________ {test} _________________________________",
        "",
        f"    def {test}():",
        f"        out = run_engine(seed={rng.randint(0, 10_000)})",
        f">       {assertion}",
        f"E       {assertion.replace('out.', '')}",
        f"E        +  where {rng.random():.4f} = <Output object at 0x{rng.getrandbits(48):x}>.score",
        "",
        f"{file}:{rng.randint(10, 400)}: AssertionError",
        "=========================== short test summary info ============================",
        f"FAILED {file}::{test} - {assertion.replace('out.', '')}",
        f"1 failed, {rng.randint(1, 40)} passed in {rng.uniform(1, 90):.2f}s",
    ]) + "\n"
