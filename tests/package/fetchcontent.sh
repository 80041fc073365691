#!/usr/bin/env bash
# kernhub as a subproject (FetchContent): configures and builds the project in
# tests/package/fetchcontent, which takes this checkout with FetchContent,
# checks that kernhub added only its libraries (no CLI, example, demo hub,
# test or benchmark target; no Python, Catch2 or CLI11 needed) and left the
# parent's compile flags alone, then runs a C++ program on kernhub::kernhub,
# one on kernhub::kernhub_static and a C program on kernhub::kernhub_c
# against the demo hub.
#   fetchcontent.sh <source dir> <demo hub dir> <generator> <initial cache> <work dir>
# <initial cache> (tests/package/CMakeLists.txt writes it) gives the consumer
# the top-level build's compilers, build type, flags and compiler launcher.
# The work dir is by default a sibling of the build folder (<build>-fetchcontent):
# the consumer's build folder then names the sources by the same relative
# paths as the top-level build, so with ccache it compiles to the same objects
# and hits them instead of compiling kernhub again.
set -euo pipefail
source=$1 hub=$2 generator=$3 initial_cache=$4 work=$5
started=$(date +%s.%N)
fail() { echo "FAIL: $*" >&2; exit 1; }

# The work dir is outside the build folder: remove only one this test made.
marker=$work/.kernhub-fetchcontent-test
if [ -e "$work" ] && [ ! -e "$marker" ] && [ -n "$(ls -A "$work")" ]; then
  fail "$work exists and was not made by this test; remove it or set KERNHUB_TEST_FETCHCONTENT_DIR"
fi
rm -rf "$work"
mkdir -p "$work/.cmake/api/v1/query"
touch "$marker" "$work/.cmake/api/v1/query/codemodel-v2"

echo "== configure: FetchContent_Declare(kernhub SOURCE_DIR $source)"
# The packages only kernhub's tests, examples and CLI use are made
# unfindable: a subproject that asked for one would fail here.
cmake -S "$source/tests/package/fetchcontent" -B "$work" -G "$generator" -C "$initial_cache" \
      --no-warn-unused-cli -DKERNHUB_SOURCE_DIR="$source" -DCMAKE_EXPORT_COMPILE_COMMANDS=ON \
      -DCMAKE_DISABLE_FIND_PACKAGE_Python3=ON -DCMAKE_DISABLE_FIND_PACKAGE_Python=ON \
      -DCMAKE_DISABLE_FIND_PACKAGE_Catch2=ON -DCMAKE_DISABLE_FIND_PACKAGE_CLI11=ON \
      -DCMAKE_DISABLE_FIND_PACKAGE_benchmark=ON >"$work/configure.log" ||
  { cat "$work/configure.log"; fail "the consumer did not configure"; }
! grep -E '^(Python3?_EXECUTABLE|Catch2_DIR|CLI11_DIR|KERNHUB_TEST_PYTHON)[:=]' "$work/CMakeCache.txt" ||
  fail "kernhub as a subproject looked for a test-only package (above, from CMakeCache.txt)"

echo "== the consumer's targets (CMake file API)"
targets=$(cmake -DBUILD="$work" -P "$source/tests/package/list_targets.cmake")
echo "$targets" | tr '\n' ' '
echo
expected="consumer_c consumer_cxx consumer_static kernhub kernhub_c kernhub_hooks_off kernhub_objects kernhub_static"
[ "$(echo "$targets" | tr '\n' ' ' | sed 's/ $//')" = "$expected" ] ||
  fail "kernhub as a subproject must add only its libraries: expected the targets $expected"

echo "== build"
cmake --build "$work" >"$work/build.log" || { cat "$work/build.log"; fail "the consumer did not build"; }
grep -cE '^\[[0-9]+/[0-9]+\]|Building|Linking' "$work/build.log" | sed 's/^/build steps: /' || true

# The parent's own files compile with the parent's flags alone: none of
# kernhub's warnings or its -fdebug-prefix-map leaked into them.
command=$(grep -B1 '"file": ".*examples/embed/c_vector_add.c"' "$work/compile_commands.json" | head -1)
[ -n "$command" ] || fail "no compile command for c_vector_add.c in $work/compile_commands.json"
! grep -qE -- '-Wconversion|-Wshadow|-fdebug-prefix-map' <<<"$command" ||
  fail "kernhub's flags reached the parent's targets: $command"

echo "== run against the demo hub"
kernhub_build=$work/_deps/kernhub-build
# The libraries find the subproject's copy of the default registry by
# themselves, as they find the top-level build's.
registry=$kernhub_build/share/kernhub/registry.json
export KERNHUB_ENDPOINT=file://$hub
unset KERNHUB_OFFLINE HF_HUB_OFFLINE HF_TOKEN HF_ENDPOINT KERNHUB_REGISTRY
[ -f "$registry" ] || fail "the subproject made no registry copy at $registry"
for program in consumer_cxx consumer_static consumer_c; do
  # A program that links the static library is its own code file: outside
  # the subproject's folder, it is told the registry.
  extra=()
  [ "$program" != consumer_static ] || extra=(KERNHUB_REGISTRY="$registry")
  out=$(env "${extra[@]}" KERNHUB_CACHE="$work/cache-$program" "$work/$program") || fail "$program: $out"
  echo "$program: $out"
  grep -q "vector-add.* ok" <<<"$out" || fail "$program did not compute"
  [ "$program" = consumer_c ] || grep -qF "(registry $registry)" <<<"$out" ||
    fail "$program did not take the subproject's default registry"
done
deps=$(ldd "$work/consumer_cxx")
grep -qF "$kernhub_build/libkernhub.so." <<<"$deps" || fail "consumer_cxx does not use the subproject's libkernhub.so"
deps=$(ldd "$work/consumer_c")
grep -qF "$kernhub_build/libkernhub_c.so." <<<"$deps" || fail "consumer_c does not use the subproject's libkernhub_c.so"
! grep -q 'libkernhub' <<<"$(ldd "$work/consumer_static")" || fail "consumer_static links a shared libkernhub"
echo "PASS ($(awk -v a="$started" -v b="$(date +%s.%N)" 'BEGIN { printf "%.1f", b - a }') s)"
