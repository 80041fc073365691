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
# KERNHUB_TEST_PHASE_TIMES names a file, each row is appended to it too, so that
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
  if [ -n "${KERNHUB_TEST_PHASE_TIMES:-}" ]; then
    echo "$row" >>"$KERNHUB_TEST_PHASE_TIMES"
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
# Line tables only (-g1) instead of RelWithDebInfo's full -g: backtraces and
# sanitizer reports keep file and line, debuggers lose variables, and the
# build takes about a third less time (CONTRIBUTING.md, "Build and
# test speed"). Configure a build of your own for full debug information.
flags=(-DKERNHUB_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKERNHUB_TEST_HOOKS=ON
  "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O2 -g1 -DNDEBUG")
# The benchmarks (bench/) are no tests and no test runs them: built only
# with KERNHUB_TEST_BENCH=1, which .ci/run sets so that they keep compiling
# (about 15 s of a fresh build on 2 cores). bench/run.sh builds and runs
# them in a Release folder of their own.
if [ "${KERNHUB_TEST_BENCH:-0}" = 1 ]; then
  flags+=(-DKERNHUB_BUILD_BENCH=ON)
else
  flags+=(-DKERNHUB_BUILD_BENCH=OFF)
fi

# ThreadSanitizer: the library and tests/threads only (CONTRIBUTING.md,
# "How the tests are organised"). The loopback hub is stdlib Python, so no virtual environment.
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
  # The benchmarks are compiled by CI's normal pass; none runs under ctest.
  # -O1, the level the sanitizers' documentation suggests: the library compiles in
  # about 30 % less time than at -O2 under ASan (CONTRIBUTING.md,
  # "Build and test speed"); the later -D wins.
  flags+=(-DKERNHUB_SANITIZE=ON -DKERNHUB_BUILD_BENCH=OFF
    "-DCMAKE_C_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG" "-DCMAKE_CXX_FLAGS_RELWITHDEBINFO=-O1 -g1 -DNDEBUG")
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1:detect_stack_use_after_return=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

phase dependencies
.ci/install-deps
# Test-only Python peers (huggingface_hub, kernels, sigstore, apache-tvm-ffi)
# live in virtual environments kept in a store that every clone and build
# folder on this machine shares, one per requirements file and interpreter:
# KERNHUB_TEST_VENVS, by default ~/.cache/kernhub/test-venvs. A venv is made
# once; a later run, in this clone or another, whose requirements and
# interpreter are the same starts no pip at all.
venv_store=${KERNHUB_TEST_VENVS:-${XDG_CACHE_HOME:-${HOME:-/nonexistent}/.cache}/kernhub/test-venvs}
if ! mkdir -p "$venv_store" 2>/dev/null || [ ! -w "$venv_store" ]; then
  echo "tests/run.sh: cannot write the venv store $venv_store; the venvs go in $dir/venvs" >&2
  venv_store="$PWD/$dir/venvs"
  mkdir -p "$venv_store"
