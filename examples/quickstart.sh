#!/usr/bin/env bash
# Sets up a fresh Debian machine, builds kernhub and runs the main job:
# fetch the demo vector-add kernel from the bundled demo hub, then load it.
set -euo pipefail
cd "$(dirname "$0")/.."

.ci/install-deps
# Test hooks off, also when tests/run.sh configured build/ with them: this is
# the build README's install section installs.
cmake -S . -B build -G Ninja -DCMAKE_BUILD_TYPE=RelWithDebInfo -DKERNHUB_TEST_HOOKS=OFF >/dev/null
cmake --build build -j"$(nproc)" --target kernhub_cli demo_hub

hub="file://$PWD/build/demo-hub"
cache="$PWD/build/demo-cache"
echo "+ kernhub fetch vector-add --endpoint $hub --cache-dir $cache --json"
build/kernhub fetch vector-add --endpoint "$hub" --cache-dir "$cache" --json
echo "+ kernhub load vector-add --endpoint $hub --cache-dir $cache"
build/kernhub load vector-add --endpoint "$hub" --cache-dir "$cache"
