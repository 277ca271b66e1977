"""Failure signatures from real failure texts: noise never splits one cause, two causes
never share one signature, and the normaliser strips exactly what it says it strips."""

from __future__ import annotations

import random

import pytest
from tests.incidents import real_texts as rt

from testfleet.failures.normalize import normalize
from testfleet.failures.patterns import matcher_for
from testfleet.failures.signature import CHUNK, failure_signature


@pytest.mark.parametrize(("raw", "shape"), [
    # numbers, paths and line numbers of a torch build
    (rt.NO_CUDA_DEVICE_OLD.format(build="1524584710464"),
     "RuntimeError: cuda runtime error (<n>) : no CUDA-capable device is detected at <path>:<n>"),
    # NCCL/RCCL's host:pid:tid prefix
    (rt.RCCL_WARN.format(host="UVOSLinux", pid=19402, tid=19419),
     "<proc> [<n>] <path>:<n> NCCL WARN Cuda failure 'invalid argument'"),
    # hexadecimal addresses
    (rt.HIP_NO_DEVICE_LINES[4],
     "frame #<n>: c10::Error::Error(c10::SourceLocation, std::string) + <hex> (<hex> in <path>)"),
    # temporary names, alone and in paths
    ("OSError: cannot write tmpab12cd_x: disk quota", "OSError: cannot write <tmp>: disk quota"),
    ("FileNotFoundError: [Errno 2] No such file or directory: '/tmp/tmpq1w2e3r4/model.bin'",
     "FileNotFoundError: [Errno <n>] No such file or directory: '<path>'"),
    # timestamps and dates
    ("[2025-07-01T05:06:30.005+00:00] Failed to initialize NVML: Driver/library version mismatch",
     "[<time>] Failed to initialize NVML: Driver/library version mismatch"),
    ("E0323 21:57:08.583000 23 api.py:869] failed (exitcode: 1) local_rank: 0 (pid: 88)",
     "E0323 <time> <n> api.py:<n>] failed (exitcode: <n>) local_rank: <n> (pid: <n>)"),
    # host names, named as such or fully qualified, and IP addresses
    ("host      : vmnuvocinpoc.internal.cloudapp.net", "host : <host>"),
    ("ConnectionError: cannot reach gpu-node12.cluster.local (10.0.3.17:29500)",
     "ConnectionError: cannot reach <host> (<ip>)"),
    # a worker's rank prefix, pytest's E prefix
    ("[rank3]: RuntimeError: HIP error: invalid device function",
     "RuntimeError: HIP error: invalid device function"),
    ("E       torch.OutOfMemoryError: CUDA out of memory. Tried to allocate 4.22 GiB.",
     "torch.OutOfMemoryError: CUDA out of memory. Tried to allocate <n> GiB."),
    # digits inside words are part of the message (dtypes, architectures)
    ("ValueError: dtype bfloat16 not supported on gfx90a",
     "ValueError: dtype bfloat16 not supported on gfx90a"),
    # Driver/library is not a path; I/O neither
    ("Failed to initialize NVML: Driver/library version mismatch",
     "Failed to initialize NVML: Driver/library version mismatch"),
])
def test_normalise_strips_noise_keeps_shape(raw: str, shape: str) -> None:
    assert normalize(raw) == shape


def test_normalise_strips_digests_uuids_urls_and_control_characters() -> None:
    raw = ("AssertionError: \x1b[31mcommit c2d41d2ba6d8b7b4a3ffec621578eb4d9a0909df run "
           "123e4567-e89b-12d3-a456-426614174000 see https://ci.example.com/runs/77\x1b[0m\x00")
    assert normalize(raw) == "AssertionError: commit <hex> run <uuid> see <url>"


