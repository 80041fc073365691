#!/usr/bin/env bash
# Builds kernhub with warnings as errors and runs the whole test suite.
#   tests/run.sh              the normal build in build/
#   tests/run.sh --sanitize   an AddressSanitizer + UBSan build in build-asan/
set -euo pipefail
cd "$(dirname "$0")/.."

dir=build
flags=(-DKERNHUB_WERROR=ON -DCMAKE_BUILD_TYPE=RelWithDebInfo)
if [ "${1:-}" = "--sanitize" ]; then
  dir=build-asan
  flags+=(-DKERNHUB_SANITIZE=ON)
  export ASAN_OPTIONS=detect_leaks=1:abort_on_error=1
  export UBSAN_OPTIONS=print_stacktrace=1:halt_on_error=1
fi

.ci/install-deps
# Test-only Python peers (huggingface_hub for the cache interop test) live in
# a virtual environment inside the build folder.
if [ ! -x "$dir/venv/bin/python" ]; then
  python3 -m venv "$dir/venv"
fi
"$dir/venv/bin/python" -m pip install -q --disable-pip-version-check -r tests/requirements.txt

cmake -S . -B "$dir" -G Ninja "${flags[@]}" -DKERNHUB_TEST_PYTHON="$PWD/$dir/venv/bin/python" >/dev/null
cmake --build "$dir" -j"$(nproc)"
ctest --test-dir "$dir" -j"$(nproc)" --output-on-failure
