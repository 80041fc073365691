// A test-only hook that kills the process at a named step of a fetch, so the
// tests can check that a crash at any instant leaves a usable cache that
// never shows unverified bytes (docs/cache-format.md, "Durability").
//
// Only a build configured with -DKERNHUB_TEST_HOOKS=ON (tests/run.sh does)
// has it, and then only in the static library and the programs linked with
// it (the CLI, the tests): the shared libraries never do. There,
// KERNHUB_TEST_CRASH_AT=NAME[:N] makes the Nth time (default the first) any
// thread reaches crash_point("NAME") send SIGKILL to the process. Elsewhere
// crash_point does nothing and the variable's name is not in the binary.
// KERNHUB_TEST_PAUSE_AT=NAME[:N]=FILE pauses there instead: the Nth time
// the point is reached, FILE is created and the thread waits until the
// test removes it (at most 60 s), so that a race is run at a known step.
#pragma once

namespace kernhub {

void crash_point(const char* name) noexcept;

}  // namespace kernhub
