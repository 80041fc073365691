#!/usr/bin/env bash
# Runs a test executable on a test spec and passes only when it skipped them
# all: exit 77 and a "SKIPPED: " line that names the expected reason.
#   expect_skip.sh <test executable> <test spec> <text the reason must hold>
set -uo pipefail
out=$("$1" "$2" 2>&1)
status=$?
echo "$out"
if [ "$status" -ne 77 ]; then
  echo "FAIL: $1 $2 exited $status, not 77 (skipped)" >&2
  exit 1
fi
if ! grep -q -F -- "$3" <<<"$(grep '^SKIPPED: ' <<<"$out")"; then
  echo "FAIL: no SKIPPED line names $3" >&2
  exit 1
fi
