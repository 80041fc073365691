/* kernhub C API: for programs in C, and for engines and FFI layers that
 * cannot take C++ types.
 *
 * It is the same pipeline as kernhub::Client (kernhub.hpp): a name is
 * resolved through the stacked registries, the one build variant this host
 * needs is fetched from the hub into the shared cache (or found there),
 * verified, loaded, and its entry point resolved. Call kh_prewarm() once per
 * kernel at start-up, keep the pointer kh_symbol() gives, cast it to the
 * kernel's function type and call it: no lookup, lock or allocation then.
 *
 *     kh_hub* hub = kh_hub_new();
 *     if (hub == NULL) return 1;
 *     int rc = kh_prewarm(hub, "vector-add");
 *     if (rc != 0) { fprintf(stderr, "%s\n", kh_last_error(hub)); kh_hub_free(hub); return rc; }
 *     void* address = kh_symbol(hub, "vector-add");
 *     void (*add)(const float*, const float*, float*, size_t);
 *     memcpy(&add, &address, sizeof add);  (ISO C's way to cast it)
 *     kh_hub_free(hub);  (the pointer stays valid)
 *     add(a, b, out, n);
 *
 * Return codes are the exit codes of the kernhub command-line tool
 * (README, "Exit codes"):
 *     0   ok
 *     1   internal error, out of memory, or the local system refused
 *         (for example, the cache cannot be written)
 *     2   usage: NULL argument, unknown setting, bad setting value,
 *         malformed registry file
 *     3   not found: name, repo, revision, file, symbol, or no variant fits
 *         this host
 *     4   verification failed: hash, metadata digest, ELF check
 *     5   network or hub error after retries
 *     6   offline and not cached
 *     7   load failed: the dynamic loader refused the object, no CUDA
 *         driver or device, no binary for this GPU, a CUDA driver error,
 *         no tvm-ffi runtime (or one of another version)
 *     9   kernel error: a tvm-ffi function called with kh_tvm_call()
 *         raised an error (only kh_tvm_call returns it)
 *
 * Threading: every function may be called from many threads at once, on
 * one handle or on separate ones; only kh_hub_free() must come after every
 * other call on its handle has returned, and none may follow it. The
 * handle is locked only for moments, never across network or disk work: a
 * kh_prewarm() that is fetching does not hold up kh_symbol(), kh_hub_set(),
 * kh_last_error() or a kh_prewarm() of another kernel on the same handle
 * (one that needs the very files being fetched waits for them, as with
 * kernhub::Client). Each thread has its own kh_last_error() text per
 * handle. Separate handles share nothing but the cache on disk (and what
 * the process itself shares: a library loaded by two handles is one
 * dlopen handle); each handle keeps its own table of resolved kernels, as
 * each kernhub::Client does, so two handles whose registries map one name
 * to different kernels each get their own. The only state this layer
 * keeps outside its handles is each thread's error texts.
 *
 * No C++ exception ever leaves a function of this header.
 *
 * Not offered here: cancelling a kh_prewarm() from another thread, or
 * retries and the longest hub wait per handle; they come from the
 * environment (KERNHUB_RETRIES, KERNHUB_MAX_WAIT), as for the CLI. */
#ifndef KERNHUB_KERNHUB_H
#define KERNHUB_KERNHUB_H

#include <stdint.h> /* NOLINT(modernize-deprecated-headers): this header is C */

#ifndef KH_API
#if defined(_WIN32)
#define KH_API
#else
#define KH_API __attribute__((visibility("default")))
#endif
#endif

