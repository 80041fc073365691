// The backend-table pattern of an inference engine, in C++: the engine
// knows a few backends for one operation by name, starts on its built-in
// one, and `set_backend(name)` switches to a kernel from the hub. Switching
// loads (fetch, verify, load, resolve) before anything dispatches, so a
// backend that cannot be had leaves the previous one in place, and dispatch
// stays one plain call through a function pointer.
//
//   KERNHUB_ENDPOINT=file://$PWD/build/demo-hub ./build/examples/backend_table [CODE]
//
// Exits 0 when every switch behaved as expected: CODE, when given, is the
// exit code flash-attn3's failure must have (3 not found online, 6 offline).
//
// The demo hub has one kernel with this signature, vector-add. flash-attn3
// is in kernhub's default registry but not on the demo hub: it stands for a
// backend this machine cannot get, as an engine would meet when it asks for
// set_backend("flash-attn3") on a hub or a host without it.
#include <kernhub/kernhub.hpp>

#include <cstdio>
#include <cstdlib>
#include <map>
#include <string>
#include <vector>

namespace {

using BinaryOp = void(const float*, const float*, float*, std::size_t);

void native_add(const float* a, const float* b, float* out, std::size_t n) {
    for (std::size_t i = 0; i < n; ++i) out[i] = a[i] + b[i];
}

class Backends {
public:
    explicit Backends(kernhub::Options options) : m_client(std::move(options)) {}

    // Switches to `name`, or throws kernhub::Error and keeps the current
    // backend. "native" is built in; the others are registry names.
    void set_backend(const std::string& name) {
        auto known = k_backends.find(name);
        if (known == k_backends.end()) {
            throw kernhub::Error(kernhub::ErrorCode::usage,
                                 "unknown backend '" + name + "'; this engine knows " + known_names());
        }
        if (name == "native") {
            m_active = kernhub::KernelFn<BinaryOp>(reinterpret_cast<void*>(&native_add));
        } else {
            // Everything that can fail happens here, before the swap.
            // from() refuses a kernel that is not a C function.
            m_active = kernhub::KernelFn<BinaryOp>::from(m_client.load(known->second));
        }
        m_name = name;
    }

    const std::string& backend() const { return m_name; }

    // The hot path: one indirect call.
    void add(const float* a, const float* b, float* out, std::size_t n) const { m_active(a, b, out, n); }

private:
    static std::string known_names() {
        std::string out;
        for (const auto& entry : k_backends) out += (out.empty() ? "" : ", ") + entry.first;
        return out;
    }

    // Backend name -> registry name of the kernel that implements it.
    inline static const std::map<std::string, std::string> k_backends = {
        {"native", ""},
        {"vector-add", "vector-add"},
        {"flash-attn3", "flash-attn3"},
    };

    kernhub::Client m_client;
    kernhub::KernelFn<BinaryOp> m_active{reinterpret_cast<void*>(&native_add)};
    std::string m_name = "native";
};

// Runs the active backend on a small input; true when the sums are right.
bool dispatch_is_right(const Backends& backends) {
    std::vector<float> a(256), b(256), out(256);
    for (std::size_t i = 0; i < a.size(); ++i) {
        a[i] = static_cast<float>(i);
        b[i] = 0.5f * static_cast<float>(i);
    }
    backends.add(a.data(), b.data(), out.data(), out.size());
    for (std::size_t i = 0; i < out.size(); ++i) {
        if (out[i] != 1.5f * static_cast<float>(i)) return false;
    }
    return true;
}

// set_backend(name) and what happened; `should_work` (and `expected_code`
// for a failure, 0 for any) says what this demo expects, so the program
// doubles as a test.
bool step(Backends& backends, const std::string& name, bool should_work, int expected_code = 0) {
    const std::string before = backends.backend();
    try {
        backends.set_backend(name);
        std::printf("set_backend(\"%s\"): now %s\n", name.c_str(), backends.backend().c_str());
        return should_work && dispatch_is_right(backends);
    } catch (const kernhub::Error& error) {
        std::printf("set_backend(\"%s\") failed (%s, exit code %d): %s\n  still on %s\n", name.c_str(),
                    kernhub::to_string(error.code()), static_cast<int>(error.code()), error.message().c_str(),
                    backends.backend().c_str());
        const bool code_ok = expected_code == 0 || static_cast<int>(error.code()) == expected_code;
        return !should_work && code_ok && backends.backend() == before && dispatch_is_right(backends);
    }
}

}  // namespace

int main(int argc, char** argv) {
    const int expected_code = argc > 1 ? std::atoi(argv[1]) : 0;
    try {
        // Endpoint, cache, token and offline mode come from the environment.
        Backends backends{kernhub::Options{}};
        bool ok = dispatch_is_right(backends);
        ok = step(backends, "vector-add", true) && ok;
        ok = step(backends, "no-such-backend", false, static_cast<int>(kernhub::ErrorCode::usage)) && ok;
        ok = step(backends, "flash-attn3", false, expected_code) && ok;
        ok = backends.backend() == "vector-add" && ok;
        std::printf("dispatching on %s: %s\n", backends.backend().c_str(),
                    dispatch_is_right(backends) ? "ok" : "WRONG");
        return ok ? 0 : 1;
    } catch (const kernhub::Error& error) {
        std::fprintf(stderr, "backend_table: %s\n", error.what());
        return static_cast<int>(error.code());
    }
}
