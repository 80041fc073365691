// Embedding kernhub in an application: resolve every kernel at start-up,
// then dispatch through typed function pointers on the hot path.
//
//   KERNHUB_ENDPOINT=file://$PWD/build/demo-hub ./build/examples/embed_vector_add
#include <kernhub/kernhub.hpp>

#include <cstdio>
#include <vector>

using VectorAdd = void(const float*, const float*, float*, std::size_t);
using Saxpy = void(float, const float*, const float*, float*, std::size_t);

int main() {
    try {
        // Start-up: fetch, verify, load and resolve before any dispatch runs.
        // Endpoint, cache and token come from the environment (docs/configuration.md).
        kernhub::Client client;
        client.load({"vector-add", "saxpy"});
        // The handles come from the Client that loaded the kernels.
        auto vector_add = client.resolve<VectorAdd>("vector-add");
        auto saxpy = client.resolve<Saxpy>("saxpy");

        // Hot path: plain indirect calls, no lookup, lock or allocation.
        std::vector<float> a(1024), b(1024), out(1024);
        for (std::size_t i = 0; i < a.size(); ++i) {
            a[i] = static_cast<float>(i);
            b[i] = 2.0f * static_cast<float>(i);
        }
        vector_add(a.data(), b.data(), out.data(), out.size());
        bool add_ok = out[1023] == 3069.0f;
        saxpy(0.5f, a.data(), b.data(), out.data(), out.size());
        bool saxpy_ok = out[1023] == 2557.5f;
        std::printf("vector-add: out[1023] = %s, saxpy: out[1023] = %s\n", add_ok ? "ok" : "WRONG",
                    saxpy_ok ? "ok" : "WRONG");
        return add_ok && saxpy_ok ? 0 : 1;
    } catch (const kernhub::Error& error) {
        std::fprintf(stderr, "embed_vector_add: %s\n", error.what());
        return static_cast<int>(error.code());
    }
}
