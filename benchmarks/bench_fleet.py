"""Fleet benchmark (#40): static shards against queue mode under runner faults.

    python benchmarks/bench_fleet.py                       # 200 seeds, about a minute
    python benchmarks/bench_fleet.py --seeds 50 --pg postgresql://...   # + claim overhead

Lanes shaped like SGLang's and miles' CI trees (file counts, ``est_time`` distributions
and shard counts per lane: see ``LANES``; synthetic files, not the projects' own) are
planned by the real planner (``make_plan`` on a project whose stages say ``execution =
"queue"``): the static split is the plan's jobs, the queue's claim order is
``testfleet.queue.lane.lane_items`` (the real queue order). Each seed draws true
durations: ``est_time`` x file error (log-normal, sigma 0.35, how wrong the estimate is) x
run noise (log-normal, sigma 0.10), and replays four fault models on both:

* ``none``: every runner up at t = 0;
* ``lost at start``: one runner of the lane never starts (a start-up failure);
* ``killed mid-file``: one runner is killed at a uniform time in the first half of the
  run, in the middle of a file;
* ``late``: every runner starts after an exponential delay (mean 10 min).

Static shards: a runner runs its shard's files in plan order. A shard whose runner is lost
leaves its unrun files *lost* for the CI run; the makespan shown is that of the CI engine's
re-run of the failed job, started when the run's other jobs end (the whole shard runs
again; its first run's work is *killed work*). Queue mode: a free runner claims the next
file in queue order (``--claim-overhead`` seconds per claim); a killed runner's file comes
back when its lease expires (``--lease`` seconds after the last heartbeat) and is run by
another runner; killed work is the part of that file the killed runner had run. The lower
bound LB = max(longest file, total / shards) of that seed's true durations, with every
runner up at t = 0, is the same for both modes. Percentiles over every (lane, seed).

With ``--pg URL`` (a role allowed to create a schema), the claim overhead is measured on
the real queue code against that server: enqueue, then claim + complete per file, each its
own transaction, by 1 and by 4 concurrent runners, in a fresh schema dropped afterwards.
"""

from __future__ import annotations

import argparse
import heapq
import math
import random
import statistics
import sys
import tempfile
import time
from dataclasses import dataclass, replace
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "src"))

from testfleet.config import load_project
from testfleet.planning import make_plan
from testfleet.planning.policy import Trigger
from testfleet.planning.request import PlanRequest
from testfleet.planning.sharding import lower_bound
from testfleet.queue.lane import lane_items
from testfleet.reconcile.compare import reconcile
from testfleet.reconcile.rescue import rescue_wave
from testfleet.reconcile.status import FileStatus, JobStatus, RescueRef
from testfleet.registry.model import Registration


@dataclass(frozen=True)
class LaneShape:
    name: str
    files: int
    shards: int
    median: float  # seconds, est_time median
    sigma: float  # log-normal spread of est_time over the lane's files
    heavy: float  # share of files that are end-to-end (x8 longer)


# Shapes of SGLang's (per-commit GPU suites, AMD) and miles' (CPU unit, Megatron/FSDP
# end-to-end) lanes: file counts, shard counts and est_time spreads as in their trees'
# registrations; the files are synthetic.
LANES = [
    LaneShape("sglang-1-gpu", 180, 10, 140.0, 0.8, 0.05),
    LaneShape("sglang-2-gpu", 45, 4, 220.0, 0.7, 0.10),
    LaneShape("sglang-4-gpu", 22, 2, 380.0, 0.6, 0.10),
    LaneShape("sglang-8-gpu-h200", 26, 3, 480.0, 0.6, 0.15),
    LaneShape("sglang-amd-1-gpu", 120, 8, 160.0, 0.8, 0.05),
    LaneShape("miles-unit-cpu", 250, 2, 12.0, 0.9, 0.02),
    LaneShape("miles-e2e-megatron", 40, 4, 600.0, 0.5, 0.20),
    LaneShape("miles-e2e-fsdp", 30, 3, 450.0, 0.5, 0.20),
]
FAULTS = ("none", "lost at start", "killed mid-file", "late")


def lane_estimates(shape: LaneShape, rng: random.Random) -> list[float]:
    out = []
    for _ in range(shape.files):
        est = shape.median * math.exp(rng.gauss(0, shape.sigma))
        if rng.random() < shape.heavy:
            est *= 8
        out.append(float(max(1, round(est))))
    return out


