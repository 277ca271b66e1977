"""One stage per suite the tree registers: its backend, runners, container, variants,
command and the settings of the CI job that runs it (dormant when no job does).
"""

from __future__ import annotations

import re
from collections import Counter, defaultdict
from typing import Any

from testfleet.adopt.calls import ALIASES, NAME, FoundCall
from testfleet.adopt.ci_model import CIRead, CIStage, NotCarried
from testfleet.adopt.job_settings import job_settings, unmapped, unsupported_job_keys
from testfleet.adopt.parallelism import incomplete_reason, partition_keys
from testfleet.adopt.scan import Scan
from testfleet.adopt.stage_events import PLAN_EVENTS
from testfleet.config import BUILTIN_BACKENDS
from testfleet.findings import Finding


def adopted_stages(calls: list[FoundCall], implicit: list[dict[str, Any]], scan_result: Scan,
                   ci: CIRead, findings: list[Finding], notes: list[str],
                   lane_jobs: dict[tuple[str, str], CIStage] | None = None,
                   ) -> tuple[dict[str, dict[str, Any]], dict[str, str], list[NotCarried]]:
    """``lane_jobs`` is filled with the job each lane (stage, variant or "") comes from,
    for the trigger keys decided once the schedules are known
    (:mod:`testfleet.adopt.stage_events`)."""
    lane_jobs = {} if lane_jobs is None else lane_jobs
    by_suite: dict[str, list[FoundCall]] = defaultdict(list)
    for c in calls:
        if c.suite:  # suite "": run by path only, no stage of its own
            by_suite[c.suite].append(c)
    implicit_suites = {i["suite"]: i["backend"] for i in implicit}
    stages: dict[str, dict[str, Any]] = {}
    dormant: dict[str, str] = {}
    not_carried: list[NotCarried] = []
    have_ci = bool(ci.stages)
    for suite in sorted(set(by_suite) | set(implicit_suites)):
        scalls = by_suite.get(suite, [])
        if not NAME.match(suite):
            for c in scalls:
                findings.append(Finding(c.file, c.line, c.col, "error", "adopt-suite",
                                        f"suite {suite!r} is not a valid stage name "
                                        "(letters, digits, '.', '_', '-')"))
            continue
        counts = Counter(c.backend for c in scalls)
        if suite in implicit_suites:
            counts[implicit_suites[suite]] += 1_000_000  # the location rule decides
        backend, _ = sorted(counts.items(), key=lambda kv: (-kv[1], kv[0]))[0]
        others = sorted(b for b in counts if b != backend)
        if others and suite in implicit_suites:
            for c in scalls:
                if c.backend != backend:
                    findings.append(Finding(c.file, c.line, c.col, "error", "adopt-suite-backend",
                                            f"suite {suite!r} is a {backend} stage registered "
                                            f"by location, but this one is {c.backend}"))
            others = []
        files = sorted({c.file for c in scalls if c.backend in (backend, *others)})
        gpu = any(b != "cpu" and BUILTIN_BACKENDS.get(b, {"gpu": True})["gpu"] for b in (backend, *others))
        stage: dict[str, Any] = {"backend": backend}
        from_ci = _job_for(ci.stages.get(suite), backend)
        stage["runs_on"] = (from_ci.runs_on if from_ci and from_ci.runs_on
                            else ["self-hosted", backend] if gpu else ["ubuntu-latest"])
        unknown_runner = from_ci is not None and not from_ci.runs_on \
            and from_ci.runs_on_unresolved is not None
        if unknown_runner:
            assert from_ci is not None and from_ci.runs_on_unresolved is not None
            # never a placeholder any runner of the backend would take: the stage waits
            # for its labels, and adoption stops until someone gives them
            expression, why = from_ci.runs_on_unresolved
            findings.append(Finding(from_ci.workflow, 0, 0, "error", "adopt-runs-on",
                                    f"stage {suite}: job {from_ci.job}'s runs-on {expression} "
                                    f"cannot be known without running code ({why}); set the "
                                    f"stage's runs_on and remove its disabled line"))
        if from_ci and from_ci.container:
            stage["container"] = _container(from_ci)
        if others:
            stage["variants"] = _backend_variants(suite, backend, others, stage["runs_on"],
                                                  ci.stages.get(suite), notes)
        elif from_ci and from_ci.runs_on_variants:
            stage["variants"] = _runner_variants(from_ci.runs_on_variants)
            notes.append(f"stage {suite}: {from_ci.workflow} job {from_ci.job} runs it on "
                         f"{len(from_ci.runs_on_variants)} runner classes (its matrix); one variant each")
        if from_ci:
            notes += from_ci.notes
            notes += [n for n in from_ci.lookup_notes if n not in notes]  # one fact, said once
        stage["command"] = _command(files if suite not in implicit_suites else [], scan_result)
        if from_ci is not None:
            stage["command"] = runner_command(stage["command"], from_ci, suite, files, notes)
            runner = from_ci.runner
            if runner is not None and backend in runner.batch_backends and not others:
                # the runner hands the shard's files to one pytest call: one session per job
                stage["command"] = "pytest"
                stage["batch"] = True
                notes.append(f"stage {suite}: {runner.script} runs a shard's files in one pytest "
                             f"call ({runner.batch_at}): batch = true"
                             + (f", extra_args {list(runner.batch_args)} (its options; some it adds "
                                "only on some runs)" if runner.batch_args else ""))
        if from_ci and from_ci.shards:
            stage["shards"] = from_ci.shards
        elif from_ci is not None and from_ci.partition_rule is not None:
            per_commit = [c.est_time for c in scalls if c.backend == backend and not c.disabled
                          and c.nightly == from_ci.nightly_run]
            stage.update(partition_keys(suite, from_ci, per_commit, notes))
        if gpu:
            stage["trusted_only"] = True
        if from_ci is None and have_ci:
            shown = ", ".join(w.rsplit("/", 1)[-1] for w in ci.test_workflows[:3]) \
                + (f" and {len(ci.test_workflows) - 3} more" if len(ci.test_workflows) > 3 else "")
            reason = (f"no job of the existing CI ({shown}) runs this stage; remove this line to "
                      "schedule it")
            stage["disabled"] = reason
            dormant[suite] = reason
        elif from_ci is not None:
            incomplete = incomplete_reason(from_ci, stage, unknown_runner)
            if incomplete is not None:
                stage["disabled"] = incomplete
                dormant[suite] = incomplete
        if from_ci is not None:
            if from_ci.env:
                stage["env"] = dict(sorted(from_ci.env.items()))
            stage.update(job_settings(from_ci, stage["command"], suite, notes))
            if stage.get("batch") and from_ci.runner is not None and from_ci.runner.batch_args:
                stage["extra_args"] = list(dict.fromkeys([*stage.get("extra_args", []),
                                                          *from_ci.runner.batch_args]))
            not_carried += unmapped(from_ci)
            not_carried += unsupported_job_keys(stage, f"{from_ci.workflow} job {from_ci.job}")
            lane_jobs[(suite, "")] = from_ci
            for variant in stage.get("variants", {}):
                job = from_ci if variant not in counts else _job_for(ci.stages.get(suite), variant)
                if job is not None and (variant not in counts or variant == backend
                                        or ALIASES.get((job.hw or "").lower(), (job.hw or "").lower())
                                        == variant):
                    lane_jobs[(suite, variant)] = job
            if from_ci.alternates and "variants" not in stage:
                stage["variants"] = _job_variants(suite, stage, from_ci, notes, not_carried,
                                                  lane_jobs)
        if unknown_runner:
            placeholder = stage.pop("runs_on")
            for variant in stage.get("variants", {}).values():
                if variant.get("runs_on") == placeholder:
                    del variant["runs_on"]
        stages[suite] = stage
    for suite, stage in stages.items():
        from_ci = ci.stages.get(suite)
        if from_ci is None:
            continue
        needs = [n for n in from_ci.needs if n in stages and n != suite]
        if needs:
            stage["needs"] = needs
        needs_on = {e: [n for n in v if n in stages and n != suite]
                    for e, v in sorted(from_ci.needs_on.items()) if e in PLAN_EVENTS}
        needs_on = {e: v for e, v in needs_on.items() if v != needs}
        if needs_on:
            stage["needs_on"] = needs_on
            notes.append(f"stage {suite}: its job waits for other stages on some events only: "
                         + "; ".join(f"{e}: {', '.join(v) or 'nothing'}" for e, v in needs_on.items())
                         + f" (else {', '.join(needs) or 'nothing'}): needs_on")
    if any(s.get("trusted_only") for s in stages.values()):
        notes.append("GPU stages get trusted_only = true (fork PRs need a run-ci-* label)")
    guessed = [n for n, s in stages.items() if n not in ci.stages and "disabled" not in s
               and s["backend"] != "cpu"]
    if guessed:
        notes.append(f"no runner labels found in the workflows for {', '.join(guessed)}: "
                     "runs_on = [\"self-hosted\", <backend>]; edit it to your runner labels")
    return stages, dormant, not_carried