fi
# venv_path NAME REQUIREMENTS: the store's folder for that pair, named by a
# hash of the interpreter and the requirements file.
venv_path() {
  local key
  # The recipe's version (2: bytecode compiled) is in the key, so a venv
  # made by an older recipe is not reused.
  key=$({ echo "recipe 2"; python3 -c 'import sys; print(sys.version); print(sys.executable)'; cat "$2"; } |
    sha256sum | cut -c1-16)
  echo "$venv_store/$1-$key"
}
# venv NAME REQUIREMENTS: makes that venv unless it is complete (its stamp
# is written last, after pip succeeded). A lock serialises the runs that
# want the same venv; an interrupted one leaves no stamp and is redone from
# scratch. Venvs of NAME that no run has used for 30 days are removed.
venv() {
  local env
  env=$(venv_path "$1" "$2")
  (
    exec 9>"$env.lock"
    flock 9
    if [ ! -f "$env/kernhub-complete" ]; then
      rm -rf "$env"
      python3 -m venv "$env"
      "$env/bin/python" -m pip install -q --no-compile --disable-pip-version-check -r "$2"
      # Bytecode written once, here, in parallel: with PYTHONDONTWRITEBYTECODE
      # set (as on many CI machines) no test would ever write it, and every
      # Python the interop tests start would compile what it imports again
      # (about 1 s of CPU for huggingface_hub, kernels and sigstore).
      # Bytecode only saves time: a file that does not compile is logged, and
      # the venv is complete all the same.
      "$env/bin/python" -m compileall -q -j 0 "$env/lib" >"$env/compileall.log" 2>&1 ||
        echo "tests/run.sh: some of $env was not compiled to bytecode (see $env/compileall.log)" >&2
      touch "$env/kernhub-complete"
    fi
    touch "$env/kernhub-complete"  # last use, for remove_stale
    remove_stale "$1"
  )
}
# remove_stale NAME: removes the store's folders of NAME that no run has used
# for 30 days. A stale folder is removed only under its own lock, taken
# without waiting (a run that holds it is using it) and with its age checked
# again under it; lock files stay, so two runs never lock different files of
# a name.
remove_stale() {
  find "$venv_store" -maxdepth 2 -path "$venv_store/$1-*/kernhub-complete" -mtime +30 2>/dev/null |
    while read -r stale; do
      (
        exec 8>"$(dirname "$stale").lock"
        flock -n 8 || exit 0
        # The stamp first: a removal cut short leaves a folder that is redone.
        [ -z "$(find "$stale" -mtime +30 2>/dev/null)" ] || { rm -f "$stale" && rm -rf "$(dirname "$stale")"; }
      )
    done
}
# torch_store: LibTorch for the torch tests (tests/requirements-torch.txt),
# in the same store under the same rules: torch-<hash>/site holds the wheel
# installed with --no-deps --target (no venv: only its C++ headers and
# libraries are used), and torch-<hash>/cuda-lib links to the two CUDA
# runtime libraries libtorch_cpu.so needs, taken from the CUDA toolkit
# when it has them, else installed from PyPI into torch-<hash>/cuda-pip
# (tests/requirements-torch-cuda.txt). The links are made again on every
# run, so a toolkit installed or removed later is followed.
torch_store() {
  local env
  env=$(venv_path torch tests/requirements-torch.txt)
  (
    exec 9>"$env.lock"
    flock 9
    if [ ! -f "$env/kernhub-complete" ]; then
      rm -rf "$env"
      mkdir -p "$env"
      python3 -m pip install -q --no-compile --disable-pip-version-check --no-deps --target "$env/site" \
        -r tests/requirements-torch.txt
      touch "$env/kernhub-complete"
    fi
    touch "$env/kernhub-complete"
    local lib dir found links="$env/cuda-lib.new"
    rm -rf "$links"
    mkdir -p "$links"
    for lib in libcudart.so.13 libcupti.so.13; do
      found=""
      for dir in /usr/local/cuda/lib64 /usr/local/cuda/extras/CUPTI/lib64; do
        [ -n "$found" ] || [ ! -e "$dir/$lib" ] || found="$dir/$lib"
      done
      if [ -z "$found" ]; then
        if [ ! -f "$env/cuda-pip/kernhub-complete" ]; then
          rm -rf "$env/cuda-pip"
          python3 -m pip install -q --no-compile --disable-pip-version-check --no-deps --target "$env/cuda-pip" \
            -r tests/requirements-torch-cuda.txt
          touch "$env/cuda-pip/kernhub-complete"
        fi
        found=$(find "$env/cuda-pip" -name "$lib" -print -quit)
      fi
      [ -n "$found" ] || { echo "tests/run.sh: no $lib in the CUDA toolkit or $env/cuda-pip" >&2; exit 1; }
      ln -s "$found" "$links/$lib"
    done
    rm -rf "$env/cuda-lib"
    mv "$links" "$env/cuda-lib"
    # The heavy extras for `import torch` (tests/requirements-torch-python.txt),
    # only when asked for; its own stamp, as the file can change on its own.
    if [ "${KERNHUB_TEST_TORCH_PYTHON:-0}" = 1 ]; then
      [ -d /usr/local/cuda/lib64 ] || {
        echo "tests/run.sh: KERNHUB_TEST_TORCH_PYTHON=1 needs the CUDA toolkit in /usr/local/cuda" >&2
        exit 1
      }
      local stamp
      stamp="$env/python-site/kernhub-$(sha256sum tests/requirements-torch-python.txt | cut -c1-16)"
      if [ ! -f "$stamp" ]; then
        rm -rf "$env/python-site"
        python3 -m pip install -q --no-compile --disable-pip-version-check --no-deps --target "$env/python-site" \
          -r tests/requirements-torch-python.txt
        touch "$stamp"
      fi
    fi
    remove_stale torch
  )
}
# The second environment holds the older kernels release (its own
# kernels.lock format): one environment holds one kernels version. Both are
# made at once; pip is mostly waiting on the disk and the index.
venv_main=$(venv_path main tests/requirements.txt)
venv_legacy=$(venv_path kernels-legacy tests/requirements-kernels-legacy.txt)
torch_env=$(venv_path torch tests/requirements-torch.txt)
# Ctrl-C (or SIGTERM) while they are made ends them, pip included; an
# interrupted install leaves no stamp and is redone by the next run.
source tests/support/background_jobs.sh
stop_jobs_on_signal
venv main tests/requirements.txt &
background_jobs+=($!)
venv kernels-legacy tests/requirements-kernels-legacy.txt &
background_jobs+=($!)
torch_store &
background_jobs+=($!)
venv_status=0
for pid in "${background_jobs[@]}"; do wait "$pid" || venv_status=$?; done
trap - INT TERM
if [ "$venv_status" -ne 0 ]; then
  echo "tests/run.sh: making the test venvs in $venv_store failed (exit $venv_status)" >&2
  exit "$venv_status"
fi

phase configure
cmake -S . -B "$dir" -G Ninja "${flags[@]}" -DKERNHUB_TEST_PYTHON="$venv_main/bin/python" \
  -DKERNHUB_TEST_PYTHON_KERNELS_LEGACY="$venv_legacy/bin/python" \
  -DKERNHUB_TEST_TORCH_DIR="$torch_env/site/torch" -DKERNHUB_TEST_TORCH_RUNTIME_DIR="$torch_env/cuda-lib" \
  -DKERNHUB_TEST_TORCH_PYTHON_SITE="$([ "${KERNHUB_TEST_TORCH_PYTHON:-0}" != 1 ] || echo "$torch_env/python-site")" \
  >/dev/null
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
# Twice as many tests as cores: many of them wait on a child process, a
# loopback server or a transfer rather than compute.
ctest --test-dir "$dir" -j"$((2 * $(nproc)))" "${exclude[@]}" --output-on-failure --output-junit "$junit" || status=$?
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