def plan_lanes(seed: int, execution: str = "queue"
               ) -> dict[str, tuple[list[list[str]], list[str], dict[str, float]]]:
    """lane -> (static shards' files in plan order, queue claim order, estimates), from the
    real planner on a project whose stages are queue lanes."""
    return _plan_lanes(seed, execution)[0]


def _plan_lanes(seed: int, execution: str) -> tuple[
        dict[str, tuple[list[list[str]], list[str], dict[str, float]]], Any]:
    rng = random.Random(seed)
    config = ['roots = ["tests"]\n']
    regs: list[Registration] = []
    ests: dict[str, dict[str, float]] = {}
    for shape in LANES:
        config.append(f'[stages.{shape.name}]\nbackend = "cpu"\nshards = {shape.shards}\n'
                      f'execution = "{execution}"\n')
        ests[shape.name] = {}
        for i, est in enumerate(lane_estimates(shape, rng)):
            file = f"tests/{shape.name}/test_{i:03d}.py"
            regs.append(Registration(file, "cpu", shape.name, est))
            ests[shape.name][file] = est
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        (root / "tests").mkdir()
        (root / "testfleet.toml").write_text("\n".join(config))
        project = load_project(root)
        plan = make_plan(project, regs, PlanRequest(trigger=Trigger()))
    out = {}
    for shape in LANES:
        jobs = sorted((j for j in plan.jobs if j.lane == shape.name), key=lambda j: j.shard)
        assert jobs and all((j.queue is not None) == (execution == "queue") for j in jobs)
        shards = [[t.file for t in j.tests] for j in jobs]
        order = [i.file for i in lane_items(plan, shape.name)] if execution == "queue" else []
        out[shape.name] = (shards, order, ests[shape.name])
    return out, plan


def _status(plan: Any, job: Any, rescue: Any = None, files: Any = None) -> JobStatus:
    tests = files if files is not None else [t.file for t in job.tests]
    return JobStatus(
        plan_digest=plan.digest, job_id=job.id if rescue is None else rescue.id,
        stage=job.stage, variant=job.variant, shard=job.shard, shards=job.shards, run_id="b",
        ci_run_id="1", empty=False, complete=True, exit_status=0,
        files=tuple(FileStatus(f, job.lane, "PASSED", 1) for f in tests),
        jobs=(job.id,) if rescue is None else (),
        rescue=None if rescue is None else RescueRef("", job.id))


def rescue_run(plan: Any, lane: str, true: dict[str, float], fault: str, victim: int,
               kill_at: float, starts: list[float], others: list[JobStatus]) -> Outcome:
    """Static shards with the rescue wave, through the real code: the victim's runner is
    gone (lost at start, or killed: a dead runner uploads no status), the first reconcile's
    :func:`rescue_wave` picks its files, a rescue job on the same runner class runs them
    once the other jobs ended, and the reconcile after it counts what is still unrun."""
    jobs = sorted((j for j in plan.jobs if j.lane == lane), key=lambda j: j.shard)
    loads = [sum(true[t.file] for t in j.tests) for j in jobs]
    ends = [starts[i] + loads[i] for i in range(len(jobs))]
    if fault in ("none", "late"):
        return Outcome(max(ends), 0, 0.0)
    mine = [_status(plan, j) for i, j in enumerate(jobs) if i != victim]
    wave = rescue_wave(plan, [*others, *mine])
    rescued = [replace(_status(plan, plan.job(r.origin), r, r.files),
                       rescue=RescueRef(wave.digest, r.origin))
               for r in wave.jobs if r.lane == lane]
    result = reconcile(plan, [*others, *mine, *rescued], rescue=wave)
    lost = sum(1 for p in (*result.missing, *result.not_run) if p.stage == lane)
    others_end = max((e for i, e in enumerate(ends) if i != victim), default=0.0)
    load = sum(true[f] for r in wave.jobs if r.lane == lane for f in r.files)
    killed = (min(kill_at, ends[victim]) - starts[victim]) if fault == "killed mid-file" else 0.0
    end_of_kill = kill_at if fault == "killed mid-file" else 0.0
    return Outcome(max(max(others_end, end_of_kill) + load, others_end), lost, killed)


@dataclass
class Outcome:
    makespan: float
    lost: int  # planned files left unrun in the CI run
    killed_work: float  # runner-seconds spent on work that had to be redone


