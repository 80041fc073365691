#!/usr/bin/env bash
# The installed shared libraries carry no test hook: installs the build to a
# prefix and searches libkernhub.so and libkernhub_c.so for the names of the
# crash-point and pause-point variables. In a build without KERNHUB_TEST_HOOKS
# the installed CLI and static library must not carry them either; in a build
# with it, the build's own CLI must, which shows that the search finds the
# names where they are compiled in, and the program and static library the build also makes
# without the hooks (tests/CMakeLists.txt), as a build without the option
# would, must not.
#   check_no_test_hooks.sh <build dir> <work dir> <libdir> <hooks ON|OFF> <build-tree CLI>
#                          [<CLI without hooks> <static library without hooks>]
set -euo pipefail
build=$1 work=$2 libdir=$3 hooks=$4 cli=$5 cli_no_hooks=${6:-} static_no_hooks=${7:-}
name=KERNHUB_TEST_CRASH_AT
pause_name=KERNHUB_TEST_PAUSE_AT
rm -rf "$work"
mkdir -p "$work"
prefix=$work/prefix
cmake --install "$build" --prefix "$prefix" >/dev/null
case $libdir in /*) lib=$libdir ;; *) lib=$prefix/$libdir ;; esac

fail() { echo "FAIL: $*" >&2; exit 1; }
carries() { grep -q -a -F -e "$name" -e "$pause_name" "$1"; }
carries_both() { grep -q -a -F "$name" "$1" && grep -q -a -F "$pause_name" "$1"; }
checked=0
check_clean() {
  [ -f "$1" ] || fail "not installed: $1"
  ! carries "$1" || fail "$1 carries the test hook $name or $pause_name"
  echo "no $name or $pause_name in $1"
  checked=$((checked + 1))
}
check_clean "$(readlink -f "$lib/libkernhub.so")"
check_clean "$(readlink -f "$lib/libkernhub_c.so")"
case $hooks in
  ON|on|1|TRUE|true)
    carries_both "$cli" ||
      fail "the build has KERNHUB_TEST_HOOKS but $cli does not carry $name and $pause_name: the search is broken"
    echo "$cli carries $name and $pause_name (KERNHUB_TEST_HOOKS=ON), as it must"
    [ -n "$cli_no_hooks" ] || fail "a build with KERNHUB_TEST_HOOKS must name its program and static library without them"
    check_clean "$cli_no_hooks"
    check_clean "$static_no_hooks" ;;
  *)
    check_clean "$prefix/bin/kernhub"
    check_clean "$lib/libkernhub.a" ;;
esac
echo "checked $checked files"
