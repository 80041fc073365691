/* kernhub C API: for programs in C, and for engines and FFI layers that
 * cannot take C++ types.
 *
 * It is the same pipeline as kernhub::Client (kernhub.hpp): a name is
 * resolved through the stacked registries, the one build variant this host
 * needs is fetched from the hub into the shared cache (or found there),
 * verified, loaded, and its entry point resolved. Call kh_load() once per
 * kernel at start-up, keep the pointer kh_symbol() gives, cast it to the
 * kernel's function type and call it: no lookup, lock or allocation then.
 * kh_prewarm() only makes the cache hold the verified kernel (an image
 * build step), loading nothing.
 *
 *     kh_hub* hub = kh_hub_new();
 *     if (hub == NULL) return 1;
 *     int rc = kh_load(hub, "vector-add");
 *     if (rc != 0) { fprintf(stderr, "%s\n", kh_last_error(hub)); kh_hub_free(hub); return rc; }
 *     void* address = kh_symbol(hub, "vector-add");
 *     void (*add)(const float*, const float*, float*, size_t);
 *     memcpy(&add, &address, sizeof add);  (ISO C's way to cast it)
 *     kh_hub_free(hub);  (the pointer stays valid)
 *     add(a, b, out, n);
 *
 * Return codes are the exit codes of the kernhub command-line tool
 * (docs/commands.md, "Exit codes"):
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
 * kh_load() that is fetching does not hold up kh_symbol(), kh_hub_set(),
 * kh_last_error() or a kh_load() of another kernel on the same handle
 * (one that needs the very files being fetched waits for them, as with
 * kernhub::Client). Messages are delivered one at a time per handle, so
 * kh_hub_on_message(), and a kh_prewarm() or kh_load() with a message to
 * report, wait for a message being delivered to the program's function.
 * Each thread has its own kh_last_error() text per handle. Separate
 * handles share the cache on disk and what the process itself has once: a
 * library loaded by two handles is one dlopen handle, and the CUDA driver
 * and the tvm-ffi runtime are bound once per process, by the first handle
 * that needs them. Each handle keeps its own table of resolved kernels,
 * as each kernhub::Client does, so two handles whose registries map one
 * name to different kernels each get their own. The only state this layer
 * keeps outside its handles is each thread's error texts and whether the
 * thread is running a kh_message_fn.
 *
 * No C++ exception ever leaves a function of this header.
 *
 * Warnings, notes, retries and status lines reach a function the program
 * passes to kh_hub_on_message(); download progress (the plan, each file's
 * start, bytes and end) is not offered here, nor is cancelling a running
 * kh_prewarm() or kh_load() from another thread. */
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

/* Settings, the kernels loaded through it, and each thread's last error
 * on it. Opaque. */
typedef struct kh_hub kh_hub;

/* A new handle with default settings: everything the environment and the
 * installed default registry say, exactly like `kernhub` with no flags
 * (KERNHUB_ENDPOINT, KERNHUB_CACHE, HF_TOKEN, KERNHUB_OFFLINE, ...;
 * docs/configuration.md). Nothing is read or fetched before the first
 * kh_prewarm() or kh_load().
 * Returns NULL when out of memory or called from a kh_message_fn. Free it
 * with kh_hub_free(). */
KH_API kh_hub* kh_hub_new(void);

/* Frees the handle and everything it owns; the strings kh_last_error()
 * returned for it, on any thread, are no longer valid. No other call on the
 * handle may be running or follow. Kernels already resolved stay loaded and
 * every pointer kh_symbol() returned stays valid: kernhub never unloads a
 * kernel. NULL is allowed and does nothing; so does a call from a
 * kh_message_fn. */
KH_API void kh_hub_free(kh_hub* hub);

/* Sets one setting of the handle. `key` and `value` are copied; the caller
 * keeps ownership of both. The keys, what each takes, its range and its
 * default are the "C key" column of the settings table in
 * docs/configuration.md (the one declaration of every setting). An empty
 * value restores the default of that key: its environment variable, else
 * its default (for the repeatable keys, registry and target: clears the
 * list; each other call appends one value). Switches take 1, true, yes,
 * on, 0, false, no or off, in any case; numbers decimal digits only. The token never
 * appears in any message; one that is only white space, or holds a space,
 * a control character or a non-ASCII byte inside, is refused with 2.
 *
 * A value is at most 4096 bytes, and a repeatable key holds at most 256
 * values. A number outside its range, a malformed host description, a bad
 * endpoint or registry file make the next kh_prewarm() or kh_load() return
 * 2 naming the setting; a target no variant matches 3; a cache_dir that
 * cannot be written 1; a project folder without kernhub.json simply adds
 * no registry. Settings changed after a kh_load() apply from the next call
 * on; kernels already loaded stay available.
 *
 * A kh_prewarm() or kh_load() runs to its end with the settings the handle
 * had when it started: a kh_hub_set() from another thread meanwhile
 * returns at once, does not affect that call, and applies to every call
 * that starts after it returned. Calls of kh_hub_set() from several
 * threads apply one after the other, in some order; appends to a
 * repeatable key are all kept.
 *
 * Returns 0, or 2 (kh_last_error() says why) for a NULL handle, key or
 * value, an unknown key (the message names the nearest key), a bad boolean
 * or number, a value over the limits, or a call from a kh_message_fn; the
 * settings are then unchanged. */