def _container(ci: CIStage) -> Any:
    if not (ci.container_options or ci.container_volumes):
        return ci.container
    return {"image": ci.container,
            **({"options": ci.container_options} if ci.container_options else {}),
            **({"volumes": ci.container_volumes} if ci.container_volumes else {})}


#: the job settings a variant can hold (the rest are the stage's)
_VARIANT_KEYS = ("runs_on", "container", "env", "setup", "secrets", "fail_fast", "max_parallel",
                 "job_timeout_minutes", "file_timeout", "max_attempts", "extra_args", "python",
                 "uv", "checkouts")


def _job_variants(suite: str, stage: dict[str, Any], first: CIStage, notes: list[str],
                  not_carried: list[NotCarried],
                  lane_jobs: dict[tuple[str, str], CIStage]) -> dict[str, dict[str, Any]]:
    """Several jobs run one suite on the same hardware (SGLang's pr-test-amd.yml and
    pr-test-amd-rocm720.yml: another image, other events): one variant per job, the first
    job's settings the stage's, each other job's differing settings its variant's."""
    jobs = [first, *first.alternates]
    names = _variant_names(jobs)
    out: dict[str, dict[str, Any]] = {}
    for name, job in zip(names, jobs, strict=True):
        lane_jobs[(suite, name)] = job
        if job is first:
            out[name] = {}
            continue
        own: dict[str, Any] = {"runs_on": job.runs_on or stage["runs_on"]}
        if job.container:
            own["container"] = _container(job)
        if job.env:
            own["env"] = dict(sorted(job.env.items()))
        settings = job_settings(job, stage["command"], f"{suite} variant {name}", notes)
        own.update(settings)
        table = {k: v for k, v in own.items() if k in _VARIANT_KEYS and stage.get(k) != v}
        not_carried.extend(unsupported_job_keys(table, f"{job.workflow} job {job.job}"))
        if "container" not in own and "container" in stage:
            not_carried.append(NotCarried(f"{job.workflow} job {job.job}", "no container",
                                          f"variant {name} runs in the stage's container "
                                          f"{stage['container']!r}, as the other job does"))
        for key in sorted(set(settings) - set(_VARIANT_KEYS)):
            if settings[key] != stage.get(key):
                not_carried.append(NotCarried(f"{job.workflow} job {job.job}", f"{key} = {settings[key]!r}",
                                              f"{key} is the stage's ({stage.get(key)!r}, from "
                                              f"{first.workflow} job {first.job}); a variant cannot "
                                              "set it"))
        if job.shards != first.shards:
            not_carried.append(NotCarried(f"{job.workflow} job {job.job}", f"{job.shards or 1} shard(s)",
                                          f"sharding is the stage's ({first.shards or 1}, from "
                                          f"{first.workflow} job {first.job})"))
        not_carried.extend(unmapped(job))
        out[name] = table
    notes.append(f"stage {suite}: {len(jobs)} jobs run it on the same hardware "
                 f"({', '.join(f'{j.workflow} job {j.job}' for j in jobs)}); one variant each: "
                 f"{', '.join(names)}")
    return out


