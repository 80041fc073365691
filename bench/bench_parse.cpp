// What reading a hostile file costs, next to one plain pass over the same
// bytes: each parse must stay linear in its input whatever the input
// declares, so the ratio stays flat as the count grows.
//
//   BM_Parse_OpListing/N     loader::list_torch_ops of a torch op library
//                            (the fuzz corpus's, with a 1 MiB read-only
//                            section of 20,000 schema strings appended)
//                            whose last section header is copied N times,
//                            all over the same bytes
//   BM_Parse_ByteScan/N      the baseline: one pass over the same file
//                            counting its NUL-terminated strings
//   BM_Parse_Lock/N          lockfile::parse_lock of a kernhub.lock whose one
//                            variant lists N files (100,001 is over
//                            k_max_lock_files: the time to refuse it)
//   BM_Parse_JsonBaseline/N  the baseline: nlohmann's own parse of the same
//                            text, with no checks
//
// Counters: file_bytes, and for the listing listing_bytes (the bytes of
// the ops, schemas and names it keeps: what grew to 13 GB before).
#include <cstring>
#include <nlohmann/json.hpp>

#include "bench_common.hpp"
#include "kernhub/error.hpp"
#include "loader/torch_ops.hpp"
#include "lockfile/lockfile.hpp"
#include "support/elf_craft.hpp"
#include "support/slurp.hpp"

namespace {

std::vector<std::uint8_t> crafted_library(std::size_t copies) {
    static const std::vector<std::uint8_t> base = [] {
        const auto bytes = kernhub::test::slurp_bytes(std::string(KERNHUB_BENCH_SOURCE_DIR) +
                                                      "/tests/fuzz/corpus/elf/torch_pydata_ops.so");
        std::vector<std::uint8_t> schemas;
        for (int i = 0; i < 12000; ++i) {
            const std::string schema = "op_" + std::to_string(i) + "(Tensor x, float factor) -> Tensor";
            schemas.insert(schemas.end(), schema.begin(), schema.end());
            schemas.push_back(0);
        }
        return kernhub::test::with_read_only_section(bytes, schemas);
    }();
    return kernhub::test::with_last_section_copies(base, copies);
}

void BM_Parse_OpListing(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const std::vector<std::uint8_t> file = crafted_library(static_cast<std::size_t>(state.range(0)));
        std::size_t kept = 0;
        for (auto _ : state) {
            const kernhub::loader::TorchOpListing listing =
                kernhub::loader::list_torch_ops(file.data(), file.size(), "bench.so");
            kept = 0;
            for (const auto& op : listing.ops) kept += op.size();
            for (const auto& schema : listing.schemas) kept += schema.size();
            for (const auto& name : listing.names) kept += name.size();
            benchmark::DoNotOptimize(kept);
        }
        state.counters["file_bytes"] = static_cast<double>(file.size());
        state.counters["listing_bytes"] = static_cast<double>(kept);
    });
}

void BM_Parse_ByteScan(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const std::vector<std::uint8_t> file = crafted_library(static_cast<std::size_t>(state.range(0)));
        for (auto _ : state) {
            std::size_t strings = 0;
            const std::uint8_t* at = file.data();
            const std::uint8_t* end = file.data() + file.size();
            while (at < end) {
                const void* nul = std::memchr(at, 0, static_cast<std::size_t>(end - at));
                if (nul == nullptr) break;
                ++strings;
                at = static_cast<const std::uint8_t*>(nul) + 1;
            }
            benchmark::DoNotOptimize(strings);
        }
        state.counters["file_bytes"] = static_cast<double>(file.size());
    });
}

std::string lock_text(std::size_t files) {
    nlohmann::json listed = nlohmann::json::object();
    for (std::size_t i = 0; i < files; ++i) {
        char sha[65];
        std::snprintf(sha, sizeof sha, "%064zx", i);
        listed["dir/file_" + std::to_string(i) + ".bin"] = {{"size", i}, {"sha256", sha}};
    }
    const nlohmann::json lock = {
        {"format", 1},
        {"kernels",
         {{"k",
           {{"repo_id", "org/k"},
            {"repo_type", "kernel"},
            {"revision", "main"},
            {"commit", std::string(40, 'a')},
            {"symbol", "f"},
            {"variants",
             {{"native-cpu-x86_64-linux", {{"hash", "sha256-" + std::string(64, 'b')}, {"files", listed}}}}}}}}}};
    return lock.dump();
}

void BM_Parse_Lock(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const std::string text = lock_text(static_cast<std::size_t>(state.range(0)));
        for (auto _ : state) {
            try {
                benchmark::DoNotOptimize(kernhub::lockfile::parse_lock(text, "bench.lock"));
            } catch (const kernhub::Error&) {
                // Over k_max_lock_files: refused, which is what is timed.
                if (state.range(0) <= static_cast<std::int64_t>(kernhub::lockfile::k_max_lock_files)) throw;
            }
        }
        state.counters["file_bytes"] = static_cast<double>(text.size());
    });
}

void BM_Parse_JsonBaseline(benchmark::State& state) {
    khbench::guarded(state, [&] {
        const std::string text = lock_text(static_cast<std::size_t>(state.range(0)));
        for (auto _ : state) benchmark::DoNotOptimize(nlohmann::json::parse(text));
        state.counters["file_bytes"] = static_cast<double>(text.size());
    });
}

}  // namespace

BENCHMARK(BM_Parse_ByteScan)->Arg(0)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Parse_OpListing)->Arg(0)->Arg(100)->Arg(1000)->Arg(10000)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Parse_JsonBaseline)->Arg(10000)->Arg(50000)->Arg(100001)->Unit(benchmark::kMillisecond);
BENCHMARK(BM_Parse_Lock)->Arg(10000)->Arg(50000)->Arg(100001)->Unit(benchmark::kMillisecond);
KHBENCH_MAIN()