KH_API int kh_hub_set(kh_hub* hub, const char* key, const char* value);

/* The kinds of message a kh_message_fn is given. */
#define KH_MESSAGE_STATUS 0  /* what a call is doing: resuming a download, verifying a signature */
#define KH_MESSAGE_WARNING 1 /* the line starts with "warning: " */
#define KH_MESSAGE_NOTE 2    /* the line starts with "note: " */
#define KH_MESSAGE_RETRY 3   /* a request is sent again: which, when and why */

/* A function kernhub calls with each one-line message of the calls on a
 * handle, and its kind (KH_MESSAGE_*). The warnings include, once per
 * process, one for each KERNHUB_* variable in the environment that is no
 * setting, naming the nearest one. `line` is printable (control
 * characters and bytes that are not UTF-8 are written as escapes), has no
 * trailing newline, and is valid only during the call. It is at most 4 KiB
 * once escaped: a longer text (it may quote what a hub sent) loses the
 * middle of words over 512 bytes, from the first, then its own middle,
 * with a marker saying how many bytes were cut at each place; no cut
 * splits a UTF-8 character. A call reports one message per retried
 * request and a few per file, so one that fetches many files through a
 * failing hub may report thousands. `user` is what kh_hub_on_message()
 * was given. It is called from the thread of the kh_prewarm() or
 * kh_load() that reports the message, or from a worker thread of that
 * call, never from two threads at once for one handle. It must return,
 * and quickly (not leave by longjmp, or end its thread): while it runs,
 * the call holds the cache locks of the files it is fetching, on which
 * other threads and processes using the cache wait. It may call only
 * kh_last_error(), kh_error_name(), kh_version() and kh_kernels_release():
 * any other function of this header called from it returns 2 (or NULL)
 * and does nothing.
 *
 * A child made by fork() may set a function, change settings and make
 * calls on the handle whatever other threads were doing with it then
 * (delivering a message, waiting in kh_hub_on_message(), changing
 * settings, downloading: it waits for the parent's download of a file it
 * needs to end); the parent's calls in flight do not go on in the child.
 * A child made from inside this function must exec or _exit before the
 * function returns there: the call it would return into is the parent's,
 * with the parent's cache locks, files and threads, so a child that
 * returns is ended at once with _exit(1), after one line on stderr.
 * kernhub's pthread_atfork handlers see to the handle's own state (its
 * mutexes are taken around fork()). A fork
 * at the instant another thread holds one of the Client's internal locks
 * (each held for moments) or binds libcurl for the first time can still
 * leave the child waiting for ever, as with any lock of a threaded
 * program; so can a child made without the handlers (_Fork(), a raw
 * clone). */
typedef void (*kh_message_fn)(int kind, const char* line, void* user);

/* Sends the handle's messages to `on_message`, with `user` (NULL, the
 * default: drops them). When it returns, the function it replaced is not
 * running (it waits for a message being delivered) and is never called
 * again, so what its `user` points at may be freed; every later message,
 * also of a call already running, goes to the new function. A call that
 * started while no function was set reports nothing. Messages end with
 * kh_hub_free(). A warning given once per process goes to the first
 * handle, or kernhub::Client with an EventSink, that starts with a
 * function (or sink) set: a handle starts at its first kh_prewarm() or
 * kh_load() after a change of settings or of whether a function is set
 * (should the function be unset meanwhile, the warning is lost). Returns
 * 0, or 2 for a NULL handle or a call from a kh_message_fn. */
KH_API int kh_hub_on_message(kh_hub* hub, kh_message_fn on_message, void* user);

/* Makes the cache hold, and verifies, the kernel of `name`, loading nothing:
 * a registry name ("vector-add", "flash-attn3") or a repo
 * "ORG/REPO[@REVISION]" (default revision "main"). Fetches the variant this
 * host (or the target setting) needs, and the kernels it depends on, when the
 * cache lacks them, and verifies every file. For an image build step; a
 * program that calls the kernel uses kh_load().
 *
 * Returns 0; 2 for a NULL handle or name, a bad setting, a repo whose
 * registry entries disagree, or a call from a kh_message_fn; 3 when the name,
 * repo, revision or a file is not found or no variant fits; 4 when a hash,
 * digest, signature, trust or organisation check fails; 5 for a network or
 * hub error after retries; 6 offline and not cached; 7 when the variant needs
 * a newer kernels library than kh_kernels_release(); 1 when the cache cannot
 * be written. kh_last_error() says why. Other threads may use the handle
 * meanwhile. */
