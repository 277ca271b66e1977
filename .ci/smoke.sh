#!/usr/bin/env bash
# Smoke pass on every other supported Python minor version present on this machine
# (PATH's python3.N, pyenv's versions, /usr/bin and /usr/local/bin): for each, a fresh
# virtual environment, `pip install .`, then the example project's check, list, plan
# and report. Any failing command or any traceback fails the pass.
#
# Usage:  bash .ci/smoke.sh           run the pass (after the test suite, from .ci/run)
#         bash .ci/smoke.sh --list    only print the interpreters it would use
#
# Supported = at least requires-python's minimum; the default python3's own minor is
# left out (the whole test suite ran on it). An interpreter that cannot make a venv
# (Debian without python3.N-venv) or a package index that cannot be reached is a
# reason outside the project: it is reported and skipped, not failed.
set -uo pipefail
cd "$(dirname "$0")/.." || exit 1
repo="$(pwd)"

minor_of() { "$1" -c 'import sys; print("%d.%d" % sys.version_info[:2])' 2>/dev/null; }

default_minor="$(minor_of python3)"
min_minor="$(sed -n 's/^requires-python *= *">= *3\.\([0-9]*\).*/\1/p' pyproject.toml | head -n 1)"
min_minor="${min_minor:-10}"

candidates=()
for name in python3.{10..19}; do
  path="$(command -v "$name" 2>/dev/null)" && candidates+=("$path")
done
pyenv_root="${PYENV_ROOT:-$HOME/.pyenv}"
for path in "$pyenv_root"/versions/3.*/bin/python /usr/bin/python3.* /usr/local/bin/python3.*; do
  [ -x "$path" ] && [ ! -d "$path" ] && candidates+=("$path")
done

chosen=()
seen=" $default_minor "
for path in "${candidates[@]}"; do
  minor="$(minor_of "$path")" || continue
  [ -n "$minor" ] || continue
  [ "${minor%%.*}" = 3 ] && [ "${minor#3.}" -ge "$min_minor" ] 2>/dev/null || continue
  case "$seen" in *" $minor "*) continue ;; esac
  seen="$seen$minor "
  chosen+=("$minor=$path")
done

if [ "${1:-}" = "--list" ]; then
  for item in "${chosen[@]}"; do echo "$item"; done
  exit 0
fi
if [ "${#chosen[@]}" -eq 0 ]; then
  echo "no other supported Python minor version on this machine (default: $default_minor)"
  exit 0
fi

network_error='NewConnectionError|ConnectTimeout|ReadTimeout|Temporary failure in name resolution|Name or service not known|Network is unreachable|Connection refused|ProxyError'
failed=()
for item in "${chosen[@]}"; do
  minor="${item%%=*}"
  py="${item#*=}"
  echo "== smoke on Python $minor ($py)"
  tmp="$(mktemp -d)"
  if ! "$py" -m venv "$tmp/venv" >"$tmp/venv.log" 2>&1; then
    echo "skipped: $py cannot create a virtual environment (outside the project):"
    tail -n 3 "$tmp/venv.log"
    rm -rf "$tmp"
    continue
  fi
  if ! "$tmp/venv/bin/python" -m pip install -q --disable-pip-version-check "$repo" >"$tmp/pip.log" 2>&1; then
    if grep -qE "$network_error" "$tmp/pip.log"; then
      echo "skipped: the package index cannot be reached (outside the project):"
      grep -E "$network_error" "$tmp/pip.log" | tail -n 2
      rm -rf "$tmp"
      continue
    fi
    echo "FAILED: pip install on Python $minor:"
    grep -v "is ignored: it is neither a file nor a directory" "$tmp/pip.log" | tail -n 30
    failed+=("$minor: install")
    rm -rf "$tmp"
    continue
  fi
  cp -R examples/fleet/. "$tmp/fleet/"
  rm -rf "$tmp/fleet/.testfleet"
  for cmd in "check" "list" "plan --event pull_request --fork --plan-file plan.json" "report --plan plan.json"; do
    # shellcheck disable=SC2086  # the command's words are split on purpose
    (cd "$tmp/fleet" && env -u TESTFLEET_DATABASE_URL NO_COLOR=1 "$tmp/venv/bin/testfleet" $cmd) >"$tmp/out.log" 2>&1
    rc=$?
    if [ "$rc" -ne 0 ] || grep -q "Traceback" "$tmp/out.log"; then
      echo "FAILED: testfleet $cmd on Python $minor (exit status $rc):"
      tail -n 40 "$tmp/out.log"
      failed+=("$minor: $cmd")
    else
      echo "ok: testfleet $cmd"
    fi
  done
  rm -rf "$tmp"
done

if [ "${#failed[@]}" -gt 0 ]; then
  echo "smoke pass FAILED: ${failed[*]}"
  exit 1
fi
echo "smoke pass ok: ${chosen[*]%%=*} (the default, $default_minor, ran the test suite)"
