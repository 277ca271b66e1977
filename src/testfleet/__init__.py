"""testfleet: literal CI registrations for multi-backend test fleets.

The ``register_*`` markers are deliberately no-ops at run time: testfleet reads
them from each file's syntax tree so that planning never imports test code.
They exist here only so that a test file that imports them also runs on its own.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

__version__ = "0.2.0"

__all__ = [
    "__version__",
    "metrics",
    "register_amd_ci",
    "register_ci_gate",
    "register_cpu_ci",
    "register_cuda_ci",
    "register_rocm_ci",
]

if TYPE_CHECKING:
    from testfleet import metrics as metrics

# `pytest -p testfleet` imports this package as the plugin (the pytest11 entry point has
# the same name, so it is then skipped): pytest then loads the real plugin from here.
pytest_plugins = ["testfleet.pytest_plugin"]


def register_cpu_ci(
    est_time: float,
    suite: str,
    *,
    labels: list[str] | None = None,
    nightly: bool = False,
    disabled: str | None = None,
) -> None:
    """Declare that this file runs on a CPU stage (read statically; a no-op here)."""


def register_cuda_ci(
    est_time: float,
    suite: str,
    *,
    labels: list[str] | None = None,
    nightly: bool = False,
    disabled: str | None = None,
) -> None:
    """Declare that this file runs on an NVIDIA CUDA stage (read statically; a no-op here)."""


def register_rocm_ci(
    est_time: float,
    suite: str,
    *,
    labels: list[str] | None = None,
    nightly: bool = False,
    disabled: str | None = None,
) -> None:
    """Declare that this file runs on an AMD ROCm stage (read statically; a no-op here)."""


register_amd_ci = register_rocm_ci


def register_ci_gate(**_kwargs: Any) -> None:
    """Declare a metric gate for this file (read statically; a no-op here)."""


def _register_declared_backend_ci(*_args: Any, **_kwargs: Any) -> None:
    """The marker of a backend declared in config (read statically; a no-op here)."""


def __getattr__(name: str) -> Any:
    # ``metrics`` is imported lazily so that importing the markers stays free.
    if name == "metrics":
        import importlib

        return importlib.import_module("testfleet.metrics")
    # A backend declared in config (``register_npu_ci``): a migrated file imports its marker
    # from here when the project has none, and must still run on its own.
    if name.startswith("register_") and name.endswith("_ci") and name[9:-3].isalnum():
        return _register_declared_backend_ci
    raise AttributeError(f"module 'testfleet' has no attribute {name!r}")
