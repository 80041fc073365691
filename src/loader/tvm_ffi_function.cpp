// The tvm-ffi kind: a function of a tvm-ffi variant's library, in the TVM
// FFI C calling convention, called through TvmFunction. The runtime
// (src/tvmffi) is bound before the library is loaded, so the library's
// NEEDED libtvm_ffi.so is the bound one.
#include <algorithm>
#include <cstring>

#include "common/join.hpp"
#include "common/text.hpp"
#include "elf/elf_inspect.hpp"
#include "kernhub/error.hpp"
#include "loader/kind.hpp"
#include "tvmffi/runtime.hpp"

namespace kernhub::loader {

namespace {

// Binds the runtime for the variant. A --target choice skipped selection's
// version check, so it is made here.
void bind_runtime(const LoadRequest& request) {
    const select::Variant& variant = *request.variant;
    const tvmffi::Runtime& runtime = tvmffi::bind(request.tvm_ffi_library);
    if (static_cast<int>(runtime.version.major) != variant.family_major ||
        static_cast<int>(runtime.version.minor) != variant.family_minor) {
        throw Error(ErrorCode::load,
                    "variant " + variant.name + " of " + request.fetched.repo_id + " needs tvm-ffi " +
                        std::to_string(variant.family_major) + "." + std::to_string(variant.family_minor) +
                        ", and the runtime " + runtime.library + " is " + runtime.version_text() +
                        "; install the matching apache-tvm-ffi, or fetch a variant for " +
                        std::to_string(runtime.version.major) + "." + std::to_string(runtime.version.minor));
    }
}

// The function's address; a missing one is named with the functions the
// library does have.
void* resolve_function(const Library& library, const std::string& symbol, const std::string& file) {
    std::string why = " has no tvm-ffi function ";
    try {
        void* address = library.symbol(symbol);
        // Calling a data object through the convention would jump into it.
        if (is_code_symbol(address)) return address;
        why = " exports data, not a tvm-ffi function, as ";
    } catch (const Error& e) {
        if (e.code() != ErrorCode::not_found) throw;
    }
    std::vector<std::string> names;
    try {
        names = tvmffi::function_names(elf::inspect_elf_file(file).exported_functions);
    } catch (const Error&) {
        // The list only helps the message; the refusal stands without it.
    }
    constexpr std::size_t k_listed = 32;
    const std::size_t more = names.size() > k_listed ? names.size() - k_listed : 0;
    names.resize(names.size() - more);
    std::string has = names.empty() ? "none" : join(names);
    if (more > 0) has += " and " + std::to_string(more) + " more";
    throw Error(ErrorCode::not_found, file + why + quoted_name(symbol.substr(std::strlen("__tvm_ffi_"))) + " (symbol " +
                                          symbol + "); its functions: " + has + "; check the registry's \"symbol\"");
}

class TvmFfiKind final : public Kind {
public:
    const char* name() const noexcept override { return "tvm-ffi"; }
    const char* what() const noexcept override { return "a tvm-ffi function"; }
    const char* use_instead() const noexcept override { return "call it through TvmFunction"; }

    // Every variant of the tvm-ffi family, and only those.
    std::optional<std::string> choose(const LoadRequest& request) const override {
        if (!request.variant || request.variant->family != select::Family::tvm_ffi) return std::nullopt;
        return choose_underscore_library(request, "tvm-ffi variant", "library");
    }

    Resolved load(const LoadRequest& request, const Artifact& artifact) const override {
        const std::string symbol = tvmffi::symbol_of(request.symbol);
        if (symbol.rfind("__tvm_ffi__", 0) == 0) {
            throw Error(ErrorCode::usage, quoted_name(request.symbol) + " names " + symbol +
                                              ", an internal symbol of tvm-ffi, not a function; name the function "
                                              "without the __tvm_ffi_ prefix");
        }
        bind_runtime(request);
        const Library library = artifact.open();
        return resolved_address(resolve_function(library, symbol, artifact.path().string()), symbol);
    }

    // The runtime is bound first; then the library's exports join the
    // global scope as a shared object's do, and what its static
    // initialisers register with the runtime is registered.
    bool open_dependency(const LoadRequest& request, const Artifact& artifact) const override {
        bind_runtime(request);
        (void)artifact.open(Binding::now_global);
        return true;
    }

    // The bound runtime, or why selection could not bind one.
    std::string runtime_status(const std::vector<std::string>& variants, const std::string& problem) const override {
        const bool any = std::any_of(variants.begin(), variants.end(), [](const std::string& name) {
            const std::optional<select::Variant> variant = select::parse_variant(name);
            return variant && variant->family == select::Family::tvm_ffi;
        });
        if (!any) return {};
        const tvmffi::Runtime* runtime = tvmffi::bound();
        return runtime != nullptr ? runtime->version_text() + " at " + runtime->library : problem;
    }
};

}  // namespace

const Kind& tvm_ffi_kind() {
    static const TvmFfiKind kind;
    return kind;
}

}  // namespace kernhub::loader
