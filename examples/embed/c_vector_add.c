/* Embedding kernhub in a C program through the C API (kernhub/kernhub.h):
 * load at start-up, then call the kernel through a plain function pointer.
 *
 *   KERNHUB_ENDPOINT=file://$PWD/build/demo-hub ./build/examples/c_vector_add
 *   ./build/examples/c_vector_add offline=1 cache_dir=/tmp/kh-cache
 *
 * Settings come from the environment (docs/configuration.md, "Settings") and from
 * arguments KEY=VALUE, each passed to kh_hub_set (docs/embedding.md, "C API"). On a
 * failure the program prints kernhub's message and exits with the code
 * kh_load returned, the same numbers as the kernhub command. kernhub's
 * warnings and notes (kh_hub_on_message) go to stderr. */
#include <kernhub/kernhub.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef void (*vector_add_fn)(const float* a, const float* b, float* out, size_t n);

enum { k_count = 8 };

/* A kh_message_fn: warnings and notes on stderr; the other messages
 * (retries, what a call is doing) are left out. */
static void print_message(int kind, const char* line, void* user) {
    (void)user;
    if (kind == KH_MESSAGE_WARNING || kind == KH_MESSAGE_NOTE) fprintf(stderr, "c_vector_add: %s\n", line);
}

/* Applies KEY=VALUE arguments; returns 0 or kh_hub_set's code. */
static int apply_arguments(kh_hub* hub, int argc, char** argv) {
    for (int i = 1; i < argc; ++i) {
        char* equals = strchr(argv[i], '=');
        if (equals == NULL) {
            fprintf(stderr, "c_vector_add: expected KEY=VALUE, got '%s'\n", argv[i]);
            return 2;
        }
        *equals = '\0';
        int rc = kh_hub_set(hub, argv[i], equals + 1);
        if (rc != 0) {
            fprintf(stderr, "c_vector_add: %s\n", kh_last_error(hub));
            return rc;
        }
    }
    return 0;
}

int main(int argc, char** argv) {
    kh_hub* hub = kh_hub_new();
    if (hub == NULL) {
        fprintf(stderr, "c_vector_add: out of memory\n");
        return 1;
    }
    kh_hub_on_message(hub, print_message, NULL);
    int rc = apply_arguments(hub, argc, argv);
    if (rc != 0) {
        kh_hub_free(hub);
        return rc;
    }
    /* Start-up: fetch (or find in the cache), verify, load and resolve. */
    rc = kh_load(hub, "vector-add");
    if (rc != 0) {
        fprintf(stderr, "c_vector_add: cannot load 'vector-add' (exit %d): %s\n", rc, kh_last_error(hub));
        kh_hub_free(hub);
        return rc;
    }
    /* ISO C has no cast from void* to a function pointer; copy the bytes. */
    void* address = kh_symbol(hub, "vector-add");
    vector_add_fn vector_add;
    memcpy(&vector_add, &address, sizeof vector_add);
    kh_hub_free(hub); /* the kernel stays loaded */

    float a[k_count], b[k_count], out[k_count];
    for (int i = 0; i < k_count; ++i) {
        a[i] = (float)i;
        b[i] = 10.0f * (float)i;
    }
    vector_add(a, b, out, k_count);

    int ok = 1;
    printf("vector-add (kernhub %s, C API):", kh_version());
    for (int i = 0; i < k_count; ++i) {
        printf(" %g", (double)out[i]);
        if (out[i] != 11.0f * (float)i) ok = 0;
    }
    printf(" -> %s\n", ok ? "ok" : "WRONG");
    return ok ? EXIT_SUCCESS : 1;
}
