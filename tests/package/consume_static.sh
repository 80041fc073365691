#!/usr/bin/env bash
# The installed static library through find_package: a separate project links
# kernhub::kernhub_static and runs against the demo hub (KERNHUB_ENDPOINT and
# KERNHUB_CACHE come from ctest).
#   consume_static.sh <build dir> <source dir> <generator> <c++ compiler> <work dir>
set -euo pipefail
build=$1 source=$2 generator=$3 cxx=$4 work=$5
rm -rf "$work"
mkdir -p "$work"
cd "$work"
unset KERNHUB_OFFLINE HF_HUB_OFFLINE
# Linked statically, kernhub's code is in the executable, which is not in
# <prefix>/bin: name the installed registry.
export KERNHUB_REGISTRY=$work/prefix/share/kernhub/registry.json
cmake --install "$build" --prefix "$work/prefix" >/dev/null
cmake -S "$source/examples/consumer/cmake" -B "$work/consumer" -G "$generator" -DCMAKE_CXX_COMPILER="$cxx" \
      -DCMAKE_PREFIX_PATH="$work/prefix" -DCMAKE_BUILD_TYPE=Release -DKERNHUB_CONSUMER_STATIC=ON >/dev/null
cmake --build "$work/consumer"
out=$("$work/consumer/kernhub_consumer")
echo "$out"
grep -q "vector-add ok" <<<"$out"
