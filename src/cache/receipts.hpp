// The Python kernels library's verification receipts (docs/cache-format.md,
// "Other tools' data"): kernels 0.19 keeps, under <root>/.verified-kernels/,
// one file per variant whose digest (digest/v1/) or signature (signature/v1/)
// it has checked, and skips its own hash of a variant that has one. kernhub
// writes none; it removes the receipts of a variant whose files it changes or
// removes, so that kernels never skips its hash over bytes it did not check.
#pragma once

#include <chrono>
#include <cstddef>
#include <cstdint>
#include <filesystem>
#include <string>
#include <vector>

namespace kernhub::cache {

namespace fs = std::filesystem;

// <root>/.verified-kernels, and the stores kernels 0.19 reads below it.
inline constexpr const char* k_receipts_folder = ".verified-kernels";
inline constexpr const char* const k_receipt_stores[] = {"digest/v1", "signature/v1"};
// Bounds on what is read of the stores: entries listed per store (a store
// holding more is read no further, and the scan says so) and the
// bytes read of one receipt (kernels writes about 150; a larger file is not
// one kernhub can account for and is left alone).
inline constexpr std::size_t k_max_receipts = 100000;
inline constexpr std::size_t k_max_receipt_bytes = 4096;

// Where a variant's receipt is named in every store: the SHA-256, in
// lowercase hex, of "remote_kernel", repo_id, commit and variant, each
// preceded by its length as a big-endian 64-bit integer (what kernels
// 0.19.1 computes for a KernelLocation.remote). The location names no repo
// type: one receipt covers kernels--ORG--NAME and models--ORG--NAME alike.
std::string receipt_name(const std::string& repo_id, const std::string& commit, const std::string& variant);

// Removes the variant's receipts from every store (whatever is at the
// receipt's name but a folder: a link is removed, not followed), and fsyncs each store
// folder it removed one from, so that a power loss cannot bring a receipt
// back over files changed after this returns. Returns the paths removed (or,
// with dry_run, that would be). Error(internal) naming the path when one
// exists and cannot be removed.
std::vector<fs::path> remove_receipts(const fs::path& root, const std::string& repo_id, const std::string& commit,
                                      const std::string& variant, bool dry_run = false);

// A receipt kernhub can account for: a regular file named by 64 lowercase
// hex, at most k_max_receipt_bytes, holding a JSON object whose "location"
// is a remote_kernel with string repo_id, revision and variant, and whose
// name is receipt_name() of that location.
struct Receipt {
    fs::path path;
    std::string repo_id;
    std::string commit;
    std::string variant;
    std::uint64_t size = 0;
    std::chrono::system_clock::time_point modified;
};

// Every receipt of every store (kernels' temp files, unknown names and
// files that do not pass the rules above are left out: they are kernels'
// business). A missing store is empty; links on the way to a store are
// followed, as kernels follows them. A store listing more than
// k_max_receipts entries is read no further, and over_limit says so,
// naming the limit; the other store is still read.
struct ReceiptScan {
    std::vector<Receipt> receipts;
    std::vector<std::string> over_limit;
};
ReceiptScan scan_receipts(const fs::path& root);

}  // namespace kernhub::cache
