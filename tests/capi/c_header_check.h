// The C translation unit's entry point (c_header_check.c), callable from
// the C++ tests.
#pragma once

#ifdef __cplusplus
extern "C" {
#endif

// Prewarms "vector-add" from `endpoint` into `cache_dir` through the C API
// from C, calls it, and returns 0, a kh_prewarm code, or a negative step
// number that failed.
int kh_c_header_check(const char* endpoint, const char* cache_dir, const char* project);

#ifdef __cplusplus
}
#endif
