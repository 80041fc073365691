#!/usr/bin/env bash
# Builds the benchmarks (Release) in build-bench and prints each binary's
# ratio table (bench/ratios.py), then the cold-fetch comparison against
# curl + OpenSSL over nginx and against hf download (bench/cold_fetch.py),
# then cold fetches and a torch load at 0 and 50 ms of added round-trip time
# against curl --parallel (bench/latency.py).
# Environment:
#   KERNHUB_BENCH_BUILD_DIR  build directory (default: <repo>/build-bench)
#   KERNHUB_BENCH_MIN_TIME   --benchmark_min_time in seconds (default 0.2)
#   KERNHUB_BENCH_JOBS       build parallelism (default 2)
#   KERNHUB_BENCH_HF_PYTHON  a Python with huggingface_hub (default: the test
#                            venv of build/, KERNHUB_TEST_PYTHON in its CMakeCache.txt)
#   KERNHUB_BENCH_TORCH_DIR  a torch package folder for bench_torch_dispatch and the
#                            torch load of bench/latency.py
#                            (default: KERNHUB_TEST_TORCH_DIR in build/'s CMakeCache.txt)
#   KERNHUB_BENCH_LATENCY_RUNS  runs of each case of bench/latency.py at each RTT
#                            (default 15; fewer only for a quick check)
# Arguments after the options go to every benchmark binary, e.g.
#   bench/run.sh --benchmark_filter=Kernhub
set -euo pipefail

here="$(cd "$(dirname "${BASH_SOURCE[0]}")" && pwd)"
root="$(dirname "$here")"
build="${KERNHUB_BENCH_BUILD_DIR:-$root/build-bench}"
min_time="${KERNHUB_BENCH_MIN_TIME:-0.2}"
python="${PYTHON:-python3}"

torch_dir="${KERNHUB_BENCH_TORCH_DIR:-$(sed -n 's/^KERNHUB_TEST_TORCH_DIR:PATH=//p' "$root/build/CMakeCache.txt" 2>/dev/null || true)}"
configure=(cmake -S "$root" -B "$build" -DCMAKE_BUILD_TYPE=Release -DKERNHUB_BUILD_BENCH=ON -DKERNHUB_BUILD_TESTS=ON
  "-DKERNHUB_TEST_TORCH_DIR=$torch_dir")
# A fresh directory gets Ninja; an existing one keeps its generator.
[[ -f "$build/CMakeCache.txt" ]] || configure+=(-G Ninja)
"${configure[@]}" >/dev/null
targets=(kernhub_bench kernhub_cli)
# The torch op library that bench/latency.py pads into a torch variant, where
# there is LibTorch to build it against.
if cmake --build "$build" --target help | grep -q '^kh_torch_ops:'; then targets+=(kh_torch_ops); fi
cmake --build "$build" --target "${targets[@]}" -j "${KERNHUB_BENCH_JOBS:-2}" >/dev/null

for name in bench_dispatch bench_tvm_dispatch bench_torch_dispatch bench_load bench_startup bench_fetch bench_parse; do
  binary="$build/bench/$name"
  if [[ ! -x "$binary" ]]; then
    echo "== $name: not built (bench_fetch and bench_parse need the tests: KERNHUB_BUILD_TESTS=ON; bench_torch_dispatch a torch package)"
    continue
  fi
  "$python" "$here/ratios.py" "$binary" --min-time "$min_time" --save "$build/bench/$name.json" -- "$@"
done

# Cold fetch over a real nginx against curl (+ OpenSSL), and of the demo
# variant against huggingface_hub's `hf download` (a test-only peer: the
# venv tests/run.sh makes has it; KERNHUB_BENCH_HF_PYTHON names another).
hf_python="${KERNHUB_BENCH_HF_PYTHON:-$(sed -n 's/^KERNHUB_TEST_PYTHON:FILEPATH=//p' "$root/build/CMakeCache.txt" 2>/dev/null || true)}"
cold=(--kernhub "$build/kernhub" --demo-hub "$build/demo-hub")
[[ -x "$hf_python" ]] && cold+=(--python "$hf_python")
echo "== cold_fetch"
"$python" "$here/cold_fetch.py" "${cold[@]}" --json "$build/bench/cold_fetch.json"

# Round trips: the cold demo fetch (by branch, by pinned commit) and a cold
# torch load through a delay proxy at 0 and 50 ms, beside curl --parallel.
latency=(--kernhub "$build/kernhub" --demo-hub "$build/demo-hub" --runs "${KERNHUB_BENCH_LATENCY_RUNS:-15}"
  --torch-dir "$torch_dir" --torch-fixture "$build/tests/fixtures/out/torch/_kh_torch_ops_9e1b2c7.abi3.so")
[[ "${KERNHUB_BENCH_LATENCY_RUNS:-15}" -ge 15 ]] || latency+=(--quick)
echo "== latency"
"$python" "$here/latency.py" "${latency[@]}" --json "$build/bench/latency.json"
