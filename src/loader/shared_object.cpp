// The shared-object kind: a C symbol of a .so, dlopen'ed and dlsym'ed
// (Library, library.cpp), called through KernelFn.
#include "loader/kind.hpp"

namespace kernhub::loader {

namespace {

bool is_shared_object(const std::string& path) {
    return has_suffix(path, ".so") || path.find(".so.") != std::string::npos;
}

class SharedObjectKind final : public Kind {
public:
    const char* name() const noexcept override { return "function"; }
    const char* what() const noexcept override { return "a CPU function"; }
    const char* use_instead() const noexcept override { return "call it through KernelFn"; }

    // The registry's "file" unless it names a CUDA image (any other name
    // is taken for a shared object), else the variant's one shared object.
    std::optional<std::string> choose(const LoadRequest& request) const override {
        if (!request.file.empty()) {
            return is_cuda_image(request.file) ? std::nullopt : std::optional<std::string>(request.file);
        }
        return only_file(request, is_shared_object);
    }

    Resolved load(const LoadRequest& request, const Artifact& artifact) const override {
        const Library library = artifact.open();
        return resolved_address(library.symbol(request.symbol), request.symbol);
    }

    bool open_dependency(const LoadRequest& request, const Artifact& artifact) const override {
        (void)request;
        (void)artifact.open(Binding::now_global);
        return true;
    }
};

}  // namespace

const Kind& shared_object_kind() {
    static const SharedObjectKind kind;
    return kind;
}

}  // namespace kernhub::loader
