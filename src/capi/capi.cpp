// The C API (include/kernhub/kernhub.h) over kernhub::Client.
//
// A handle is settings (kernhub::Options), a Client built from them on
// first need, behind one short-held mutex, and the kernels its kh_load
// calls resolved; each thread's last error text on it lives with the
// thread (capi/thread_errors.hpp). Separate handles share what separate
// Clients share: the cache on disk and the process's CUDA and tvm-ffi
// bindings.
// Every entry point catches everything (docs/embedding.md, "How a handle works").
#include "kernhub/kernhub.h"

#include <pthread.h>

#include <cstdint>
#include <cstring>
#include <memory>
#include <mutex>
#include <new>
#include <optional>
#include <set>
#include <string>
#include <string_view>

#include "capi/hint.hpp"
#include "capi/setting.hpp"
#include "capi/thread_errors.hpp"
#include "common/one_at_a_time.hpp"
#include "common/text.hpp"
#include "kernhub/error.hpp"
#include "kernhub/events.hpp"
#include "kernhub/kernhub.hpp"
#include "kernhub/tvm_ffi.hpp"
#include "loader/resolved_table.hpp"
#include "tvmffi/runtime.hpp"

namespace {

using kernhub::quoted_name;
using kernhub::capi::Refusal;

constexpr int k_ok = static_cast<int>(kernhub::ErrorCode::ok);
constexpr int k_internal = static_cast<int>(kernhub::ErrorCode::internal);
constexpr int k_usage = static_cast<int>(kernhub::ErrorCode::usage);
constexpr int k_not_found = static_cast<int>(kernhub::ErrorCode::not_found);
constexpr int k_kernel = static_cast<int>(kernhub::ErrorCode::kernel);

}  // namespace

namespace kernhub::capi {

// Set on a thread while it runs a program's kh_message_fn: a kernhub call
// from inside one is refused, not left to wait for its own delivery to end.
thread_local bool delivering_message = false;

// The handle's EventSink: hands each one-line message (info, retry) to the
// program's kh_message_fn, one at a time for the handle, even from two
// Clients (a call still running on the one a settings change replaced).
// No lock is held while the program's function runs (OneAtATime), so a
// child made by fork() during a delivery goes on.
class MessageSink final : public kernhub::EventSink {
public:
    // Waits for a message being delivered, so the function replaced is not
    // running when it returns, then sets the function and runs `also` in
    // the same turn: two kh_hub_on_message calls take effect in one order.
    // Throws std::bad_alloc, before anything changed.
    template <typename Also>
    void set(kh_message_fn on_message, void* user, Also&& also) {
        std::unique_ptr<const Target> target;
        if (on_message != nullptr) target = std::make_unique<const Target>(Target{on_message, user});
        const kernhub::OneAtATime::Turn turn(m_turns);
        m_target.swap(target);  // the one replaced is freed after the turn
        also();
    }
    void on_event(const kernhub::Event& event) noexcept override {
        int kind = KH_MESSAGE_RETRY;
        if (event.kind == kernhub::Event::Kind::info) {
            kind = starts_with(event.text, "warning: ") ? KH_MESSAGE_WARNING
                   : starts_with(event.text, "note: ")  ? KH_MESSAGE_NOTE
                                                        : KH_MESSAGE_STATUS;
        } else if (event.kind != kernhub::Event::Kind::retry) {
            return;
        }
        try {
            // Escaped, and still within the bound once escaped.
            const std::string line = kernhub::bounded(event.text, kernhub::k_max_event_text_bytes);
            const kernhub::OneAtATime::Turn turn(m_turns);
            if (!m_target) return;
            delivering_message = true;
            try {
                m_target->on_message(kind, line.c_str(), m_target->user);
            } catch (...) {
                // A C++ function that threw: the message is dropped.
            }
            delivering_message = false;
        } catch (...) {
            // Out of memory: the message is dropped.
        }
    }

private:
    static bool starts_with(const std::string& text, std::string_view prefix) {
        return text.compare(0, prefix.size(), prefix) == 0;
    }
    // The function and its `user`, replaced as one pointer: a child forked
    // while another thread sets them sees the old pair or the new one.
    struct Target {
        kh_message_fn on_message;
        void* user;
    };
    kernhub::OneAtATime m_turns;  // guards m_target
    std::unique_ptr<const Target> m_target;
};

}  // namespace kernhub::capi