def _variant_names(jobs: list[CIStage]) -> list[str]:
    """Each job's name among them: what sets its job id apart (``-rocm720``), else what
    sets its workflow apart, else its workflow's name."""
    def apart(words: list[str]) -> list[str]:
        parts = [w.split("-") for w in words]
        common = 0
        while all(len(p) > common for p in parts) and len({p[common] for p in parts}) == 1:
            common += 1
        return ["-".join(p[common:]) for p in parts]

    stems = [j.workflow.rsplit("/", 1)[-1].rsplit(".", 1)[0] for j in jobs]
    by_job, by_workflow = apart([j.job for j in jobs]), apart(stems)
    names: list[str] = []
    for i, _ in enumerate(jobs):
        name = by_job[i] or by_workflow[i] or stems[i]
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", name).strip("-._")[:40] or f"job-{i + 1}"
        if not NAME.match(name) or name in names:
            name = f"job-{i + 1}"
        names.append(name)
    return names


def _command(files: list[str], scan_result: Scan) -> str:
    """How the stage's files run: as scripts when every one of them has a ``__main__``
    block that calls something (the way a per-file runner starts them); ``auto`` (each
    file by its own style) when script-only files sit beside files without a
    ``__main__`` block, since one command cannot run both; else pytest."""
    if files and all(f in scan_result.python_style for f in files):
        return "python"
    if any(scan_result.python_style.get(f) for f in files):
        return "auto"
    return "pytest"


