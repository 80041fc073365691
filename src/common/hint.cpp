#include "common/hint.hpp"

namespace kernhub::hint {

namespace {
constexpr auto k_setting = ErrorHint::Kind::setting;
constexpr auto k_action = ErrorHint::Kind::action;
}  // namespace

// Names follow the C++ API: an Options field by its own name, an
// operation's option as "operation.option", an operation as what it does.
const std::vector<Known>& known() {
    static const std::vector<Known> names = {
        {k_setting, "offline", "Options::offline"},
        {k_setting, "targets", "Options::targets"},
        {k_setting, "cache_dir", "Options::cache_dir"},
        {k_setting, "project_dir", "Options::project_dir"},
        {k_setting, "endpoint", "Options::endpoint"},
        {k_setting, "sigstore_trusted_root", "Options::sigstore_trusted_root"},
        {k_setting, "host", "Options::host"},
        {k_setting, "backend", "Options::backend"},
        {k_setting, "local_kernels", "Options::local_kernels"},
        {k_setting, "trust_remote_code", "Options::trust_remote_code"},
        {k_setting, "load.symbol", "Client::load's symbol_override"},
        {k_setting, "load.op", "LoadOptions::op"},
        {k_setting, "lock.update", "LockOptions::update"},
        {k_setting, "mirror.to", "MirrorOptions::to"},
        {k_setting, "mirror.nginx_conf", "MirrorOptions::nginx_conf"},
        {k_setting, "mirror.listen", "MirrorOptions::listen"},
        {k_setting, "prune.partials", "PruneOptions::partials"},
        {k_setting, "prune.keep_locks", "PruneOptions::keep_locks"},
        {k_action, "fetch", "Client::fetch"},
        {k_action, "lock", "Client::lock"},
        {k_action, "lock.check", "Client::lock with LockOptions::check"},
        {k_action, "list", "Client::list"},
        {k_action, "inspect", "kernhub::inspect_file"},
        {k_action, "mirror", "Client::mirror"},
        {k_action, "cache.prune", "Client::cache_prune"},
        {k_action, "cache.repair", "Client::cache_verify(true)"},
    };
    return names;
}

ErrorHint setting(const char* name) {
    return ErrorHint{k_setting, name};
}

ErrorHint action(const char* name) {
    return ErrorHint{k_action, name};
}

std::string cpp_name(const ErrorHint& hint) {
    if (hint.kind == ErrorHint::Kind::none) return {};
    for (const Known& entry : known()) {
        if (entry.kind == hint.kind && hint.name == entry.name) return entry.cpp;
    }
    return hint.name;
}

}  // namespace kernhub::hint