def static_run(shards: list[list[str]], true: dict[str, float], fault: str, victim: int,
               kill_at: float, starts: list[float]) -> Outcome:
    loads = [sum(true[f] for f in s) for s in shards]
    ends = [starts[i] + loads[i] for i in range(len(shards))]
    if fault in ("none", "late"):
        return Outcome(max(ends), 0, 0.0)
    others_end = max((e for i, e in enumerate(ends) if i != victim), default=0.0)
    if fault == "lost at start":
        # the failed job is re-run once the run's other jobs ended
        return Outcome(others_end + loads[victim], len(shards[victim]), 0.0)
    done, t = 0, starts[victim]
    for f in shards[victim]:
        if t + true[f] > kill_at:
            break
        t += true[f]
        done += 1
    if done == len(shards[victim]):  # it finished before the kill
        return Outcome(max(ends), 0, 0.0)
    rerun_end = max(others_end, kill_at) + loads[victim]
    return Outcome(rerun_end, len(shards[victim]) - done, kill_at - starts[victim])


def queue_run(order: list[str], true: dict[str, float], runners: int, fault: str,
              victim: int, kill_at: float, starts: list[float], lease: float,
              overhead: float) -> Outcome:
    """List scheduling in queue order over runners free at ``starts``; the faults as the
    queue meets them (a lost runner never claims; a killed one's file returns when its
    lease expires, a killed idle runner just stops)."""
    free = [(starts[i], i) for i in range(runners) if not (fault == "lost at start"
                                                           and i == victim)]
    heapq.heapify(free)
    queue = list(order)
    returned: list[tuple[float, str]] = []  # (time it is claimable again, file)
    end = 0.0
    killed_work = 0.0
    killing = fault == "killed mid-file"
    while queue or returned:
        t, r = heapq.heappop(free)
        if killing and r == victim and t > kill_at:
            continue  # killed between files: it claims nothing more
        if returned and (not queue or returned[0][0] <= t):
            back, file = heapq.heappop(returned)
            t = max(t, back)
        else:
            file = queue.pop(0)
        t += overhead
        finish = t + true[file]
        if killing and r == victim and t <= kill_at < finish:
            killed_work += kill_at - t
            heapq.heappush(returned, (kill_at + lease, file))
            continue  # this runner is gone
        end = max(end, finish)
        heapq.heappush(free, (finish, r))
    return Outcome(end, 0, killed_work)


def pct(values: list[float], p: float) -> float:
    ordered = sorted(values)
    k = (len(ordered) - 1) * p
    lo, hi = math.floor(k), math.ceil(k)
    return ordered[lo] + (ordered[hi] - ordered[lo]) * (k - lo)


def simulate(seeds: int, lease: float, overhead: float) -> dict[str, dict[str, list[float]]]:
    """fault -> metric -> values over (lane, seed)."""
    out: dict[str, dict[str, list[float]]] = {f: {} for f in FAULTS}
    shard_plans: dict[int, Any] = {}
    for seed in range(seeds):
        lanes = plan_lanes(1000 + seed % 10)  # ten planned trees; durations vary per seed
        static_plan = shard_plans.setdefault(seed % 10, _plan_lanes(1000 + seed % 10, "shards")[1])
        everyone = [_status(static_plan, j) for j in static_plan.jobs]
        rng = random.Random(seed)
        for shape in LANES:
            shards, order, ests = lanes[shape.name]
            error = {f: math.exp(rng.gauss(0, 0.35)) for f in ests}
            true = {f: ests[f] * error[f] * math.exp(rng.gauss(0, 0.10)) for f in ests}
            n = len(shards)
            lb = lower_bound(list(true.values()), n)
            for fault in FAULTS:
                starts = ([rng.expovariate(1 / 600) for _ in range(n)] if fault == "late"
                          else [0.0] * n)
                victim = rng.randrange(n)
                kill_at = rng.uniform(0, 0.5) * lb  # within the first half of the run
                st = static_run(shards, true, fault, victim, kill_at, starts)
                qu = queue_run(order, true, n, fault, victim, kill_at, starts, lease, overhead)
                rs = rescue_run(static_plan, shape.name, true, fault, victim, kill_at, starts,
                                [s for s in everyone if s.stage != shape.name])
                m = out[fault]
                for key, value in (("static", st.makespan / lb), ("queue", qu.makespan / lb),
                                   ("rescue", rs.makespan / lb), ("rescue_lost", rs.lost),
                                   ("static_lost", st.lost), ("queue_lost", qu.lost),
                                   ("static_killed", st.killed_work / 60),
                                   ("queue_killed", qu.killed_work / 60)):
                    m.setdefault(key, []).append(float(value))
    return out