#ifdef __cplusplus
extern "C" {
#endif

/* Settings, the kernels prewarmed through it, and each thread's last error
 * on it. Opaque. */
typedef struct kh_hub kh_hub;

/* A new handle with default settings: everything the environment and the
 * installed default registry say, exactly like `kernhub` with no flags
 * (KERNHUB_ENDPOINT, KERNHUB_CACHE, HF_TOKEN, KERNHUB_OFFLINE, ...; README,
 * "Environment"). Nothing is read or fetched before the first kh_prewarm().
 * Returns NULL only when out of memory. Free it with kh_hub_free(). */
KH_API kh_hub* kh_hub_new(void);

/* Frees the handle and everything it owns; the strings kh_last_error()
 * returned for it, on any thread, are no longer valid. No other call on the
 * handle may be running or follow. Kernels already resolved stay loaded and
 * every pointer kh_symbol() returned stays valid: kernhub never unloads a
 * kernel. NULL is allowed and does nothing. */
KH_API void kh_hub_free(kh_hub* hub);

/* Sets one setting of the handle. `key` and `value` are copied; the caller
 * keeps ownership of both. An empty value restores the default of that key
 * (for the repeatable keys: clears the list).
 *
 *   endpoint        hub URL (http://, https://, file://).
 *                   "": KERNHUB_ENDPOINT, then HF_ENDPOINT, then
 *                   https://huggingface.co.
 *   cache_dir       cache root. "": KERNHUB_CACHE, KERNELS_CACHE,
 *                   HF_HUB_CACHE, $HF_HOME/hub, ~/.cache/huggingface/hub.
 *   registry        a registry file stacked after the default registry, the
 *                   project's kernhub.json and KERNHUB_REGISTRY, like
 *                   `--registry`. Repeatable: each call appends one file;
 *                   a later file wins per name. "": no extra files.
 *   project         the directory searched for kernhub.json.
 *                   "": the current directory.
 *   offline         "1"/"true": never use the network; "0"/"false": use it
 *                   when needed. "": KERNHUB_OFFLINE or HF_HUB_OFFLINE.
 *   target          a variant to use instead of detecting the host, like
 *                   `--target`. Repeatable: each call appends one.
 *                   "": detect the host.
 *   token           the hub token, sent only to the endpoint's own origin.
 *                   "": HF_TOKEN, then the file $HF_HOME/token. The value
 *                   never appears in any message. Surrounding white space
 *                   is trimmed; a token that is only white space, or holds
 *                   a space, a control character (CR, LF, ...) or a
 *                   non-ASCII byte inside, is refused with 2: it would end
 *                   the Authorization header. A malformed HF_TOKEN or token
 *                   file makes the first request to an http(s) hub fail
 *                   with 2; nothing is refused before a request needs it.
 *   verify_on_load  "1"/"true": re-hash the file before every load;
 *                   "0"/"false": trust the verified cache.
 *                   "": KERNHUB_VERIFY_ON_LOAD.
 *   allowed_orgs    comma-separated organisations whose repos may be
 *                   fetched or loaded; any other is refused with 4.
 *                   "": KERNHUB_ALLOWED_ORGS (unset: every organisation).
 *   require_signatures  "1"/"true": refuse (4) a kernel whose registry
 *                   entry has no "signature" policy. "":
 *                   KERNHUB_REQUIRE_SIGNATURES.
 *   sigstore_trusted_root  the Sigstore trusted_root.json signatures are
 *                   checked against. "": KERNHUB_SIGSTORE_TRUSTED_ROOT,
 *                   else the public-good root built into kernhub.
 *   tvm_ffi_library the tvm-ffi runtime (libtvm_ffi.so) to bind for tvm-ffi
 *                   kernels. "": KERNHUB_TVM_FFI_LIBRARY, else the places
 *                   README "tvm-ffi variants" lists. A process binds one.
 *   torch_dir       a torch package folder or LibTorch root whose torch
 *                   selects torch variants (README "Torch kernels"). "":
 *                   KERNHUB_TORCH_DIR, else the Python environments.
 *   backend         "cpu": select CPU variants where torch or the driver
 *                   says CUDA. "": KERNHUB_BACKEND, else detected.
 *   local_kernels   "ORG/REPO=PATH[:ORG/REPO=PATH...]": load those repos
 *                   from local build folders, with no request and no cache
 *                   write (README "Local kernels"). "": LOCAL_KERNELS.
 *   trust_remote_code  "1": every ORG/REPO no registry names passes the
 *                   trusted-publisher check; "ORG/REPO,ORG/REPO": those do
 *                   (README "Trusted publishers"). "":
 *                   KERNHUB_TRUST_REMOTE_CODE.
 *   host            select for a described machine, as --host describes it
 *                   ("cpu=x86_64,os=linux,cuda=13.0,torch=2.15"); not with
 *                   target. A malformed description makes the next
 *                   kh_prewarm() return 2 naming the key.
 *
 * Numeric settings, decimal digits; "" means the environment variable, else
 * the default (README, "Environment"). A value outside its range makes the
 * next kh_prewarm() return 2 naming the setting.
 *   retries                  KERNHUB_RETRIES, 0 to 10 (3)
 *   max_wait_seconds         KERNHUB_MAX_WAIT, 0 to 86400 (60)
 *   max_listing_entries      KERNHUB_MAX_LISTING_ENTRIES, 1 to 100000000 (100000)
 *   max_listing_bytes        KERNHUB_MAX_LISTING_BYTES, 1024 to 536870912 (64 MiB)
 *   api_timeout_seconds      KERNHUB_API_TIMEOUT, 1 to 86400 (60)
 *   min_rate                 KERNHUB_MIN_RATE, bytes/s, 0 (off) to 100000000 (1024)
 *   min_rate_window_seconds  KERNHUB_MIN_RATE_WINDOW, 1 to 3600 (30)
 *   max_connections          KERNHUB_MAX_CONNECTIONS, 1 to 64 (8)
 *   ref_ttl                  KERNHUB_REF_TTL, seconds, 0 to 31536000 (0)
 *   archive_max_bytes        KERNHUB_ARCHIVE_MAX_BYTES, at least 1
 *                            (max(512 MiB, 20 x the archive's size))
 *   archive_max_entries      KERNHUB_ARCHIVE_MAX_ENTRIES, 1 to 10000000 (100000)
 *   archive_max_path         KERNHUB_ARCHIVE_MAX_PATH, 1 to 4096 (1024)
 *
 * Booleans take exactly "1", "0", "true" or "false". A value is at most
 * 4096 bytes, and a repeatable key holds at most 256 values. The endpoint,
 * registry files and targets are checked by the next kh_prewarm(): a bad
 * endpoint or registry file makes it return 2, a target no variant
 * matches 3, a cache_dir that cannot be written 1; a project folder without
 * kernhub.json simply adds no registry. Settings changed after a
 * kh_prewarm() apply from the next kh_prewarm() on; kernels already
 * prewarmed stay available.
 *
 * A kh_prewarm() runs to its end with the settings the handle had when it
 * started: a kh_hub_set() from another thread meanwhile returns at once,
 * does not affect that kh_prewarm(), and applies to every kh_prewarm()
 * that starts after it returned. Calls of kh_hub_set() from several
 * threads apply one after the other, in some order; appends to a
 * repeatable key are all kept.
 *
 * Returns 0, or 2 (kh_last_error() says why) for a NULL handle, key or
 * value, an unknown key, a bad boolean, or a value over the limits; the
 * settings are then unchanged. */
KH_API int kh_hub_set(kh_hub* hub, const char* key, const char* value);

/* Resolves `name` and makes its kernel ready: a registry name
 * ("vector-add", "flash-attn3") or a repo "ORG/REPO[@REVISION]" (default
 * revision "main") whose registry entries agree on a symbol; entries that
 * disagree, or none, make it 2. Fetches the variant this host needs when
 * the cache lacks it, verifies it, loads it and resolves its entry point,
 * which kh_symbol(hub, name) then returns. Blocks until done; the network
 * is used only when the cache cannot answer.
 *
 * Returns 0 on success, else one of the codes listed at the top of this
 * file (2 for a NULL handle or name) and kh_last_error() says why. A failure
 * leaves an earlier successful kh_prewarm() of the same name in place.
 * Other threads may use the handle while it runs (see kh_hub_set() for
 * settings changed meanwhile). */
KH_API int kh_prewarm(kh_hub* hub, const char* name);

/* The entry point of `name` recorded by the successful kh_prewarm() of the
 * very same `name` string on this handle (not the dlsym symbol name) that
 * started last, or NULL when there was none (kh_last_error() then says
 * so); when kh_prewarm() calls of one name overlap on several threads, one
 * that started earlier but ended later does not replace it (the rule of
 * kernhub::Client::loaded too). Another handle's kh_prewarm() never shows
 * here. The
 * pointer stays valid for the life of the process, also after
 * kh_hub_free(). For a shared-object kernel, cast it to the kernel's
 * function type; for a CUDA kernel (a fatbin or cubin) it is the driver's
 * CUfunction handle, for cuLaunchKernel; for a tvm-ffi kernel it is a
 * kh_tvm_safe_call, for kh_tvm_call(). For a torch op it is NULL: see
 * kh_torch_op(). */
KH_API void* kh_symbol(kh_hub* hub, const char* name);

/* ---- torch kernels (README, "Torch kernels") ----------------------------
 * A kernel of a torch or torch-stable-abi variant is an op its library
 * registered in LibTorch's dispatcher when kh_prewarm() loaded it. The
 * process must have LibTorch: linked, or loaded by kh_prewarm() itself from
 * the torch kernhub found (the key torch_dir, KERNHUB_TORCH_DIR, else the
 * Python environments' torch package; README "Which torch"): its
 * lib/libc10.so and lib/libtorch_cpu.so (for a CUDA variant also
 * lib/libc10_cuda.so and lib/libtorch_cuda.so), RTLD_GLOBAL, for the life
 * of the process. kh_torch_op() names that op, as
 * "namespace::op" or "namespace::op.overload", for the stable C shim's
 * torch_call_dispatcher(name, overload, stack, abi_version): split it at
 * "::" and ".". NULL when `name` was not prewarmed on this handle or is not
 * a torch op (kh_last_error() says which). The string stays valid until
 * kh_hub_free(). */
KH_API const char* kh_torch_op(kh_hub* hub, const char* name);

/* ---- tvm-ffi kernels (README, "tvm-ffi variants") ----------------------
 * For a kernel of a tvm-ffi variant, kh_symbol() returns its function in
 * the TVM FFI C calling convention (a kh_tvm_safe_call). Call it with
 * kh_tvm_call(), or directly for the lowest cost: the status is then the
 * caller's to read (non-zero means the runtime holds a raised error, which
 * only the runtime's TVMFFIErrorMoveFromRaised can take). */

/* One argument or result: the 16-byte TVMFFIAny cell. */
typedef struct kh_tvm_any {
    int32_t type_index; /* KH_TVM_* */
    uint32_t zero_padding;
    union {
        int64_t v_int64;
        double v_float64;
        void* v_ptr;
    } value;
} kh_tvm_any;

#define KH_TVM_NONE 0
#define KH_TVM_INT 1
#define KH_TVM_BOOL 2
#define KH_TVM_FLOAT 3
#define KH_TVM_OPAQUE_PTR 4
#define KH_TVM_DLTENSOR 7 /* value.v_ptr is a DLTensor* */

/* TVMFFISafeCallType. `self` is NULL for library functions; `result` must
 * hold KH_TVM_NONE before the call. Returns 0 on success. */
typedef int (*kh_tvm_safe_call)(void* self, const kh_tvm_any* args, int32_t num_args, kh_tvm_any* result);

/* Calls `function`, which must be what kh_symbol() returned for a tvm-ffi
 * kernel (anything else is called all the same, with undefined results), with
 * `num_args` arguments and stores what it returned in *result (NULL:
 * dropped): none, a bool, an integer, a float or an opaque pointer.
 * Returns 0; 9 when the function raised an error, whose kind and message
 * kh_last_error() then gives (cut at 4 KiB); 2 for a NULL handle or
 * function, a negative num_args, NULL args with arguments, or a function
 * that returned anything else (a string or a tensor; an object is
 * released, as kernhub holds none). The handle only carries the calling
 * thread's error text, so threads may share it. */
KH_API int kh_tvm_call(kh_hub* hub, void* function, const kh_tvm_any* args, int32_t num_args, kh_tvm_any* result);

/* Sets the tvm-ffi runtime's current stream for CUDA device `device` on
 * the calling thread (TVMFFIEnvSetStream), which a CUDA tvm-ffi kernel
 * launches on; the previous one goes to *previous unless it is NULL.
 * Returns 0; 2 for a NULL handle or a device outside 0 to 1023; 7 when no
 * tvm-ffi kernel was prewarmed in this process or the runtime refused. */
KH_API int kh_tvm_set_stream(kh_hub* hub, int32_t device, void* stream, void** previous);

/* The calling thread's last failure on this handle as one printable line
 * ("<kind>: <message>", where a setting or a function the advice refers to
 * is named as this header names it: (kh_hub_set "offline"), (kh_prewarm)),
 * or NULL when the calling thread's last call on the handle succeeded or it
 * made none.
 * Other threads' calls on the handle do not change it. Owned by kernhub;
 * valid until the calling thread's next call on the same handle
 * (kh_last_error() itself excepted) or kh_hub_free(). For a NULL handle: a
 * constant message saying so. */
KH_API const char* kh_last_error(const kh_hub* hub);

/* The kind of a return code, for example "not found" for 3 or "offline"
 * for 6; "unknown error" for a number that is no code. A constant string. */
KH_API const char* kh_error_name(int code);

/* The kernhub version, for example "0.1.0". A constant string. */
KH_API const char* kh_version(void);

/* The release of the Python kernels library whose formats this kernhub
 * follows, for example "0.17.2": a variant whose metadata.json asks for a
 * newer one ("kernels-minver") is refused with 7 (README, "Minimum kernels
 * version"). A constant string. */
KH_API const char* kh_kernels_release(void);

#ifdef __cplusplus
}
#endif

#endif /* KERNHUB_KERNHUB_H */
