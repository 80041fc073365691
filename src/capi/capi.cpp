// The C API (include/kernhub/kernhub.h) over kernhub::Client.
//
// A handle is settings (kernhub::Options), a Client built from them on
// first need, the addresses its kh_prewarm calls resolved, and the last
// error text. Nothing here is global: separate handles share nothing but
// what Client itself shares (the cache, the process-wide resolved table).
// Every entry point catches everything (docs/ARCHITECTURE.md, "C API").
#include "kernhub/kernhub.h"

#include <cstdint>
#include <cstring>
#include <map>
#include <memory>
#include <new>
#include <string>

#include "capi/setting.hpp"
#include "kernhub/kernhub.hpp"
#include "kernhub/tvm_ffi.hpp"
#include "tvmffi/runtime.hpp"

namespace {

using kernhub::capi::quoted;
using kernhub::capi::Refusal;

constexpr int k_ok = static_cast<int>(kernhub::ErrorCode::ok);
constexpr int k_internal = static_cast<int>(kernhub::ErrorCode::internal);
constexpr int k_usage = static_cast<int>(kernhub::ErrorCode::usage);
constexpr int k_not_found = static_cast<int>(kernhub::ErrorCode::not_found);
constexpr int k_kernel = static_cast<int>(kernhub::ErrorCode::kernel);

}  // namespace

struct kh_hub {
    kernhub::Options options;
    // Built from `options` by the first kh_prewarm after a settings change.
    std::unique_ptr<kernhub::Client> client;
    std::map<std::string, void*> resolved;  // kh_prewarm name -> address
    std::string error;
    bool failed = false;

    int fail(int code, std::string message) {
        error = kernhub::to_string(static_cast<kernhub::ErrorCode>(code)) + std::string(": ") + std::move(message);
        failed = true;
        return code;
    }
    int succeed() {
        failed = false;
        error.clear();
        return k_ok;
    }
    // Runs `body` with every exception mapped to a return code and a message.
    template <class Body>
    int guarded(Body&& body) noexcept {
        try {
            body();
            return succeed();
        } catch (const Refusal& e) {
            return fail_noexcept(e.code, e.message);
        } catch (const kernhub::Error& e) {
            return fail_noexcept(static_cast<int>(e.code()), e.what());
        } catch (const std::bad_alloc&) {
            return fail_noexcept(k_internal, "out of memory");
        } catch (const std::exception& e) {
            return fail_noexcept(k_internal, std::string("internal error: ") + e.what() + "; please report it");
        } catch (...) {
            return fail_noexcept(k_internal, "internal error: unknown exception; please report it");
        }
    }
    // fail() when memory allows; else a constant message that needs none.
    int fail_noexcept(int code, const std::string& message) noexcept {
        try {
            return fail(code, kernhub::printable(message));
        } catch (...) {
            failed = true;
            error.clear();
            return code;
        }
    }
    const char* last_error() const noexcept {
        if (!failed) return nullptr;
        return error.empty() ? "internal error: out of memory" : error.c_str();
    }
};

extern "C" {

kh_hub* kh_hub_new(void) {
    return new (std::nothrow) kh_hub();
}

void kh_hub_free(kh_hub* hub) {
    delete hub;
}

int kh_hub_set(kh_hub* hub, const char* key, const char* value) {
    if (hub == nullptr) return k_usage;
    return hub->guarded([&] {
        if (key == nullptr) throw Refusal{k_usage, "kh_hub_set: the key is NULL"};
        if (value == nullptr) {
            throw Refusal{k_usage, "kh_hub_set: the value of " + quoted(key) + " is NULL; pass \"\" for the default"};
        }
        // Work on a copy so that a refused value leaves the settings as
        // they were.
        kernhub::Options changed = hub->options;
        kernhub::capi::apply_setting(changed, key, value);
        hub->options = std::move(changed);
        hub->client.reset();  // the next kh_prewarm builds one from the new settings
    });
}

int kh_prewarm(kh_hub* hub, const char* name) {
    if (hub == nullptr) return k_usage;
    return hub->guarded([&] {
        if (name == nullptr) throw Refusal{k_usage, "kh_prewarm: the kernel name is NULL"};
        if (!hub->client) hub->client = std::make_unique<kernhub::Client>(hub->options);
        kernhub::LoadResult loaded = hub->client->load(name);
        hub->resolved[name] = loaded.address;
    });
}

void* kh_symbol(kh_hub* hub, const char* name) {
    if (hub == nullptr) return nullptr;
    void* address = nullptr;
    hub->guarded([&] {
        if (name == nullptr) throw Refusal{k_usage, "kh_symbol: the kernel name is NULL"};
        auto it = hub->resolved.find(name);
        if (it == hub->resolved.end()) {
            throw Refusal{k_not_found,
                          "kernel " + quoted(name) +
                              " was not prewarmed on this handle; call kh_prewarm with the same name first"};
        }
        address = it->second;
    });
    return address;
}

int kh_tvm_call(kh_hub* hub, void* function, const kh_tvm_any* args, int32_t num_args, kh_tvm_any* result) {
    if (hub == nullptr) return k_usage;
    if (function == nullptr || num_args < 0 || (args == nullptr && num_args > 0)) {
        return hub->fail_noexcept(k_usage,
                                  "kh_tvm_call: the function is NULL, num_args is negative, or args is NULL "
                                  "with arguments");
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
            throw Refusal{k_usage, "kh_tvm_call: no tvm-ffi kernel was prewarmed in this process"};
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
    return hub->last_error();
}

const char* kh_error_name(int code) {
    return kernhub::to_string(static_cast<kernhub::ErrorCode>(code));
}

const char* kh_version(void) {
    return kernhub::version();
}

}  // extern "C"
