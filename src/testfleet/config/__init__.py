"""The configuration schema: one place that says what every key means and what is valid.

``[tool.testfleet]`` in ``pyproject.toml`` or the top level of ``testfleet.toml``.
Validation uses pydantic so that every bad key is reported at once, each with its
key path, the offending value and what would be valid.

A package of small modules (base helpers, backends, stages, triggers, policy, the other
sections, gate keys, the root model, cross-reference checks, loading, key location) on
a floor of its own: it imports no feature package, so every feature may import it.
This ``__init__`` keeps ``from testfleet.config import ...`` working for every caller.
"""

from __future__ import annotations

from testfleet.config.backends import BASE_KEYWORDS as BASE_KEYWORDS
from testfleet.config.backends import BUILTIN_BACKENDS as BUILTIN_BACKENDS
from testfleet.config.backends import GATE_MARKER as GATE_MARKER
from testfleet.config.backends import KEYWORD_TYPES as KEYWORD_TYPES
from testfleet.config.backends import BackendConfig as BackendConfig
from testfleet.config.backends import ImplicitDir as ImplicitDir
from testfleet.config.backends import MarkerSignature as MarkerSignature
from testfleet.config.base import MAX_NAME as MAX_NAME
from testfleet.config.base import NAME_RE as NAME_RE
from testfleet.config.base import RegexList as RegexList
from testfleet.config.crossref import cross_reference_problems as cross_reference_problems
from testfleet.config.load import config_findings as config_findings
from testfleet.config.load import config_from_text as config_from_text
from testfleet.config.load import load_project as load_project
from testfleet.config.load import validate_config as validate_config
from testfleet.config.policy import CadenceConfig as CadenceConfig
from testfleet.config.policy import PolicyConfig as PolicyConfig
from testfleet.config.policy import ScopeLabelConfig as ScopeLabelConfig
from testfleet.config.root import Config as Config
from testfleet.config.root import Project as Project
from testfleet.config.sections import DEFAULT_FATAL as DEFAULT_FATAL
from testfleet.config.sections import DEFAULT_RETRIABLE as DEFAULT_RETRIABLE
from testfleet.config.sections import CheckConfig as CheckConfig
from testfleet.config.sections import CIConfig as CIConfig
from testfleet.config.sections import DurationsConfig as DurationsConfig
from testfleet.config.sections import FlakyConfig as FlakyConfig
from testfleet.config.sections import GateConfig as GateConfig
from testfleet.config.sections import GateDefault as GateDefault
from testfleet.config.sections import ResultsConfig as ResultsConfig
from testfleet.config.sections import RunnerConfig as RunnerConfig
from testfleet.config.stages import ContainerConfig as ContainerConfig
from testfleet.config.stages import ProbeConfig as ProbeConfig
from testfleet.config.stages import StageConfig as StageConfig
from testfleet.config.stages import VariantConfig as VariantConfig
from testfleet.configfile import CONFIG_NAMES as CONFIG_NAMES
from testfleet.configfile import find_config as find_config
