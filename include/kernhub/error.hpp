// The one error type of kernhub.
//
// Error policy: every layer of the library reports failure by throwing
// kernhub::Error (internal modules and the public C++ API alike). The
// library never prints
// and never exits. A message names the object (repo, revision, path, URL
// without secrets) and the next step for the user.
#pragma once

#include <stdexcept>
#include <string>
#include <string_view>

#include "kernhub/export.hpp"

namespace kernhub {

// Values are the CLI exit codes (docs/commands.md, "Exit codes").
enum class ErrorCode : int {
    ok = 0,
    internal = 1,       // a bug, or the local system refused (I/O on the cache)
    usage = 2,          // malformed input from the caller: flags, registry files
    not_found = 3,      // name, repo, revision, file, symbol or variant
    verification = 4,   // hash, signature, ELF or fatbin check
    network = 5,        // transport or hub error after retries
    offline = 6,        // offline and not cached
    load = 7,           // dlopen or CUDA driver refused the binary
    lock_outdated = 8,  // a lock file no longer matches what it locks (lock --check)
    kernel = 9,         // a called kernel raised an error (TvmFunction); never a CLI exit
    interrupted = 130,  // Options::cancel was set (SIGINT/SIGTERM in the CLI:
                        // exit 130 or 143); partial downloads are kept
};

// "usage error", "not found", ...: the word the messages start with. No
// error.
KERNHUB_API const char* to_string(ErrorCode code) noexcept;

// `text` safe to show on a terminal as one line: \n, \r and \t are shown
// as those escapes, other C0 controls, DEL and bytes that are not UTF-8 as
// \xNN, the C1 controls, the invisible line separators, the
// bidirectional overrides and the zero-width characters as \uNNNN; other
// UTF-8 is kept. File names,
// repo ids and messages can carry whatever a hub, a registry file or a
// cache entry held; every Error message has been through it already, and a
// program that shows other text from kernhub's results (file paths, variant
// names, NEEDED entries) should pass it through too. A backslash is kept as
// it is, so printable(printable(x)) == printable(x). No error but
// std::bad_alloc.
KERNHUB_API std::string printable(std::string_view text);

// The setting or the operation a message's advice refers to. The message
// gives the advice in words ("...; fetch it once while online"); the hint
// names the knob, and each interface names it in its own vocabulary, after
// the words in parentheses: the C++ API as an Options field or a Client
// method ("(Client::fetch)"), the C API as a kh_hub_set key or a C function
// ("(kh_prewarm)"), the command-line tool as a flag or a command
// ("(`kernhub fetch`)"). docs/embedding.md, "Hints: advice in each
// interface's words", lists the names.
struct ErrorHint {
    enum class Kind { none, setting, action };
    Kind kind = Kind::none;
    // A setting: an Options field ("offline", "targets", "cache_dir",
    // "project_dir", "endpoint", "sigstore_trusted_root", "host", "backend")
    // or an operation's option ("load.symbol", "load.op", "lock.update",
    // "mirror.to", "mirror.nginx_conf",
    // "mirror.listen", "prune.partials", "prune.keep_locks"). An action: an
    // operation ("fetch", "lock", "lock.check", "list", "inspect", "mirror",
    // "cache.prune", "cache.repair").
    std::string name;
};

class KERNHUB_API Error : public std::runtime_error {
public:
    // The message (cut at 4 KiB) and context (1 KiB) go through printable().
    // A cut takes bytes out of the middle, so the end of a message (the
    // reason and the next step, after a long path) is always kept.
    Error(ErrorCode code, const std::string& message, std::string context = {});
    // With the setting or operation the message's advice refers to.
    Error(ErrorCode code, const std::string& message, ErrorHint hint, std::string context = {});

    ErrorCode code() const noexcept { return m_code; }
    // The one-line message without the code prefix, ending with the hint as
    // the C++ API names it: "...; fetch it once while online (Client::fetch)".
    const std::string& message() const noexcept { return m_message; }
    // Optional detail such as the underlying library's text; may be empty.
    const std::string& context() const noexcept { return m_context; }
    // Kind::none when the message refers to no setting or operation.
    const ErrorHint& hint() const noexcept { return m_hint; }
    // The message without the hint's name, for a caller that names it in
    // its own words (what_with) or builds a longer message around it.
    const std::string& plain_message() const noexcept { return m_plain_message; }
    // what(), with `hint_name` (the hint in the caller's words, such as a
    // flag) in place of the C++ name; without a name when it is empty. No
    // error.
    std::string what_with(const std::string& hint_name) const;

private:
    ErrorCode m_code;
    std::string m_message;
    std::string m_context;
    ErrorHint m_hint;
    std::string m_plain_message;
};

}  // namespace kernhub