// Shared by every thread that calls with the handle. `mutex` guards the
// fields under it and is held only to read or replace them, never across
// building a Client (which reads registry files) or a load (which may wait
// on the network): a long kh_prewarm or kh_load holds a shared_ptr to the Client it
// started with and leaves the handle free for every other call.
struct kh_hub {
    std::mutex mutex;
    // Where kh_hub_on_message sends messages; options.events points at it
    // while a function is set. Declared before `client`, so it outlives
    // every Client of the handle. Its turn, never taken under `mutex`,
    // orders the kh_hub_on_message calls: a thread waiting for one holds
    // no lock a forked child would inherit.
    kernhub::capi::MessageSink messages;
    kernhub::Options options;
    // Built from `options` by the first kh_prewarm or kh_load after a
    // settings change; a call still running on an older one keeps that one
    // alive.
    std::shared_ptr<kernhub::Client> client;
    std::uint64_t settings_changes = 0;
    // kh_load name -> what the latest-started successful one resolved.
    // The handle's own table, not its Client's: a settings change replaces
    // the Client, and what was loaded before stays. It is the table type
    // a Client keeps, so kh_symbol and Client::loaded follow one rule.
    kernhub::loader::ResolvedTable resolved;
    // The op names kh_torch_op handed out (under `mutex`): a node's string
    // stays put until kh_hub_free.
    std::set<std::string> torch_ops;

    // Never changes; the calling thread's error texts are keyed by it.
    const kernhub::capi::HandleToken life = std::make_shared<const kernhub::capi::HandleLife>();

    // A string_view, so that passing a message allocates nothing.
    int fail(int code, std::string_view message) noexcept {
        kernhub::capi::ThreadErrors::current().failed(life, code, message);
        return code;
    }
    int succeed() noexcept {
        kernhub::capi::ThreadErrors::current().succeeded(life);
        return k_ok;
    }
    // Runs `body` with every exception mapped to a return code and a message.
    template <class Body>
    int guarded(Body&& body) noexcept {
        if (kernhub::capi::delivering_message) {
            return fail(k_usage,
                        "a kh_message_fn called kernhub; it may call only kh_last_error, kh_error_name, kh_version and "
                        "kh_kernels_release");
        }
        try {
            body();
            return succeed();
        } catch (const Refusal& e) {
            return fail(e.code, e.message);
        } catch (const kernhub::Error& e) {
            return fail_with_error(e);
        } catch (const std::bad_alloc&) {
            return fail(k_internal, "out of memory");
        } catch (const std::exception& e) {
            return fail_with_what(e);
        } catch (...) {
            return fail(k_internal, "internal error: unknown exception; please report it");
        }
    }
    // The message names its hint as the C API does: a kh_hub_set key, a C
    // function.
    int fail_with_error(const kernhub::Error& e) noexcept {
        try {
            return fail(static_cast<int>(e.code()), e.what_with(kernhub::capi::hint_name(e.hint())));
        } catch (...) {
            return fail(static_cast<int>(e.code()), e.what());
        }
    }
    int fail_with_what(const std::exception& e) noexcept {
        try {
            return fail(k_internal, std::string("internal error: ") + e.what() + "; please report it");
        } catch (...) {
            return fail(k_internal, "out of memory");
        }
    }

    // The Client a kh_prewarm or kh_load starting now uses, and its place in
    // the order of their starts. When the settings changed since the last one,
    // a new Client is built outside the lock; if they change again
    // meanwhile, this call keeps the one built from the settings it
    // started with.
    std::shared_ptr<kernhub::Client> start_call(std::uint64_t& started) {
        kernhub::Options snapshot;
        std::uint64_t version = 0;
        {
            std::lock_guard<std::mutex> lock(mutex);
            started = resolved.start();
            if (client) return client;
            snapshot = options;
            version = settings_changes;
        }
        auto made = std::make_shared<kernhub::Client>(std::move(snapshot));
        // Declared after `made`, so a Client not kept is destroyed unlocked.
        std::lock_guard<std::mutex> lock(mutex);
        if (version != settings_changes) return made;
        if (!client) client = std::move(made);
        return client;
    }
};

