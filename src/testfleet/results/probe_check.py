"""``testfleet check``: a dormant stage's probe names only files registered in that stage.

The planner probes the files it can and warns about the rest, so a typo in
``probe.files`` would otherwise surface only as a plan warning on the probe's cadence,
and the probe would silently check less than the configuration says.
"""

from __future__ import annotations

import difflib

from testfleet.config import Project
from testfleet.findings import Finding
from testfleet.registry.model import Registry


def probe_findings(project: Project, registry: Registry) -> list[Finding]:
    """One error per ``probe.files`` entry that no registration of its stage names."""
    from testfleet.config.keyloc import config_line

    try:
        config_file = project.relpath(project.config_path)
    except ValueError:
        config_file = project.config_path.name
    prefix = "tool.testfleet." if config_file.endswith("pyproject.toml") else ""
    registered: dict[str, set[str]] = {}
    for reg in registry.registrations:  # what the planner can probe
        registered.setdefault(reg.suite, set()).add(reg.file)
    out = []
    for name, stage in project.config.stages.items():
        if stage.probe is None or not stage.probe.files:
            continue
        own = registered.get(name, set())
        line = config_line(project.raw_config_text, name, "probe")
        for i, file in enumerate(stage.probe.files):
            if file in own:
                continue
            close = difflib.get_close_matches(file, sorted(own), n=1)
            hint = f" (did you mean {close[0]!r}?)" if close else ""
            out.append(Finding(config_file, line, 0, "error", "probe-unregistered",
                               f"probe of dormant stage {name}: {file!r} is not registered in "
                               f"{name}{hint}; the probe would skip it",
                               key=f"{prefix}stages.{name}.probe.files[{i}]"))
    return out
