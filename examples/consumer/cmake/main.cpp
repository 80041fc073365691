// A program outside the kernhub tree: built against an installed kernhub
// with find_package (CMakeLists.txt here) or pkg-config (../pkgconfig/build.sh).
// It loads "vector-add" from the default registry, then calls it.
//
//   KERNHUB_ENDPOINT=file://$PWD/build/demo-hub ./kernhub_consumer
#include <kernhub/kernhub.hpp>

#include <cstdio>
#include <vector>

using VectorAdd = void(const float*, const float*, float*, std::size_t);

int main() {
    try {
        kernhub::Client client;
        client.load({"vector-add"});
        auto vector_add = client.resolve<VectorAdd>("vector-add");

        std::vector<float> a(256, 1.5f), b(256, 2.0f), out(256, 0.0f);
        vector_add(a.data(), b.data(), out.data(), out.size());
        bool ok = out.front() == 3.5f && out.back() == 3.5f;

        // Where "vector-add" came from: the default registry installed next
        // to the library this program runs with.
        std::string source;
        for (const auto& entry : client.list()) {
            if (entry.name == "vector-add") source = entry.source;
        }
        std::printf("kernhub %s: vector-add %s (registry %s)\n", kernhub::version(), ok ? "ok" : "WRONG",
                    source.c_str());
        return ok ? 0 : 1;
    } catch (const kernhub::Error& error) {
        std::fprintf(stderr, "kernhub_consumer: %s\n", error.what());
        return static_cast<int>(error.code());
    }
}