def _job_for(ci: CIStage | None, backend: str) -> CIStage | None:
    """The stage job that runs ``backend``'s registrations (by its runner's ``--hw``)."""
    if ci is None:
        return None
    for job in (ci, *ci.by_hw.values()):
        if job.hw is not None and ALIASES.get(job.hw.lower(), job.hw.lower()) == backend:
            return job
    return ci


def _backend_variants(suite: str, backend: str, others: list[str], runs_on: list[str],
                      ci: CIStage | None, notes: list[str]) -> dict[str, dict[str, Any]]:
    """One suite name under several backends (SGLang registers ``base-a-test-1-gpu-small``
    for CUDA and NPU; its runner selects by ``--hw`` and suite): one variant per backend,
    the explicit opt-in the configuration asks for, each with its job's runner labels."""
    out: dict[str, dict[str, Any]] = {backend: {"runs_on": runs_on}}
    for other in others:
        job = _job_for(ci, other) if ci is not None else None
        if job is not None and (job.hw is None or ALIASES.get(job.hw.lower(), job.hw.lower()) != other):
            job = None
        if job is None or not job.runs_on:
            # no job runs this backend's registrations: never a placeholder any runner of
            # the backend would take
            out[other] = {"backend": other, "disabled": (
                f"no job of the existing CI runs {suite} for {other} with runner labels "
                "adoption could read; set runs_on and remove this line to schedule it")}
            continue
        out[other] = {"backend": other, "runs_on": job.runs_on}
        if job is not None and job is not _job_for(ci, backend):
            # its own job's set-up, never the other backend's install
            out[other]["setup"] = [*job.env_setup, *job.setup]
    notes.append(f"stage {suite}: registered for {', '.join([backend, *others])}; one variant per "
                 "backend (each runs only its backend's registrations)")
    return out


def _runner_variants(found: list[list[str]]) -> dict[str, dict[str, Any]]:
    """One variant per runner label list, named by the labels that set it apart."""
    out: dict[str, dict[str, Any]] = {}
    for i, labels in enumerate(found):
        own = [label for label in labels if not all(label in other for other in found)] or labels
        name = re.sub(r"[^A-Za-z0-9._-]+", "-", "-".join(own)).strip("-._")[:40]
        if not name or not NAME.match(name) or name in out:
            name = f"runner-{i + 1}"
        out[name] = {"runs_on": labels}
    return out