def _causes(rng: random.Random) -> dict[str, tuple[str, str, str]]:
    """cause -> (backend, output, outcome); each call varies every piece of noise."""
    host = f"mi300x-runner-{rng.randint(1, 40):02d}"
    pid, tid = rng.randint(1000, 99999), rng.randint(1000, 99999)
    t = f"tests/test_{rng.choice(['a', 'b', 'c'])}.py"
    return {
        "no-hip-gpus": ("rocm", rt.pytest_output(t, [("test_x", rt.NO_HIP_GPUS)], rng=rng), "FAILED"),
        "hip-no-device": ("rocm", "\n".join(rt.HIP_NO_DEVICE_LINES) + "\n", "FAILED"),
        "hsa-resources": ("rocm", "\n".join(rt.HSA_OUT_OF_RESOURCES_LINES) + "\n", "FAILED"),
        "rccl-warn": ("rocm", rt.RCCL_WARN.format(host=host, pid=pid, tid=tid) + "\nTraceback ...\n",
                      "FAILED"),
        "hip-oom-at-start": ("rocm", rt.pytest_output(t, [("test_y", rt.HIP_OOM_AT_START)], rng=rng),
                             "FAILED"),
        "no-cuda-device": ("cuda", rt.pytest_output(t, [("test_x", rt.NO_CUDA_DEVICE)], rng=rng),
                           "FAILED"),
        "no-cuda-device-old": ("cuda", rt.NO_CUDA_DEVICE_OLD.format(
            build=rng.randint(10**12, 10**13)) + "\n", "FAILED"),
        "nvml": ("cuda", "\n".join(rt.NVML_MISMATCH_LINES).replace("550.144", f"{rng.randint(500, 580)}"
                                                                   f".{rng.randint(1, 200)}") + "\n",
                 "FAILED"),
        "docker-nvml": ("cuda", "\n".join(rt.DOCKER_NVML_LINES) + "\n", "ERROR"),
        "docker-gpu-driver": ("cuda", rt.DOCKER_NO_GPU_DRIVER + "\n", "ERROR"),
        "docker-pull-limit": ("cuda", rt.DOCKER_PULL_LIMIT + "\n", "ERROR"),
        "nccl": ("cuda", f"[rank{rng.randint(0, 7)}]: " + "\n".join(rt.NCCL_UNHANDLED_CUDA_LINES),
                 "FAILED"),
        "no-nvidia-driver": ("cuda", rt.pytest_output(t, [("test_z", rt.NO_NVIDIA_DRIVER)], rng=rng),
                             "FAILED"),
        # test-side failures: no start-up pattern may claim them
        "cuda-oom-in-test": ("cuda", rt.pytest_output(t, [("test_big", rt.CUDA_OOM_TEST)], rng=rng),
                             "FAILED"),
        "hip-invalid-function": ("rocm", rt.pytest_output(
            t, [("test_k", rt.HIP_INVALID_DEVICE_FUNCTION)], rng=rng), "FAILED"),
        "accuracy": ("rocm", rt.assertion_output(t, "test_gsm8k", "assert out.score >= 0.62", rng=rng),
                     "FAILED"),
        "latency": ("rocm", rt.assertion_output(t, "test_latency", "assert out.latency < 1.5", rng=rng),
                    "FAILED"),
        "key-error": ("cpu", rt.pytest_output(t, [("test_cfg", "KeyError: 'max_new_tokens'")],
                                              rng=rng, phase="FAILED"), "FAILED"),
        "key-error-other": ("cpu", rt.pytest_output(t, [("test_cfg", "KeyError: 'temperature'")],
                                                    rng=rng, phase="FAILED"), "FAILED"),
        "segfault": ("cpu", f"Loading {rng.randint(1, 9)} shards\nFatal Python error: Segmentation "
                            f"fault\n\nThread 0x{rng.getrandbits(40):x} (most recent call first):\n",
                     "FAILED"),
        "timeout": ("cpu", f"step {rng.randint(1, 500)} loss {rng.random():.3f}\n", "TIMEOUT"),
    }


def test_noise_never_splits_a_cause_and_causes_never_collapse() -> None:
    seen: dict[str, set[str]] = {}
    for seed in range(25):
        for cause, (backend, output, outcome) in _causes(random.Random(seed)).items():
            sig = failure_signature(output, outcome=outcome, matcher=matcher_for(backend))
            seen.setdefault(cause, set()).add(sig.digest)
    split = {cause: digests for cause, digests in seen.items() if len(digests) > 1}
    assert not split, f"noise split one cause into several signatures: {split}"
    owners: dict[str, list[str]] = {}
    for cause, digests in seen.items():
        owners.setdefault(next(iter(digests)), []).append(cause)
    shared = [causes for causes in owners.values() if len(causes) > 1]
    assert not shared, f"different causes share one signature: {shared}"


