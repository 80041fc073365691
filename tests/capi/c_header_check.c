/* Compiled as ISO C99 with -pedantic -Werror (tests/CMakeLists.txt): the C
 * API header must be plain C, and every function must link from C. */
#include <kernhub/kernhub.h>
#include <stddef.h>
#include <string.h>

#include "c_header_check.h"

typedef void (*vector_add_fn)(const float*, const float*, float*, size_t);

/* A kh_message_fn: counts the messages of a known kind. */
static void count_message(int kind, const char* line, void* user) {
    if (line != NULL && kind >= KH_MESSAGE_STATUS && kind <= KH_MESSAGE_RETRY) ++*(int*)user;
}

int kh_c_header_check(const char* endpoint, const char* cache_dir, const char* project) {
    kh_hub* hub = kh_hub_new();
    float a[3] = {1.0f, 2.0f, 3.0f};
    float b[3] = {10.0f, 20.0f, 30.0f};
    float out[3] = {0.0f, 0.0f, 0.0f};
    vector_add_fn add = NULL;
    void* address = NULL;
    int rc = 0;
    int messages = 0;
    if (hub == NULL) return -1;
    if (kh_hub_on_message(hub, count_message, &messages) != 0 || kh_hub_on_message(NULL, NULL, NULL) != 2) {
        kh_hub_free(hub);
        return -10;
    }
    if (kh_hub_set(hub, "endpoint", endpoint) != 0 || kh_hub_set(hub, "cache_dir", cache_dir) != 0 ||
        kh_hub_set(hub, "project", project) != 0 || kh_hub_set(hub, "offline", "false") != 0) {
        kh_hub_free(hub);
        return -2;
    }
    rc = kh_load(hub, "vector-add");
    if (rc != 0 || kh_last_error(hub) != NULL) {
        kh_hub_free(hub);
        return rc != 0 ? rc : -3;
    }
    address = kh_symbol(hub, "vector-add");
    /* A C function, not a torch op: no op name, and the error says so. */
    if (kh_torch_op(hub, "vector-add") != NULL || kh_last_error(hub) == NULL) {
        kh_hub_free(hub);
        return -8;
    }
    kh_hub_free(hub); /* the pointer outlives the handle */
    if (address == NULL) return -4;
    memcpy(&add, &address, sizeof add);
    add(a, b, out, 3);
    if (out[0] != 11.0f || out[2] != 33.0f) return -5;
    if (strcmp(kh_error_name(3), "not found") != 0 || kh_version()[0] == '\0') return -6;
    if (strcmp(kh_kernels_release(), "0.19.1") != 0) return -9;
    /* The tvm-ffi entry points link from C too; without a handle they refuse. */
    if (kh_tvm_call(NULL, NULL, NULL, 0, NULL) != 2 || kh_tvm_set_stream(NULL, 0, NULL, NULL) != 2) return -7;
    return 0;
}
