// A test-only hook that kills the process at a named step of a fetch, so the
// tests can check that a crash at any instant leaves a usable cache that
// never shows unverified bytes (docs/ARCHITECTURE.md, "Durability").
//
// KERNHUB_TEST_CRASH_AT=NAME[:N] makes the Nth time (default the first) any
// thread reaches crash_point("NAME") send SIGKILL to the process. Unset,
// which is every use but the tests, a crash point costs a std::call_once
// check and an empty-string test.
#pragma once

namespace kernhub {

void crash_point(const char* name) noexcept;

}  // namespace kernhub
