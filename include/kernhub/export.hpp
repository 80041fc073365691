// KERNHUB_API marks the symbols that make up the public library interface.
#pragma once

#if defined(_WIN32)
#define KERNHUB_API
#else
#define KERNHUB_API __attribute__((visibility("default")))
#endif
