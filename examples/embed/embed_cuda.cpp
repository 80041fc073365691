// A CUDA kernel from the hub: fetch the native-cuda variant, check it has a
// binary for this GPU, load it through the driver API at start-up, then
// launch it on the hot path. kernhub binds libcuda at run time, so this
// program builds and starts on machines without CUDA; there it says so and
// exits 77, the conventional "skipped" status, without trying anything.
//
//   KERNHUB_ENDPOINT=file://$PWD/build/demo-hub ./build/examples/embed_cuda
#include <kernhub/cuda.hpp>
#include <kernhub/kernhub.hpp>

#include <cstdio>
#include <stdexcept>
#include <vector>

#include "cuda_memory.hpp"

int main() {
    if (!kernhub::cuda_available()) {
        std::fprintf(stderr, "SKIPPED: embed_cuda needs a CUDA driver with a device\n");
        return 77;
    }
    try {
        kernhub::Client client;
        // fetch + verify + device check + cuLibraryLoadData
        auto vector_add = kernhub::CudaKernel::from(client.load("vector-add-cuda"));

        example::CudaDriver::get().use_device0();
        const unsigned long long n = 1 << 20;
        std::vector<float> a(n, 1.0f), b(n, 2.0f), out(n, 0.0f);
        example::DeviceBuffer da(n * sizeof(float)), db(n * sizeof(float)), dout(n * sizeof(float));
        da.copy_from_host(a.data(), n * sizeof(float));
        db.copy_from_host(b.data(), n * sizeof(float));

        const unsigned block = 256;
        vector_add.launch({static_cast<unsigned>((n + block - 1) / block)}, {block}, 0, nullptr, da.device_pointer(),
                          db.device_pointer(), dout.device_pointer(), n);
        example::CudaDriver::get().synchronize();
        dout.copy_to_host(out.data(), n * sizeof(float));

        bool ok = out.front() == 3.0f && out.back() == 3.0f;
        std::printf("vector-add-cuda on %llu floats: %s\n", n, ok ? "ok" : "WRONG");
        return ok ? 0 : 1;
    } catch (const kernhub::Error& error) {
        std::fprintf(stderr, "embed_cuda: %s\n", error.what());
        return static_cast<int>(error.code());
    } catch (const std::runtime_error& error) {
        std::fprintf(stderr, "embed_cuda: %s\n", error.what());
        return 1;
    }
}
