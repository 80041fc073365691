// The C API (include/kernhub/kernhub.h) over kernhub::Client.
//
// A handle is settings (kernhub::Options), a Client built from them on
// first need, the addresses its kh_prewarm calls resolved, and the last
// error text. Nothing here is global: separate handles share nothing but
// what Client itself shares (the cache, the process-wide resolved table).
// Every entry point catches everything (docs/ARCHITECTURE.md, "C API").
#include "kernhub/kernhub.h"

#include <algorithm>
#include <cstdint>
#include <cstring>
#include <limits>
#include <map>
#include <memory>
#include <new>
#include <optional>
#include <string>
#include <vector>

#include "api/settings.hpp"
#include "common/text.hpp"
#include "kernhub/kernhub.hpp"
#include "kernhub/tvm_ffi.hpp"
#include "tvmffi/runtime.hpp"

namespace {

// A setting value is a path, a URL, a token or a variant name: 4096 bytes
// (PATH_MAX on Linux) holds any of them.
constexpr std::size_t k_max_setting_bytes = 4096;
// Registry files or targets per handle; more is a caller's loop gone wrong.
constexpr std::size_t k_max_repeated_values = 256;

constexpr int k_ok = static_cast<int>(kernhub::ErrorCode::ok);
constexpr int k_internal = static_cast<int>(kernhub::ErrorCode::internal);
constexpr int k_usage = static_cast<int>(kernhub::ErrorCode::usage);
constexpr int k_not_found = static_cast<int>(kernhub::ErrorCode::not_found);
constexpr int k_kernel = static_cast<int>(kernhub::ErrorCode::kernel);

// One printable line of at most k_max_quoted_bytes; `text` may be long and
// need not end inside that bound.
std::string quoted(const char* text) {
    return kernhub::quoted_name(std::string_view(text, strnlen(text, kernhub::k_max_quoted_bytes + 1)));
}

// Thrown inside this file only: a refusal of this layer (bad argument,
// name not prewarmed) that becomes the return code and the message.
struct Refusal {
    int code;
    std::string message;
};

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

namespace {

// The boolean settings: "" -> the environment decides (nullopt).
std::optional<bool> parse_bool(const char* key, const char* value) {
    if (*value == '\0') return std::nullopt;
    if (std::strcmp(value, "1") == 0 || std::strcmp(value, "true") == 0) return true;
    if (std::strcmp(value, "0") == 0 || std::strcmp(value, "false") == 0) return false;
    throw Refusal{k_usage, "setting '" + std::string(key) +
                               "' takes \"1\", \"0\", \"true\" or \"false\" (or \"\" for the " +
                               "environment's choice), not " + quoted(value)};
}

void append(std::vector<std::string>& list, const char* key, const char* value) {
    if (*value == '\0') {
        list.clear();
        return;
    }
    if (list.size() >= k_max_repeated_values) {
        throw Refusal{k_usage, "setting '" + std::string(key) + "' holds at most " +
                                   std::to_string(k_max_repeated_values) +
                                   " values (k_max_repeated_values); set it to \"\" to clear the list"};
    }
    list.emplace_back(value);
}

// "a, b" as {"a", "b"}; "" as nullopt (the environment decides). The
// names are checked when the next Client is made from the options.
std::optional<std::vector<std::string>> split_commas(const char* value) {
    if (*value == '\0') return std::nullopt;
    std::vector<std::string> names;
    std::string_view text(value);
    std::size_t begin = 0;
    while (begin <= text.size()) {
        std::size_t end = std::min(text.find(',', begin), text.size());
        names.emplace_back(text.substr(begin, end - begin));
        begin = end + 1;
    }
    return names;
}

// The numeric settings: "" -> nullopt (the environment decides), else
// decimal digits only. The range of each is checked with the other
// settings when the next Client is made (kh_prewarm returns 2).
std::optional<std::uint64_t> parse_count(const char* key, const char* value, std::uint64_t max) {
    if (*value == '\0') return std::nullopt;
    constexpr std::size_t k_max_digits = 18;  // below UINT64_MAX
    std::uint64_t parsed = 0;
    bool ok = std::strlen(value) <= k_max_digits;
    for (const char* c = value; ok && *c != '\0'; ++c) {
        ok = *c >= '0' && *c <= '9';
        parsed = parsed * 10 + static_cast<std::uint64_t>(*c - '0');
    }
    if (!ok || parsed > max) {
        throw Refusal{k_usage, "setting '" + std::string(key) + "' takes a whole number from 0 to " +
                                   std::to_string(max) + " (or \"\" for the environment's choice), not " +
                                   quoted(value)};
    }
    return parsed;
}

std::optional<int> parse_int(const char* key, const char* value) {
    auto parsed = parse_count(key, value, static_cast<std::uint64_t>(std::numeric_limits<int>::max()));
    if (!parsed) return std::nullopt;
    return static_cast<int>(*parsed);
}

// Applies key = value to `options`; throws Refusal and changes nothing
// on a bad key or value. Never quotes a token.
void apply_setting(kernhub::Options& options, const char* key, const char* value) {
    const std::string k(key);
    if (strnlen(value, k_max_setting_bytes + 1) > k_max_setting_bytes) {
        throw Refusal{k_usage, "the value of setting " + quoted(key) + " is longer than " +
                                   std::to_string(k_max_setting_bytes) + " bytes (k_max_setting_bytes)"};
    }
    if (k == "endpoint") {
        options.endpoint = value;
    } else if (k == "cache_dir") {
        options.cache_dir = value;
    } else if (k == "registry") {
        append(options.registries, key, value);
    } else if (k == "project") {
        options.project_dir = value;
    } else if (k == "offline") {
        options.offline = parse_bool(key, value);
    } else if (k == "target") {
        append(options.targets, key, value);
    } else if (k == "token") {
        if (*value == '\0') {
            options.token.reset();
        } else if (kernhub::trim(value).empty()) {
            throw Refusal{k_usage, "the token is only white space; pass \"\" to use HF_TOKEN or the token file"};
        } else if (!kernhub::api::token_is_well_formed(kernhub::trim(value))) {
            throw Refusal{k_usage,
                          "the token contains a space, a control character or a non-ASCII byte, which cannot go "
                          "into an HTTP header"};
        } else {
            options.token = value;
        }
    } else if (k == "verify_on_load") {
        options.verify_on_load = parse_bool(key, value);
    } else if (k == "allowed_orgs") {
        options.allowed_orgs = split_commas(value);
    } else if (k == "require_signatures") {
        options.require_signatures = parse_bool(key, value);
    } else if (k == "sigstore_trusted_root") {
        options.sigstore_trusted_root = value;
    } else if (k == "tvm_ffi_library") {
        options.tvm_ffi_library = value;
    } else if (k == "retries") {
        options.retries = parse_int(key, value);
    } else if (k == "max_wait_seconds") {
        options.max_wait_seconds = parse_int(key, value);
    } else if (k == "max_listing_entries") {
        options.max_listing_entries = parse_int(key, value);
    } else if (k == "max_listing_bytes") {
        options.max_listing_bytes = parse_int(key, value);
    } else if (k == "api_timeout_seconds") {
        options.api_timeout_seconds = parse_int(key, value);
    } else if (k == "min_rate") {
        options.min_rate = parse_int(key, value);
    } else if (k == "min_rate_window_seconds") {
        options.min_rate_window_seconds = parse_int(key, value);
    } else if (k == "max_connections") {
        options.max_connections = parse_int(key, value);
    } else if (k == "ref_ttl") {
        options.ref_ttl_seconds = parse_int(key, value);
    } else if (k == "archive_max_bytes") {
        options.archive_max_bytes = parse_count(key, value, 999'999'999'999'999'999ull);  // 18 digits
    } else if (k == "archive_max_entries") {
        options.archive_max_entries = parse_int(key, value);
    } else if (k == "archive_max_path") {
        options.archive_max_path = parse_int(key, value);
    } else {
        throw Refusal{k_usage,
                      "unknown setting " + quoted(key) +
                          "; the settings are endpoint, cache_dir, registry, project, offline, target, token, "
                          "verify_on_load, allowed_orgs, require_signatures, sigstore_trusted_root, tvm_ffi_library, "
                          "retries, "
                          "max_wait_seconds, max_listing_entries, "
                          "max_listing_bytes, api_timeout_seconds, min_rate, min_rate_window_seconds, max_connections, "
                          "ref_ttl, "
                          "archive_max_bytes, archive_max_entries, archive_max_path"};
    }
}

}  // namespace

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
        apply_setting(changed, key, value);
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
