#!/usr/bin/env bash
# The main job on the example project, end to end on this machine, as CI would run it:
# validate, list, plan a fork PR, run every CPU job of the plan (GPU jobs are planned
# only, in a nightly plan too), gate training metrics (cold start, pass, a drifted run
# caught), and write the coverage report. Works in a scratch copy, so the repository
# stays clean; history is the embedded SQLite database, no server needed.
set -euo pipefail

here="$(cd "$(dirname "$0")" && pwd)"
work="${TESTFLEET_DEMO_DIR:-$(mktemp -d)}"
mkdir -p "$work"
cp -R "$here/." "$work/"
rm -rf "$work/.testfleet"
cd "$work"
export TESTFLEET_DATABASE_URL="${TESTFLEET_DATABASE_URL:-}"
[ -n "$TESTFLEET_DATABASE_URL" ] || unset TESTFLEET_DATABASE_URL

step() { printf '\n\033[1m== %s\033[0m\n' "$*"; }

step "testfleet check: config and every registration (warnings name the coverage holes)"
testfleet check

step "testfleet list --disabled: the registrations that are switched off, each with its own reason"
testfleet list --disabled

step "testfleet plan: a pull request from a fork, no labels"
testfleet plan --event pull_request --fork --plan-file plan.json

step "testfleet run: every CPU job of that plan, wave by wave, from the same plan file"
mkdir -p junit
for job in $(python3 -c 'import json,sys; p=json.load(open("plan.json")); print(" ".join(j["id"] for j in sorted(p["jobs"], key=lambda j: (j["wave"], j["id"])) if j["backend"] == "cpu"))'); do
  testfleet run --plan plan.json --job "$job" --junit "junit/$job.xml" --display plain
done

step "testfleet plan: the nightly run, whose GPU jobs need self-hosted runners (planned here, not run)"
testfleet plan --event schedule --cadence nightly --plan-file plan-nightly.json >/dev/null
echo "wrote plan-nightly.json"

step "metric gate: nightly runs write trusted baselines (cold start, then a pass)"
testfleet run --stage stage-b-cpu --cadence nightly --display plain
testfleet run --stage stage-b-cpu --cadence nightly --display plain

step "metric gate: a drifted run (FLEET_DRIFT=0.05) on a PR is caught and kept out of the baseline"
FLEET_DRIFT=0.05 testfleet run --file tests/unit/test_train_curve_loss.py --display plain || true

step "metric gate: the same drift with enforcement on fails the test"
if FLEET_DRIFT=0.05 TESTFLEET_GATE_ENFORCE=1 testfleet run --file tests/unit/test_train_curve_loss.py --display plain; then
  echo "expected the enforced gate to fail the drifted run" >&2
  exit 1
fi

step "testfleet gate history: the trusted history of the gated loss"
testfleet gate history --file tests/unit/test_train_curve_loss.py --metric train/loss --runs 2

step "testfleet durations show: measured durations beside the literals"
testfleet durations show --stage stage-a-cpu

step "testfleet report: coverage, holes, disabled ledger, balance, gates"
testfleet report --plan plan.json
testfleet report --plan plan.json --format html --output report.html

step "Summary"
python3 - "$work" <<'PY'
import glob, json, sys
import xml.etree.ElementTree as ET

work = sys.argv[1]
pr = json.load(open("plan.json"))
nightly = json.load(open("plan-nightly.json"))
cases = failed = 0
for path in glob.glob("junit/*.xml"):
    for case in ET.parse(path).getroot().iter("testcase"):
        cases += 1
        failed += any(c.tag in ("failure", "error") for c in case)
cpu_jobs = [j for j in pr["jobs"] if j["backend"] == "cpu"]
files = sum(len(j["tests"]) for j in cpu_jobs)
print(f"Ran here (CPU): {len(cpu_jobs)} job(s) of the fork-PR plan, {files} test file(s), "
      f"{cases} JUnit testcase(s), {failed} failed; then the metric gate's nightly and drift runs.")
gpu = [j for j in nightly["jobs"] if j["backend"] != "cpu"]
print(f"Planned, not run here (needs GPU runners): {len(gpu)} GPU job(s) in the nightly plan:")
for stage in sorted({j["stage"] for j in gpu}):
    jobs = [j for j in gpu if j["stage"] == stage]
    print(f"  - {stage}: {len(jobs)} shard(s), {sum(len(j['tests']) for j in jobs)} file(s) "
          f"on runners {', '.join(jobs[0]['runs_on'])}")
for stage in nightly["stages"]:
    if stage["status"] == "dormant":
        print(f"  - {stage['name']}: dormant, nothing scheduled ({stage['reason']})")
skipped_gpu = [s for s in pr["skipped"] if s["backend"] != "cpu"]
print(f"The fork PR itself scheduled no GPU work: {len(skipped_gpu)} GPU registration(s) "
      "skipped, each with its reason in plan.json (a run-ci-<label> label selects them).")
print(f"Report: {work}/report.html (open it in a browser); plans: plan.json, plan-nightly.json; "
      "JUnit: junit/; history: .testfleet/history.db")
PY