def claim_overhead(url: str, files: int = 300) -> dict[int, float]:
    """ms per file (claim + complete) on the real queue code, by 1 and 4 runners."""
    import threading
    import uuid
    from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

    import psycopg

    from testfleet.queue.worker import QueueDb, QueueSettings
    from testfleet.runner.model import Attempt, FileResult, RunItem
    from testfleet.runner.model import Outcome as RunOutcome
    from testfleet.store import connect

    schema = f"bench_{uuid.uuid4().hex[:12]}"
    parts = urlsplit(url)
    query = [(k, v) for k, v in parse_qsl(parts.query) if k != "options"]
    scoped = urlunsplit(parts._replace(query=urlencode(
        [*query, ("options", f"-csearch_path={schema}")])))
    results: dict[int, float] = {}
    with psycopg.connect(url, autocommit=True) as admin:
        admin.execute(f'CREATE SCHEMA "{schema}"')
        try:
            with tempfile.TemporaryDirectory() as tmp:
                (Path(tmp) / "testfleet.toml").write_text('roots = ["tests"]\n')
                project = load_project(Path(tmp))
                with connect(project, scoped) as store:
                    store.migrate()
                    for runners in (1, 4):
                        digest = f"sha256:{uuid.uuid4().hex}"
                        items = [(f"tests/test_{i:04d}.py", float(files - i))
                                 for i in range(files)]

                        def work(name: str, digest: str = digest,
                                 items: list[tuple[str, float]] = items) -> None:
                            db = QueueDb(store, QueueSettings(digest, "lane", 120.0, 1, False,
                                                              name),
                                         lambda _m: None, 10.0, lambda: False)
                            db.enqueue(items)
                            while True:
                                action, claim = db.claim()
                                if action == "wait":
                                    time.sleep(0.01)
                                    continue
                                if action != "run" or claim is None:
                                    return
                                res = FileResult(RunItem(claim.file, 1.0), 10.0,
                                                 RunOutcome.PASSED,
                                                 [Attempt(1, RunOutcome.PASSED, 1.0, 0, "")])
                                db.complete(claim, res, False)

                        start = time.perf_counter()
                        threads = [threading.Thread(target=work, args=(f"r{i}",))
                                   for i in range(runners)]
                        for th in threads:
                            th.start()
                        for th in threads:
                            th.join()
                        # wall time per file; per runner it is this x runners
                        results[runners] = (time.perf_counter() - start) / files * 1000
        finally:
            admin.execute(f'DROP SCHEMA "{schema}" CASCADE')
    return results


def main() -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--seeds", type=int, default=200)
    ap.add_argument("--lease", type=float, default=120.0)
    ap.add_argument("--claim-overhead", type=float, default=0.05,
                    help="seconds per claim in the simulation (default: the 50 ms target)")
    ap.add_argument("--pg", default=None, metavar="URL",
                    help="measure claim overhead on this PostgreSQL server")
    args = ap.parse_args()
    t0 = time.perf_counter()
    data = simulate(args.seeds, args.lease, args.claim_overhead)
    print(f"{args.seeds} seeds x {len(LANES)} lanes, lease {args.lease:g}s, claim overhead "
          f"{args.claim_overhead * 1000:g} ms, {time.perf_counter() - t0:.1f}s\n")
    print("| fault | static / LB p50 | static+rescue / LB p50 | queue / LB p50 | static / LB p90 "
          "| queue / LB p90 | files lost per lane (mean): static / static+rescue (max) / queue | "
          "GPU-min on killed work per lane (mean): static / queue |")
    print("|---|---:|---:|---:|---:|---:|---:|---:|")
    for fault in FAULTS:
        m = data[fault]
        print(f"| {fault} | {pct(m['static'], .5):.3f} | {pct(m['rescue'], .5):.3f} | "
              f"{pct(m['queue'], .5):.3f} | "
              f"{pct(m['static'], .9):.3f} | {pct(m['queue'], .9):.3f} | "
              f"{statistics.mean(m['static_lost']):.1f} / {max(m['rescue_lost']):.0f} / "
              f"{statistics.mean(m['queue_lost']):.1f} | "
              f"{statistics.mean(m['static_killed']):.1f} / "
              f"{statistics.mean(m['queue_killed']):.1f} |")
    print()
    for shape in LANES:
        print(f"- {shape.name}: {shape.files} files, {shape.shards} shards, est_time median "
              f"{shape.median:g}s (sigma {shape.sigma:g}, {shape.heavy:.0%} x8 end-to-end)")
    if args.pg:
        ms = claim_overhead(args.pg)
        print(f"\nclaim + complete per file (real queue code, PostgreSQL): {ms[1]:.1f} ms by one "
              f"runner; {ms[4]:.1f} ms wall per file with 4 concurrent runners "
              f"({ms[4] * 4:.1f} ms per claim per runner)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
