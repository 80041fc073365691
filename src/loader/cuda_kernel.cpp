// The CUDA kernel kind: a kernel of a fatbin or cubin, checked to hold a
// binary device 0 can run, loaded through the CUDA driver binding (src/cuda)
// and launched through CudaKernel.
#include "cuda/driver.hpp"
#include "fatbin/fatbin.hpp"
#include "kernhub/error.hpp"
#include "loader/kind.hpp"

namespace kernhub::loader {

bool is_cuda_image(const std::string& path) {
    return has_suffix(path, ".fatbin") || has_suffix(path, ".cubin");
}

namespace {

// Loads a fatbin or cubin image on the first device after checking that it
// holds a binary the device can run, and returns the kernel handle.
// `image` is exactly what the driver gets.
Resolved load_cuda_image(const std::vector<std::uint8_t>& image, const std::string& label, const std::string& symbol) {
    fatbin::Fatbin parsed = fatbin::detect_format(image.data(), image.size()) == fatbin::Format::cubin
                                ? fatbin::parse_cubin(image.data(), image.size(), label)
                                : fatbin::parse_fatbin(image.data(), image.size(), label);
    cuda::Driver* driver = nullptr;
    try {
        driver = &cuda::Driver::instance();
    } catch (const Error& e) {
        throw Error(ErrorCode::load,
                    "cannot load CUDA kernel '" + symbol + "' from " + label + ": " + e.plain_message(), e.hint(),
                    e.context());
    }
    cuda::DriverInfo info = driver->info();
    if (info.devices.empty()) {
        throw Error(ErrorCode::load,
                    "cannot load CUDA kernel '" + symbol + "' from " + label + ": the CUDA driver reports no device");
    }
    const cuda::Device& device = info.devices.front();
    if (!fatbin::select_entry(parsed, device.cc_major, device.cc_minor)) {
        throw Error(ErrorCode::load, "no binary in " + label + " runs on " + driver->describe_device(device.index) +
                                         " (it has " + fatbin::describe_archs(parsed) + "); use a build for this GPU");
    }
    cuda::Library library = driver->load(image.data(), label, device.index);
    return resolved_address(library.kernel(symbol), symbol, device.index);
}

class CudaKernelKind final : public Kind {
public:
    const char* name() const noexcept override { return "cuda-kernel"; }
    const char* what() const noexcept override { return "a CUDA kernel"; }
    const char* use_instead() const noexcept override { return "launch it through CudaKernel"; }

    // The registry's "file" when it names a fatbin or cubin, else the
    // variant's one fatbin or cubin.
    std::optional<std::string> choose(const LoadRequest& request) const override {
        if (!request.file.empty()) {
            return is_cuda_image(request.file) ? std::optional<std::string>(request.file) : std::nullopt;
        }
        return only_file(request, is_cuda_image);
    }

    Resolved load(const LoadRequest& request, const Artifact& artifact) const override {
        return load_cuda_image(artifact.read(), artifact.path().string(), request.symbol);
    }

    // A CUDA image adds nothing to the process that another kernel could
    // use: it is fetched and verified, not loaded.
    bool open_dependency(const LoadRequest& request, const Artifact& artifact) const override {
        (void)request;
        (void)artifact;
        return false;
    }
};

}  // namespace

const Kind& cuda_kernel_kind() {
    static const CudaKernelKind kind;
    return kind;
}

}  // namespace kernhub::loader
