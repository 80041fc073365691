#include "hint.hpp"

namespace kernhub::cli {

namespace {

struct CliName {
    ErrorHint::Kind kind;
    const char* name;  // the library's (ErrorHint::name)
    const char* cli;
};

constexpr auto k_setting = ErrorHint::Kind::setting;
constexpr auto k_action = ErrorHint::Kind::action;

// Every name the library gives a hint (src/common/hint.cpp, hint::known());
// tests/cli checks that none is missing.
constexpr CliName k_cli_names[] = {
    {k_setting, "offline", "--offline"},
    {k_setting, "targets", "--target"},
    {k_setting, "cache_dir", "--cache-dir"},
    {k_setting, "project_dir", "--project"},
    {k_setting, "endpoint", "--endpoint"},
    {k_setting, "sigstore_trusted_root", "--trusted-root"},
    {k_setting, "host", "--host"},
    {k_setting, "backend", "KERNHUB_BACKEND=cpu"},
    {k_setting, "local_kernels", "LOCAL_KERNELS=ORG/REPO=PATH"},
    {k_setting, "trust_remote_code", "KERNHUB_TRUST_REMOTE_CODE=ORG/REPO"},
    {k_setting, "load.symbol", "--symbol"},
    {k_setting, "load.op", "--op"},
    {k_setting, "lock.update", "--update"},
    {k_setting, "mirror.to", "--to"},
    {k_setting, "mirror.nginx_conf", "--nginx-conf"},
    {k_setting, "mirror.listen", "--listen"},
    {k_setting, "prune.partials", "--partials"},
    {k_setting, "prune.keep_locks", "--keep-lock"},
    {k_action, "fetch", "`kernhub fetch`"},
    {k_action, "lock", "`kernhub lock`"},
    {k_action, "lock.check", "`kernhub lock --check`"},
    {k_action, "list", "`kernhub list`"},
    {k_action, "inspect", "`kernhub inspect`"},
    {k_action, "mirror", "`kernhub mirror`"},
    {k_action, "cache.prune", "`kernhub cache prune`"},
    {k_action, "cache.repair", "`kernhub cache verify --repair`"},
};

}  // namespace

std::string hint_name(const ErrorHint& hint) {
    for (const CliName& entry : k_cli_names) {
        if (entry.kind == hint.kind && hint.name == entry.name) return entry.cli;
    }
    return hint.name;
}

std::string describe(const Error& error) {
    return error.what_with(hint_name(error.hint()));
}

}  // namespace kernhub::cli
