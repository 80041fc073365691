#!/usr/bin/env bash
# Builds kernhub with warnings as errors and runs the whole test suite.
#   tests/run.sh              the normal build in build/
#   tests/run.sh --sanitize   an AddressSanitizer + UBSan build in build-asan/
#   tests/run.sh --tsan       a ThreadSanitizer build in build-tsan/ of only
#                             what the thread tests need, running only them
# It ends with how many tests were skipped and why and a table of wall time
# per phase, and exits with ctest's status.
set -euo pipefail
cd "$(dirname "$0")/.."

# Wall time per phase, printed as one table when the script ends (also on
# failure). A report, not an assertion: nothing fails on time. When
# KERNHUB_PHASE_TIMES names a file, each row is appended to it too, so that
# .ci/run can print one table for all its passes.
pass=normal
phase_rows=()
phase_started=0
phase_name=""
now() { date +%s.%N; }
phase() {
  phase_end
  phase_name="$1"
  phase_started=$(now)
}
# phase_end [NOTE]: closes the open phase as one row, NOTE appended.
phase_end() {
  [ -n "$phase_name" ] || return 0
  local row
  row=$(printf '%-8s %-13s %8s s%s' "$pass" "$phase_name" \
    "$(awk -v a="$phase_started" -v b="$(now)" 'BEGIN { printf "%.1f", b - a }')" "${1:-}")
  phase_rows+=("$row")
  if [ -n "${KERNHUB_PHASE_TIMES:-}" ]; then
    echo "$row" >>"$KERNHUB_PHASE_TIMES"
  fi
  phase_name=""
}
print_phases() {
  local status=$?
  phase_end "$([ "$status" -eq 0 ] || echo " (failed, exit $status)")"
  [ ${#phase_rows[@]} -gt 0 ] || return 0
  echo "tests/run.sh: wall time per phase"
  printf '  %s\n' "${phase_rows[@]}"
}
trap print_phases EXIT

dir=build
# KERNHUB_TEST_HOOKS: the crash points the durability tests kill the CLI at.
flags=(-DKERNHUB_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKERNHUB_TEST_HOOKS=ON)

# ThreadSanitizer: the library and tests/threads only (docs/ARCHITECTURE.md,
# "Threads"). The loopback hub is stdlib Python, so no virtual environment.
if [ "${1:-}" = "--tsan" ]; then
  dir=build-tsan
  pass=tsan
  phase dependencies
  .ci/install-deps
  phase configure
  cmake -S . -B "$dir" -G Ninja "${flags[@]}" -DKERNHUB_TSAN=ON >/dev/null
  phase build
  cmake --build "$dir" -j"$(nproc)" --target test_threads
  # halt_on_error: the first race fails the test that raced.
  export TSAN_OPTIONS="halt_on_error=1:second_deadlock_stack=1"
  phase ctest
  # By design this pass runs one label; it says what that leaves out.
  echo "tests/run.sh: the tsan pass runs only the label threads (the ASan + UBSan pass runs every label)"
  status=0
  ctest --test-dir "$dir" -L threads -j"$(nproc)" --output-on-failure || status=$?
  exit "$status"
fi
# Labels a pass leaves out (a ctest -LE regular expression). A label goes
# here only when its tests cannot run under that pass's instrumentation (for
# example, ones that load a third-party runtime built without it), with the
# reason next to it; the pass prints which tests it left out. Today the
# ASan + UBSan pass runs every test.
left_out=()
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  pass=asan
  left_out=()  # none: every label runs under ASan + UBSan
  flags+=(-DKERNHUB_SANITIZE=ON)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

phase dependencies
.ci/install-deps
# Test-only Python peers (huggingface_hub for the cache interop test) live in
# virtual environments inside the build folder. venv DIR REQUIREMENTS makes
# one and installs REQUIREMENTS (every version pinned) into it, and records
# what it installed: a later run whose requirements file and interpreter are
# the same starts no pip at all.
venv() {
  local env=$1 requirements=$2 want
  want="$(python3 -c 'import sys; print(sys.version)' | head -1) $(sha256sum "$requirements" | cut -d' ' -f1)"
  if [ -x "$env/bin/python" ] && [ "$(cat "$env/kernhub-requirements" 2>/dev/null)" = "$want" ]; then
    return 0
  fi
  # No stamp while pip changes the venv: an interrupted install is redone.
  rm -f "$env/kernhub-requirements"
  [ -x "$env/bin/python" ] || python3 -m venv "$env"
  "$env/bin/python" -m pip install -q --disable-pip-version-check -r "$requirements"
  echo "$want" >"$env/kernhub-requirements.tmp"
  mv "$env/kernhub-requirements.tmp" "$env/kernhub-requirements"
}
venv "$dir/venv" tests/requirements.txt
# The older kernels release (its own kernels.lock format) needs a venv of its own.
venv "$dir/venv-kernels-legacy" tests/requirements-kernels-legacy.txt

phase configure
cmake -S . -B "$dir" -G Ninja "${flags[@]}" -DKERNHUB_TEST_PYTHON="$PWD/$dir/venv/bin/python" \
  -DKERNHUB_TEST_PYTHON_KERNELS_LEGACY="$PWD/$dir/venv-kernels-legacy/bin/python" >/dev/null
phase build
cmake --build "$dir" -j"$(nproc)"
phase ctest
# A test is skipped only when it could not start here (its executable exits
# 77 before checking anything, printing "SKIPPED: <reason>"). Say how many
# and why, then exit with ctest's status.
junit="$PWD/$dir/ctest-junit.xml"
rm -f "$junit"
status=0
exclude=()
if [ ${#left_out[@]} -gt 0 ]; then
  regex="^($(IFS='|'; echo "${left_out[*]}"))\$"
  exclude=(-LE "$regex")
  echo "tests/run.sh: the $pass pass leaves out the labels ${left_out[*]}:"
  ctest --test-dir "$dir" -N -L "$regex" | sed -n 's/^ *Test *#[0-9]*: /  left out: /p'
else
  echo "tests/run.sh: the $pass pass leaves out no test"
fi
ctest --test-dir "$dir" -j"$(nproc)" "${exclude[@]}" --output-on-failure --output-junit "$junit" || status=$?
phase_end
if [ -f "$junit" ]; then
  python3 - "$junit" <<'PY' || echo "tests/run.sh: could not summarise the skipped tests from $junit" >&2
import collections, sys, xml.etree.ElementTree as ET
cases = list(ET.parse(sys.argv[1]).getroot().iter("testcase"))
reasons = collections.OrderedDict()
for case in cases:
    if case.get("status") != "skipped" and case.find("skipped") is None:
        continue
    out = case.findtext("system-out") or ""
    why = next((line[len("SKIPPED: "):].strip() for line in out.splitlines() if line.startswith("SKIPPED: ")),
               "no reason printed")
    reasons.setdefault(why, []).append(case.get("name"))
# A passing test may warn (a line "WARNING: ..." in its output, such as a
# Sigstore root past its refresh date): ctest shows no output of a passing
# test, so the warnings are repeated here.
for case in cases:
    for line in (case.findtext("system-out") or "").splitlines():
        if line.startswith("WARNING: "):
            print(f"warning from {case.get('name')}: {line[len('WARNING: '):]}")
skipped = sum(len(names) for names in reasons.values())
print(f"{skipped} of {len(cases)} tests skipped" + (":" if skipped else ""))
for why, names in reasons.items():
    print(f"  {len(names)} x {why}")
    for name in names:
        print(f"      {name}")
PY
fi
exit "$status"