KH_API int kh_prewarm(kh_hub* hub, const char* name);

/* kh_prewarm(), then loads the variant's artifact (and first those of the
 * kernels it depends on) and resolves its entry point, which
 * kh_symbol(hub, name) then returns. Blocks until done; the network is
 * used only when the cache cannot answer.
 *
 * Returns kh_prewarm()'s codes, and 3 for a symbol the artifact lacks, 4
 * for a file that changed since it was verified (verify_on_load) or fails
 * the ELF checks, 7 when the dynamic loader, the CUDA driver (none, no
 * device, no binary for this GPU) or the tvm-ffi runtime refuses it, or a
 * torch variant finds no LibTorch of its version. A failure leaves an
 * earlier successful kh_load() of the same name in place. Other threads
 * may use the handle while it runs (see kh_hub_set() for settings changed
 * meanwhile). */
KH_API int kh_load(kh_hub* hub, const char* name);

/* The entry point of `name` recorded by the successful kh_load() of the very
 * same `name` string on this handle (not the dlsym symbol name) that started
 * last, or NULL when there was none (kh_last_error() then says so, with 3) or
 * when called from a kh_message_fn (2); when kh_load() calls of one name
 * overlap on several threads, one that started earlier but ended later does
 * not replace it (the rule of kernhub::Client::loaded too). Another handle's
 * kh_load() never shows here. The pointer stays valid for the life of the
 * process, also after kh_hub_free(). For a shared-object kernel, cast it to
 * the kernel's function type; for a CUDA kernel (a fatbin or cubin) it is the
 * driver's CUfunction handle, for cuLaunchKernel; for a tvm-ffi kernel it is
 * a kh_tvm_safe_call, for kh_tvm_call(). For a torch op it is NULL: see
 * kh_torch_op(). */
KH_API void* kh_symbol(kh_hub* hub, const char* name);

/* ---- torch kernels (docs/kernels.md, "Torch kernels") -------------------
 * A kernel of a torch or torch-stable-abi variant is an op its library
 * registered in LibTorch's dispatcher when kh_load() loaded it. The
 * process must have LibTorch: linked, or loaded by kh_load() itself from
 * the torch kernhub found (the key torch_dir, KERNHUB_TORCH_DIR, else the
 * Python environments' torch package; docs/kernels.md, "Which torch"): its
 * lib/libc10.so and lib/libtorch_cpu.so (for a CUDA variant also
 * lib/libc10_cuda.so and lib/libtorch_cuda.so), RTLD_GLOBAL, for the life
 * of the process. kh_torch_op() names that op, as
 * "namespace::op" or "namespace::op.overload", for the stable C shim's
 * torch_call_dispatcher(name, overload, stack, abi_version): split it at
 * "::" and ".". NULL when `name` was not loaded on this handle (3), is not
 * a torch op, or the call comes from a kh_message_fn (2; kh_last_error()
 * says which). The string stays valid until
 * kh_hub_free(). */
KH_API const char* kh_torch_op(kh_hub* hub, const char* name);

/* ---- tvm-ffi kernels (docs/kernels.md, "tvm-ffi variants") -------------
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
 * dropped): none, a bool, an integer, a float or an opaque pointer. Returns
 * 0; 9 when the function raised an error, whose kind and message
 * kh_last_error() then gives (cut at 4 KiB); 2 for a NULL handle or function,
 * a negative num_args, NULL args with arguments, or a function that returned
 * anything else (a string or a tensor; an object is released, as kernhub
 * holds none), or a call from a kh_message_fn. The handle only carries the
 * calling thread's error text, so threads may share it. */
KH_API int kh_tvm_call(kh_hub* hub, void* function, const kh_tvm_any* args, int32_t num_args, kh_tvm_any* result);

/* Sets the tvm-ffi runtime's current stream for CUDA device `device` on
 * the calling thread (TVMFFIEnvSetStream), which a CUDA tvm-ffi kernel
 * launches on; the previous one goes to *previous unless it is NULL.
 * Returns 0; 2 for a NULL handle, a device outside 0 to 1023 or a call
 * from a kh_message_fn; 7 when no tvm-ffi kernel was loaded in this
 * process or the runtime refused. */
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
 * for 6; "unknown error" for a number that is no code. A constant string;
 * never fails. */
KH_API const char* kh_error_name(int code);

/* The kernhub version, for example "0.3.0". A constant string; never
 * fails. */
KH_API const char* kh_version(void);

/* The release of the Python kernels library whose formats this kernhub
 * follows, for example "0.17.2": a variant whose metadata.json asks for a
 * newer one ("kernels-minver") is refused with 7. A constant string; never
 * fails. */
KH_API const char* kh_kernels_release(void);

#ifdef __cplusplus
}
#endif

#endif /* KERNHUB_KERNHUB_H */
