#!/usr/bin/env bash
# Runs a test executable on a test spec and passes only when it exits with
# the expected status and its output holds the expected text (for a skip,
# on a "SKIPPED: " line).
#   expect_exit.sh <status> <text> <test executable> <test spec>
set -uo pipefail
want=$1 text=$2
out=$("$3" "$4" 2>&1)
status=$?
echo "$out"
if [ "$status" -ne "$want" ]; then
  echo "FAIL: $3 $4 exited $status, not $want" >&2
  exit 1
fi
lines=$out
[ "$want" -ne 77 ] || lines=$(grep '^SKIPPED: ' <<<"$out")
if ! grep -q -F -- "$text" <<<"$lines"; then
  echo "FAIL: the output of $3 $4 does not hold: $text" >&2
  exit 1
fi
echo "exit $status, as expected"
