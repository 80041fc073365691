/* A C program that changes directory before its first kh_load() and asks
 * for a kernel by its default-registry name. consume.sh runs it with
 * libkernhub_c.so found through a relative LD_LIBRARY_PATH entry, so the
 * dynamic loader knows the library by a relative name that no longer leads to
 * it after the chdir: the default registry must still be the one installed
 * next to the library.
 *   chdir_consumer <directory to move to> */
#include <stdio.h>
#include <unistd.h>

#include "kernhub/kernhub.h"

int main(int argc, char** argv) {
    if (argc != 2 || chdir(argv[1]) != 0) {
        fprintf(stderr, "usage: chdir_consumer <existing directory>\n");
        return 100;
    }
    kh_hub* hub = kh_hub_new();
    if (hub == NULL) return 100;
    int rc = kh_load(hub, "vector-add");
    if (rc != 0) {
        fprintf(stderr, "kh_load(vector-add) after chdir: %d: %s\n", rc, kh_last_error(hub));
    } else {
        printf("vector-add prewarmed after chdir to %s\n", argv[1]);
    }
    kh_hub_free(hub);
    return rc;
}
