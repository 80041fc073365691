#!/usr/bin/env bash
# Builds the libFuzzer targets of tests/fuzz/ with clang (ASan + UBSan) in
# build-fuzz/ and runs each for a fixed time, so the whole run has a fixed
# budget: 10 targets x KERNHUB_FUZZ_SECONDS (default 20 s), KERNHUB_FUZZ_JOBS
# (default: the CPU count) at a time.
#   tests/fuzz/run_fuzz.sh                 every target
#   tests/fuzz/run_fuzz.sh elf lock        only these
# The checked-in corpus (tests/fuzz/corpus/<name>/) is read, never written:
# new inputs go to a scratch folder. A finding (crash, sanitizer report, an
# input that takes over 5 s, a process over 2048 MB, one allocation over
# 256 MB: what a parse that is not linear in its input does) stops the run; its input is kept in
# build-fuzz/findings/ to be added to the corpus once the parser is fixed.
# Ends with one line per target: libFuzzer's runs and seconds.
set -euo pipefail
cd "$(dirname "$0")/../.."

seconds=${KERNHUB_FUZZ_SECONDS:-20}
dir=${KERNHUB_FUZZ_BUILD:-build-fuzz}
targets=("$@")
if [ ${#targets[@]} -eq 0 ]; then
  targets=(registry listing hub_answer lock metadata fatbin elf archive bundle trusted_root)
fi

CC=clang CXX=clang++ cmake -S . -B "$dir" -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKERNHUB_FUZZ=ON \
  -DKERNHUB_BUILD_TESTS=OFF -DKERNHUB_BUILD_BENCH=OFF >/dev/null
cmake --build "$dir" -j"$(nproc)" --target kernhub_fuzz_targets

mkdir -p "$dir/findings"
# KERNHUB_FUZZ_SCRATCH keeps what a run found for the next one (local
# sessions); by default each run starts from the checked-in corpus.
if [ -n "${KERNHUB_FUZZ_SCRATCH:-}" ]; then
  scratch=$KERNHUB_FUZZ_SCRATCH
else
  scratch=$(mktemp -d)
  trap 'rm -rf "$scratch"' EXIT
fi
export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
# fuzz_one NAME: one target for its time; on a finding, its log's tail and
# where the input is, and a non-zero status.
fuzz_one() {
  local name=$1 log="$dir/findings/$1.log"
  mkdir -p "$scratch/$name"
  echo "fuzz_$name: ${seconds} s" >&2
  # The JSON readers share a dictionary of their formats' keys.
  local dict=()
  case "$name" in registry | listing | hub_answer | lock | metadata | bundle | trusted_root) dict=(-dict=tests/fuzz/json.dict) ;; esac
  if ! "$dir/tests/fuzz/fuzz_$name" -max_total_time="$seconds" -timeout=5 -rss_limit_mb=2048 -malloc_limit_mb=256 \
      -print_final_stats=1 -artifact_prefix="$dir/findings/$name-" "${dict[@]}" \
      "$scratch/$name" "tests/fuzz/corpus/$name" >"$log" 2>&1; then
    tail -n 60 "$log" >&2
    echo "run_fuzz.sh: fuzz_$name found a problem; the input is $dir/findings/$name-*, the log $log" >&2
    return 1
  fi
}
# A libFuzzer run is one process on one core: KERNHUB_FUZZ_JOBS targets
# (default: the CPU count) run at once, each for the same time, so each does
# as many runs as it would alone and the runs take 1/jobs of the time.
# In a container with a CPU quota smaller than nproc, set it to the quota.
jobs=${KERNHUB_FUZZ_JOBS:-$(nproc)}
if ! [[ $jobs =~ ^[1-9][0-9]*$ ]]; then
  echo "run_fuzz.sh: KERNHUB_FUZZ_JOBS must be a positive integer, not '$jobs'" >&2
  exit 2
fi
# SIGINT or SIGTERM ends the running targets too, before the scratch folder
# goes.
source tests/support/background_jobs.sh
stop_jobs_on_signal
failed=()
for ((first = 0; first < ${#targets[@]}; first += jobs)); do
  background_jobs=()
  batch=("${targets[@]:first:jobs}")
  for name in "${batch[@]}"; do
    fuzz_one "$name" &
    background_jobs+=($!)
  done
  for i in "${!background_jobs[@]}"; do wait "${background_jobs[$i]}" || failed+=("fuzz_${batch[$i]}"); done
  if [ ${#failed[@]} -gt 0 ]; then
    echo "run_fuzz.sh: findings in ${failed[*]}; see $dir/findings/" >&2
    exit 1
  fi
done
for name in "${targets[@]}"; do
  echo "fuzz_$name: $(grep -o 'Done [0-9]* runs in [0-9]* second(s)' "$dir/findings/$name.log" | tail -n 1)"
done