def runner_command(command: str, ci: CIStage, name: str, files: list[str],
                    notes: list[str]) -> str:
    """The command the project's runner starts each file with (SGLang's ``python3 FILE -f``,
    read from its code), for a stage whose files all run as scripts; a stage with files
    that have no ``__main__`` block keeps ``auto`` (the runner's command would run none
    of their tests), and says so."""
    runner = ci.runner
    if runner is None or runner.file_command is None:
        if runner is not None and len(runner.file_commands_seen) > 1 and command == "python":
            notes.append(f"stage {name}: {runner.script} starts files in more than one way "
                         f"({', '.join(runner.file_commands_seen)}); command = \"python\" adopted")
        return command
    if command == "python":
        if runner.file_command != "python":
            notes.append(f"stage {name}: command = {runner.file_command!r}, as {runner.script} "
                         f"starts each file ({runner.file_command_at})")
        return runner.file_command
    if command == "auto" and runner.file_command != "python":
        notes.append(f"stage {name}: {runner.script} starts every file as "
                     f"{runner.file_command!r} ({runner.file_command_at}), but some of its "
                     f"{len(files)} files have no __main__ block (they would run no test that "
                     "way); command = \"auto\" runs each by its own style")
    return command


def path_stages(calls: list[FoundCall], scan_result: Scan, ci: CIRead,
                stages: dict[str, dict[str, Any]], notes: list[str],
                lane_jobs: dict[tuple[str, str], CIStage]) -> list[NotCarried]:
    """A stage for each job that runs registered files by path (registrations with suite
    "", which no suite runs): the job's settings, ``files`` the paths its matrix names."""
    out: list[NotCarried] = []
    backend_of = {c.file: c.backend for c in calls if c.suite == ""}
    for job, files in ci.path_jobs:
        backends = Counter(backend_of[f] for f in files)
        backend = sorted(backends.items(), key=lambda kv: (-kv[1], kv[0]))[0][0]
        mine = sorted(f for f in files if backend_of[f] == backend)
        name = job.name
        if name in stages or not NAME.match(name):
            name = f"{re.sub(r'[^A-Za-z0-9._-]+', '-', name).strip('-._')[:60] or 'by-path'}-files"
        if name in stages:
            out.append(NotCarried(f"{job.workflow} job {job.job}", f"{len(mine)} file(s) by path",
                                  f"a stage named {name!r} exists already; add them to its files"))
            continue
        gpu = backend != "cpu" and BUILTIN_BACKENDS.get(backend, {"gpu": True})["gpu"]
        stage: dict[str, Any] = {"backend": backend,
                                 "runs_on": job.runs_on or (["self-hosted", backend] if gpu
                                                            else ["ubuntu-latest"])}
        if job.container:
            stage["container"] = _container(job)
        stage["command"] = _command(mine, scan_result)
        if gpu:
            stage["trusted_only"] = True
        if job.env:
            stage["env"] = dict(sorted(job.env.items()))
        stage.update(job_settings(job, stage["command"], name, notes))
        out.extend(unsupported_job_keys(stage, f"{job.workflow} job {job.job}"))
        stage["files"] = mine
        # the job runs each file by path whatever its nightly flag: the stage takes their side
        sides = {c.nightly for c in calls if c.suite == "" and c.file in mine}
        if len(sides) == 1:
            stage["registrations"] = "nightly" if sides.pop() else "per-commit"
        stages[name] = stage
        lane_jobs[(name, "")] = job
        out.extend(unmapped(job))
        off = sorted({c.disabled or "" for c in calls if c.suite == "" and c.file in mine and c.disabled})
        n_off = sum(1 for f in mine if any(c.disabled for c in calls if c.file == f and c.suite == ""))
        if n_off:
            out.append(NotCarried(f"{job.workflow} job {job.job}",
                                  f"{n_off} of its {len(mine)} file(s) register disabled "
                                  f"({'; '.join(repr(r) for r in off[:3])}), and the job runs them by "
                                  "path anyway",
                                  "testfleet runs no disabled registration on any stage: remove "
                                  "disabled= from the file to run it there"))
        notes.append(f"stage {name}: {job.workflow} job {job.job} runs {len(mine)} registered "
                     "file(s) with suite \"\" by path (its matrix names them); they are the stage's "
                     "files")
        for other in sorted(set(backends) - {backend}):
            out.append(NotCarried(f"{job.workflow} job {job.job}",
                                  f"{backends[other]} {other} file(s) by path",
                                  f"the stage is a {backend} one; a stage runs one backend's files"))
    return out
