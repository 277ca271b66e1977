#!/usr/bin/env bash
# The main job on the example project, end to end on this machine, as CI would run it:
# validate, list, plan a fork PR, run every job of the plan (CPU jobs really run; GPU
# stages are planned only), gate training metrics (cold start, pass, a drifted run
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

step "testfleet run: every job of that plan, wave by wave, from the same plan file"
mkdir -p junit
for job in $(python3 -c 'import json,sys; p=json.load(open("plan.json")); print(" ".join(j["id"] for j in sorted(p["jobs"], key=lambda j: (j["wave"], j["id"]))))'); do
  testfleet run --plan plan.json --job "$job" --junit "junit/$job.xml" --display plain
done

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
testfleet gate history --test tests/unit/test_train_curve_loss.py --metric train/loss --runs 2

step "testfleet durations show: measured durations beside the literals"
testfleet durations show --stage stage-a-cpu

step "testfleet report: coverage, holes, disabled ledger, balance, gates"
testfleet report --plan plan.json
testfleet report --plan plan.json --format html --output report.html

printf '\nDone. Plan, JUnit files and report.html are in %s\n' "$work"