namespace kernhub::capi {

// Every live handle, so that a child made by fork() finds none of their
// mutexes held by a thread it does not have: pthread_atfork handlers take
// them all before fork() and let them go after it, in parent and child. A
// handle's mutex is held only for moments, never while kernhub waits on
// the network, the disk or the program, so fork() waits at most that.
class LiveHandles {
public:
    // NULL only when there was no memory for it at load time.
    static LiveHandles* all() noexcept { return g_live; }
    // Throws std::bad_alloc.
    void add(kh_hub* hub) {
        const std::lock_guard<std::mutex> lock(m_mutex);
        m_hubs.insert(hub);
    }
    void remove(kh_hub* hub) {
        const std::lock_guard<std::mutex> lock(m_mutex);
        m_hubs.erase(hub);
    }

private:
    LiveHandles() noexcept { (void)::pthread_atfork(&before_fork, &after_fork, &after_fork); }
    // Each handle's mutex, then its table of resolved kernels (never taken
    // under one another elsewhere).
    static void before_fork() noexcept {
        LiveHandles& live = *g_live;
        live.m_mutex.lock();
        for (kh_hub* hub : live.m_hubs) {
            hub->mutex.lock();
            hub->resolved.lock_for_fork();
        }
    }
    static void after_fork() noexcept {
        LiveHandles& live = *g_live;
        for (kh_hub* hub : live.m_hubs) {
            hub->resolved.unlock_after_fork();
            hub->mutex.unlock();
        }
        live.m_mutex.unlock();
    }
    std::mutex m_mutex;  // guards m_hubs; taken before any handle's mutex
    std::set<kh_hub*> m_hubs;
    // Made, and the handlers registered, when the library is loaded (a
    // fork() during a lazy first use could leave a child waiting on its
    // initialisation); never destroyed, as the handlers may run while
    // statics are torn down.
    static LiveHandles* const g_live;
};

LiveHandles* const LiveHandles::g_live = new (std::nothrow) LiveHandles();

}  // namespace kernhub::capi