@pytest.mark.parametrize(("cause", "kind", "label"), [
    ("no-hip-gpus", "infra", "No HIP GPUs are available"),
    ("hip-no-device", "infra", "hipErrorNoDevice"),
    ("hsa-resources", "infra", "hsa api call failure"),
    ("rccl-warn", "infra", "NCCL WARN Cuda failure"),
    ("no-cuda-device", "infra", "no CUDA-capable device is detected"),
    ("nvml", "infra", "Failed to initialize NVML"),
    ("docker-nvml", "infra", "Error response from daemon"),
    ("docker-pull-limit", "infra", "Error response from daemon"),
    ("nccl", "infra", "NCCL error in: <path>:<n>, unhandled cuda error"),
    ("cuda-oom-in-test", "exception", "torch.OutOfMemoryError"),
    ("hip-invalid-function", "exception", "RuntimeError"),
    ("accuracy", "exception", "AssertionError"),
    ("key-error", "exception", "KeyError"),
    ("segfault", "fatal", "Fatal Python error: Segmentation fault"),
    ("timeout", "timeout", "timeout"),
])
def test_kind_and_label(cause: str, kind: str, label: str) -> None:
    backend, output, outcome = _causes(random.Random(7))[cause]
    sig = failure_signature(output, outcome=outcome, matcher=matcher_for(backend))
    assert (sig.kind, sig.label) == (kind, label), sig


def test_hip_oom_at_start_is_infrastructure_but_a_tests_own_oom_is_not() -> None:
    rng = random.Random(3)
    at_start = failure_signature(rt.pytest_output("tests/t.py", [("t", rt.HIP_OOM_AT_START)], rng=rng),
                                 matcher=matcher_for("rocm"))
    own = failure_signature(rt.pytest_output("tests/t.py", [("t", rt.CUDA_OOM_TEST)], rng=rng),
                            matcher=matcher_for("cuda"))
    assert at_start.kind == "infra" and own.kind == "exception"


def test_pytest_rewritten_assert_gets_its_type_and_message_shape() -> None:
    out = rt.assertion_output("tests/test_acc.py", "test_gsm8k", "assert out.score >= 0.62",
                              rng=random.Random(1))
    sig = failure_signature(out, matcher=matcher_for("cuda"))
    assert sig.text == "AssertionError: assert score >= <n>"


def test_a_case_message_without_summary_uses_the_crash_line() -> None:
    message = ("    def test_x():\n>       assert add(1, 1) == 3\nE       assert 2 == 3\n"
               "E        +  where 2 = add(1, 1)\n\ntests/test_math.py:4: AssertionError")
    sig = failure_signature(message)
    assert (sig.kind, sig.text) == ("exception", "AssertionError: assert <n> == <n>")


def test_the_last_exception_of_a_chained_traceback_is_the_key() -> None:
    out = ("Traceback (most recent call last):\n  File \"/w/a.py\", line 3, in <module>\n"
           "KeyError: 'x'\n\nDuring handling of the above exception, another exception occurred:\n\n"
           "Traceback (most recent call last):\n  File \"/w/a.py\", line 5, in <module>\n"
           "ValueError: bad config 'x' at line 12\n")
    assert failure_signature(out).text == "ValueError: bad config 'x' at line <n>"


def test_a_long_output_is_read_from_its_tail_only() -> None:
    noise = "x = 1\n" * (CHUNK // 3)
    early = "RuntimeError: No HIP GPUs are available\n" + noise
    sig = failure_signature(early + "AssertionError: late\n", matcher=matcher_for("rocm"))
    assert sig.text == "AssertionError: late"


def test_no_output_falls_back_to_the_runners_reason() -> None:
    sig = failure_signature("", outcome="ERROR", reason="cannot execute tests/t.py: exec format error")
    assert (sig.kind, sig.text) == ("exit", "cannot execute <path>: exec format error")


def test_a_configured_pattern_is_a_start_up_pattern_too() -> None:
    out = "slurmstepd: error: *** JOB 4242 ON gpu-12 CANCELLED AT 2025-01-01T00:00:00 ***\n"
    assert failure_signature(out, matcher=matcher_for("rocm")).kind == "output"
    sig = failure_signature(out, matcher=matcher_for("rocm", ["slurmstepd: error"]))
    assert (sig.kind, sig.label) == ("infra", "slurmstepd: error")