extern "C" {

kh_hub* kh_hub_new(void) {
    if (kernhub::capi::delivering_message) return nullptr;  // from a kh_message_fn
    try {
        kernhub::capi::LiveHandles* live = kernhub::capi::LiveHandles::all();
        if (live == nullptr) return nullptr;  // no memory at load time
        auto hub = std::make_unique<kh_hub>();
        live->add(hub.get());
        return hub.release();
    } catch (...) {
        return nullptr;  // only std::bad_alloc can get here
    }
}

void kh_hub_free(kh_hub* hub) {
    if (kernhub::capi::delivering_message) return;  // from a kh_message_fn: refused, as every call is
    if (hub == nullptr) return;
    kernhub::capi::LiveHandles::all()->remove(hub);  // not NULL: the handle was made
    delete hub;
}

int kh_hub_set(kh_hub* hub, const char* key, const char* value) {
    if (hub == nullptr) return k_usage;
    // Destroyed after the lock is let go, should it be the last owner.
    std::shared_ptr<kernhub::Client> dropped;
    return hub->guarded([&] {
        if (key == nullptr) throw Refusal{k_usage, "kh_hub_set: the key is NULL"};
        if (value == nullptr) {
            throw Refusal{k_usage,
                          "kh_hub_set: the value of " + quoted_name(key) + " is NULL; pass \"\" for the default"};
        }
        // Under the lock, so that two threads appending to a repeatable key
        // both count; on a copy, so that a refused value leaves the settings
        // as they were.
        std::lock_guard<std::mutex> lock(hub->mutex);
        kernhub::Options changed = hub->options;
        kernhub::capi::apply_setting(changed, key, value);
        hub->options = std::move(changed);
        dropped = std::move(hub->client);  // the next kh_prewarm or kh_load builds one from the new settings
        ++hub->settings_changes;
    });
}

int kh_hub_on_message(kh_hub* hub, kh_message_fn on_message, void* user) {
    if (hub == nullptr) return k_usage;
    std::shared_ptr<kernhub::Client> dropped;
    return hub->guarded([&] {
        // May wait for a message being delivered, holding no lock.
        hub->messages.set(on_message, user, [&] {
            std::lock_guard<std::mutex> lock(hub->mutex);
            kernhub::EventSink* events = on_message != nullptr ? &hub->messages : nullptr;
            if (hub->options.events == events) return;
            // Whether the Client has a sink is fixed when it is built.
            hub->options.events = events;
            dropped = std::move(hub->client);
            ++hub->settings_changes;
        });
    });
}

int kh_prewarm(kh_hub* hub, const char* name) {
    if (hub == nullptr) return k_usage;
    return hub->guarded([&] {
        if (name == nullptr) throw Refusal{k_usage, "kh_prewarm: the kernel name is NULL"};
        std::uint64_t started = 0;
        std::shared_ptr<kernhub::Client> client = hub->start_call(started);
        (void)client->fetch(name);
    });
}

int kh_load(kh_hub* hub, const char* name) {
    if (hub == nullptr) return k_usage;
    return hub->guarded([&] {
        if (name == nullptr) throw Refusal{k_usage, "kh_load: the kernel name is NULL"};
        std::uint64_t started = 0;
        std::shared_ptr<kernhub::Client> client = hub->start_call(started);
        // Recorded unless a kh_load of the same name that started later
        // succeeded first.
        // A torch variant in a process without LibTorch loads it from
        // KERNHUB_TORCH_DIR first: a C program reaches torch's ops through
        // the stable C shim, which that LibTorch then provides.
        kernhub::LoadOptions load;
        load.load_torch = true;
        hub->resolved.publish(name, client->load(name, load), started);
    });
}

void* kh_symbol(kh_hub* hub, const char* name) {
    if (hub == nullptr) return nullptr;
    void* address = nullptr;
    hub->guarded([&] {
        if (name == nullptr) throw Refusal{k_usage, "kh_symbol: the kernel name is NULL"};
        const std::optional<kernhub::LoadResult> found = hub->resolved.find(name);
        if (found) address = found->address;
        if (!found) {
            throw Refusal{k_not_found, "kernel " + quoted_name(name) +
                                           " was not loaded on this handle; call kh_load with the same name first"};
        }
    });
    return address;
}

const char* kh_torch_op(kh_hub* hub, const char* name) {
    if (hub == nullptr) return nullptr;
    const char* op = nullptr;
    hub->guarded([&] {
        if (name == nullptr) throw Refusal{k_usage, "kh_torch_op: the kernel name is NULL"};
        const std::optional<kernhub::LoadResult> found = hub->resolved.find(name);
        if (!found) {
            throw Refusal{k_not_found, "kernel " + quoted_name(name) +
                                           " was not loaded on this handle; call kh_load with the same name first"};
        }
        if (found->torch_op.empty()) {
            throw Refusal{k_usage, "kernel " + quoted_name(name) + " is not a torch op (it is of kind " +
                                       kernhub::to_string(found->kind) + "); take its entry point with kh_symbol"};
        }
        std::lock_guard<std::mutex> lock(hub->mutex);
        op = hub->torch_ops.insert(found->torch_op).first->c_str();
    });
    return op;
}

int kh_tvm_call(kh_hub* hub, void* function, const kh_tvm_any* args, int32_t num_args, kh_tvm_any* result) {
    if (hub == nullptr) return k_usage;
    if (kernhub::capi::delivering_message) return hub->guarded([] {});
    if (function == nullptr || num_args < 0 || (args == nullptr && num_args > 0)) {
        return hub->fail(k_usage,
                         "kh_tvm_call: the function is NULL, num_args is negative, or args is NULL with arguments");
    }
    static_assert(sizeof(kh_tvm_any) == sizeof(kernhub::TvmAny), "kh_tvm_any is TVMFFIAny");
    kernhub::TvmAny returned;
    const int status = reinterpret_cast<kernhub::TvmFunction::SafeCall>(function)(
        nullptr, reinterpret_cast<const kernhub::TvmAny*>(args), num_args, &returned);
    if (status == 0 && static_cast<std::uint32_t>(returned.type_index) <=
                           static_cast<std::uint32_t>(kernhub::TvmType::opaque_pointer)) {
        if (result != nullptr) std::memcpy(result, &returned, sizeof returned);
        return hub->succeed();
    }
    return hub->guarded([&] {
        const kernhub::tvmffi::Runtime* runtime = kernhub::tvmffi::bound();
        if (runtime == nullptr) {
            throw Refusal{k_usage, "kh_tvm_call: no tvm-ffi kernel was loaded in this process"};
        }
        if (status == 0) {
            const bool object = returned.type_index >= static_cast<std::int32_t>(kernhub::TvmType::first_object);
            if (object) runtime->api.object_dec_ref(returned.value.v_ptr);
            throw Refusal{k_usage, std::string("kh_tvm_call: the function returned ") +
                                       (object ? "an object" : "a value") + " of type index " +
                                       std::to_string(returned.type_index) + ", which kernhub does not read"};
        }
        const kernhub::tvmffi::Raised raised = kernhub::tvmffi::take_raised(*runtime);
        if (raised.kind.empty() && raised.message.empty()) {
            throw kernhub::Error(kernhub::ErrorCode::kernel, "the tvm-ffi function failed with status " +
                                                                 std::to_string(status) + " and raised no error");
        }
        // Through Error, so the message is bounded as every kernhub message is.
        throw kernhub::Error(kernhub::ErrorCode::kernel,
                             "the tvm-ffi function raised " + raised.kind + ": " + raised.message);
    });
}

int kh_tvm_set_stream(kh_hub* hub, int32_t device, void* stream, void** previous) {
    if (hub == nullptr) return k_usage;
    return hub->guarded([&] {
        void* before = kernhub::set_tvm_ffi_stream(device, stream);
        if (previous != nullptr) *previous = before;
    });
}

const char* kh_last_error(const kh_hub* hub) {
    if (hub == nullptr) return "usage error: the kh_hub handle is NULL";
    return kernhub::capi::ThreadErrors::current().last(hub->life);
}

const char* kh_error_name(int code) {
    return kernhub::to_string(static_cast<kernhub::ErrorCode>(code));
}

const char* kh_version(void) {
    return kernhub::version();
}

const char* kh_kernels_release(void) {
    return kernhub::kernels_release();
}

}  // extern "C"
