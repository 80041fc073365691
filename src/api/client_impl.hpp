// ClientImpl, shared by the files that implement Client's methods
// (client.cpp: fetch, load, loaded, info; client_lockfile.cpp: lock and prewarm from a
// lock; client_cache.cpp, client_archive.cpp, client_mirror.cpp: cache
// management, cache archives and mirrors).
#pragma once

#include <atomic>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "api/host_facts.hpp"
#include "api/settings.hpp"
#include "cache/cache.hpp"
#include "common/once.hpp"
#include "common/one_at_a_time.hpp"
#include "common/repo.hpp"
#include "common/text.hpp"
#include "cuda/driver.hpp"
#include "deptree/metadata.hpp"
#include "fetch/fetcher.hpp"
#include "fetch/local_kernel.hpp"
#include "kernhub/kernhub.hpp"
#include "loader/kind.hpp"
#include "loader/resolved_table.hpp"
#include "registry/reference.hpp"
#include "registry/registry.hpp"
#include "select/variant.hpp"
#include "sigstore/sigstore.hpp"
#include "tvmffi/runtime.hpp"

namespace kernhub {

// The kernels library's development switch: every kernel at its latest
// numbered version (all_latest.cpp).
inline constexpr const char* k_all_latest_variable = "UNSTABLE_KERNELS_ALL_LATEST";

namespace api {

// The registry stack Options name: the installed default, the project's
// kernhub.json, KERNHUB_REGISTRY, then Options::registries.
registry::Registry load_registries(const Options& options, const cache::EnvLookup& env);

// Shared by Client::lock (client_lockfile.cpp) and Client::prewarm
// (client_prewarm.cpp).
inline constexpr const char* k_lock_name = "kernhub.lock";
// Options::project_dir, else the current directory.
std::filesystem::path project_dir(const Options& options);
// A spec fetching `repo_id` at exactly `commit`.
registry::KernelSpec spec_at_commit(const std::string& name, const std::string& repo_id, RepoType type,
                                    const std::string& commit, const std::string& file);
// The candidates a listing offers, as names, in listing order.
std::vector<std::string> candidate_names(const fetch::VariantChoice& choice);
bool contains(const std::vector<std::string>& items, const std::string& item);

// What the fetched variant's metadata.json says of kernel dependencies and
// the kernels release it needs (client_deps.cpp); empty when it has none.
// Error(verification) when it is malformed.
deptree::VariantMetadata variant_metadata(const FetchResult& fetched);
// Error(load) when `fetched` and its dependencies hold one repo at two
// revisions (ASCII case ignored): their libraries would share symbols in
// one process (client_deps.cpp).
void check_one_version_each(const FetchResult& fetched);
// The same for a variant folder's metadata.json, when it has one; `where`
// names the variant in errors.
deptree::VariantMetadata variant_metadata(const std::filesystem::path& variant_dir, const std::string& where);

// Whether the trusted-publisher check applies to `spec` (trust.cpp): a repo
// no registry names, from an endpoint that is not file://, that neither the
// trust setting nor the organisation allow-list names.
bool publisher_check_applies(const Settings& settings, const registry::KernelSpec& spec);

// The public view of a recorded signature.
SignatureInfo signature_info(const cache::RecordedSignature& recorded);

}  // namespace api

// A child that fork() made inside the sink and that returned from it: the
// call it would go on with is its parent's, holding the parent's cache
// locks, partial files, unpack folders and threads it does not have, so
// it can neither go on nor unwind. It ends here, at once: one line on
// stderr, then _exit(1) (no atexit handlers, no destructors).
[[noreturn]] void end_child_of_sink() noexcept;

// Delivers the events of one Client one at a time, whichever thread sends
// them: a fetch reports from worker threads of its own (one per file in
// flight), and a sink written for one thread must still see one event after
// another. A sink must not call the Client back (EventSink says so): its
// call would wait for its own turn to end, or for workers waiting on it.
class __attribute__((visibility("hidden"))) SerialSink final : public EventSink {
public:
    explicit SerialSink(EventSink* inner) : m_inner(inner) {}
    void on_event(const Event& event) noexcept override {
        // A hub's text in it is bounded here, whoever the sink is.
        if (event.text.size() > k_max_event_text_bytes) {
            try {
                Event cut = event;
                cut.text = cut_to_show(event.text, k_max_event_text_bytes);
                deliver(cut);
            } catch (...) {
                // Out of memory: the event is dropped.
            }
            return;
        }
        deliver(event);
    }

private:
    void deliver(const Event& event) noexcept {
        const OneAtATime::Turn turn(m_turns);
        const int process = process_mark();
        m_inner->on_event(event);  // an EventSink's on_event is noexcept
        if (process_mark() != process) end_child_of_sink();
    }
    EventSink* m_inner;
    // No lock is held while the caller's sink runs: a child forked meanwhile
    // goes on (common/one_at_a_time.hpp).
    OneAtATime m_turns;
};

// Shared by every thread that calls the Client (docs/embedding.md,
// "Threads"): options, settings and the registry are fixed after
// construction; the lazily made host facts and hub client are made once
// under host_once / hub_mutex and never change afterwards.
// Hidden: not part of the library's interface. A namespace-level class,
// not Client's private nested one, so that the helpers of the files
// implementing Client can take it.
struct __attribute__((visibility("hidden"))) ClientImpl {
    Options options;  // options.events is the SerialSink around the caller's sink
    std::unique_ptr<SerialSink> serial_events;
    cache::EnvLookup env = cache::process_env();
    api::Settings settings;
    registry::Registry registry;
    api::HostDetection host;
    Once host_once;
    std::mutex hub_mutex;
    std::unique_ptr<hub::HubClient> hub;
    // Listings and variant records parsed by earlier fetches of this client.
    fetch::SideDataMemo memo;
    // The Sigstore trusted root, read on the first kernel with a policy.
    std::mutex root_mutex;
    std::optional<sigstore::RootDocument> root;
    // The trusted-publisher check (trust.cpp): organisations found trusted
    // by this client and when the hub said so (used for as long as a kept
    // answer is), and whether the offline notice was given.
    std::mutex publisher_mutex;
    std::map<std::string, std::int64_t> trusted_orgs;
    std::atomic<bool> publisher_notice_given{false};
    // What this client's loads resolved, by the reference asked for
    // (Client::loaded); a table of its own, so another Client's load of
    // the same name never shows here.
    loader::ResolvedTable resolved;

    explicit ClientImpl(Options opts) : options(std::move(opts)) {
        if (options.events != nullptr) {
            serial_events = std::make_unique<SerialSink>(options.events);
            options.events = serial_events.get();
        }
        settings = api::resolve_settings(options, env);
        registry = api::load_registries(options, env);
        warn_unknown_variables();
    }

    // A KERNHUB_* variable that is no setting (a typo such as
    // KERNHUB_RETRYS silently does nothing otherwise): one warning per
    // variable, naming the nearest setting, once per process, from the
    // first Client that has a sink (client.cpp).
    void warn_unknown_variables() const;

    // Host facts are detected on first need: binding the CUDA driver costs a
    // dlopen, which `list` should not pay. A detection that throws leaves
    // the next call to try again.
    const select::HostFacts& host_facts() { return host_detection().facts; }
    const api::HostDetection& host_detection() {
        host_once.call([this] { host = api::detect_host(settings, options); });
        return host;
    }

    hub::HubClient* hub_client() {
        if (settings.offline) return nullptr;
        std::lock_guard<std::mutex> guard(hub_mutex);
        if (!hub) {
            hub::TransportConfig config;
            config.endpoint = settings.endpoint;
            config.token = settings.token;
            config.token_problem = settings.token_problem;
            config.policy.retries = settings.retries;
            config.policy.max_wait = std::chrono::seconds(settings.max_wait_seconds);
            config.policy.cancel = options.cancel;
            config.policy.api_timeout = std::chrono::seconds(settings.api_timeout_seconds);
            config.policy.min_rate = static_cast<std::uint64_t>(settings.min_rate);
            config.policy.min_rate_window = std::chrono::seconds(settings.min_rate_window_seconds);
            // Files in flight and kernels fetched side by side (prewarm,
            // lock, mirror) share this bound per origin.
            config.policy.max_host_connections = settings.max_connections;
            config.policy.ca_file = settings.ca_file;
            hub::HubLimits limits;
            limits.max_listing_entries = static_cast<std::size_t>(settings.max_listing_entries);
            limits.max_listing_bytes = static_cast<std::size_t>(settings.max_listing_bytes);
            limits.api_timeout = config.policy.api_timeout;
            EventSink* events = options.events;
            if (events != nullptr) {
                config.on_retry = [events](const std::string& text) {
                    Event event;
                    event.kind = Event::Kind::retry;
                    event.text = printable(text);  // it quotes URLs a hub sent
                    events->on_event(event);
                };
            }
            hub = std::make_unique<hub::HubClient>(settings.endpoint, hub::make_transport(config),
                                                   !settings.token.empty(), limits);
        }
        return hub.get();
    }

    // Sends `text` to the caller's sink as an info event ("warning: ...",
    // "note: ..."), when there is a sink.
    void say(const std::string& text) const {
        if (options.events == nullptr) return;
        Event event;
        event.kind = Event::Kind::info;
        event.text = text;
        options.events->on_event(event);
    }

    // Requests sent by the calling thread so far: a difference around one
    // call counts that call's requests, not those other threads sent
    // meanwhile through the same client.
    static std::uint64_t requests() { return http::requests_on_this_thread(); }

    // The partial-area locks a load holds (FetchOutcome::hold) until it has
    // opened what it fetched.
    using PartialHolds = std::vector<std::shared_ptr<cache::FileLock>>;
    // fetch_one, then the variant's kernel-depends tree (client_deps.cpp).
    // `for_load` (a load's): each kernel of the tree is fetched only as far
    // as loading it reads (loader::files_to_read; docs/cache-format.md,
    // "Partial variants"), and the hold of each kernel taken in part is
    // added there; null: every variant whole.
    FetchResult fetch(const registry::KernelSpec& spec, PartialHolds* for_load = nullptr);
    // One kernel, and what its variant's metadata.json says; the
    // kernels-minver check runs before the variant's other files download.
    // `dependency`: the kernel is opened as a dependency of another.
    FetchResult fetch_one(const registry::KernelSpec& spec, deptree::VariantMetadata& metadata,
                          PartialHolds* for_load = nullptr, bool dependency = false);
    // The kernels `metadata` names, and theirs, fetched in load order
    // (FetchResult::dependencies).
    std::vector<FetchResult> fetch_dependencies(const FetchResult& top, const deptree::VariantMetadata& metadata,
                                                PartialHolds* for_load = nullptr);
    // Error(load) when the variant needs a newer kernels than kernhub
    // follows and it is for this machine; a warning event when it is
    // selected for another (targets, a host description).
    void check_minver(const deptree::VariantMetadata& metadata, const std::string& repo_id, const std::string& variant);
    // The spec of a dependency: the repo as an ad-hoc reference would give
    // it, at the dependency's version or revision.
    registry::KernelSpec dependency_spec(const deptree::KernelDependency& dep) const;
    // The LOCAL_KERNELS folder naming `repo_id` (docs/configuration.md, "Local kernels"),
    // absolute; empty when none does. Error(usage) for a malformed value.
    std::filesystem::path local_folder(const std::string& repo_id) const;
    // A kernel from its local folder: chosen as a fetch chooses, with no
    // request, no cache write and no trust or signature check
    // (client_deps.cpp).
    FetchResult fetch_local(const registry::KernelSpec& spec, const std::filesystem::path& folder,
                            deptree::VariantMetadata& metadata);
    // Client::info for a kernel LOCAL_KERNELS names.
    InfoResult local_info(const registry::KernelSpec& spec, const std::filesystem::path& folder);
    // The spec a cached dependency was fetched with (its registry "file").
    registry::KernelSpec dependency_spec_of(const FetchResult& fetched) const;
    // What loading `fetched` asks of the loader, less the entry to resolve.
    loader::LoadRequest load_request(const FetchResult& fetched, const std::string& file) const {
        loader::LoadRequest request;
        request.fetched = fetched;
        request.variant = select::parse_variant(fetched.variant);
        request.file = file;
        // A local kernel has no blob to re-hash against.
        request.verify_on_load = settings.verify_on_load && fetched.local_folder.empty();
        request.cache_root = settings.cache_root;
        request.repo_type = fetched.repo_type;
        request.tvm_ffi_library = settings.tvm_ffi_library;
        request.torch = options.torch;
        request.cancel = options.cancel;
        request.metadata = api::variant_metadata(fetched);
        request.check_device_arch = !selecting_elsewhere();
        return request;
    }
    // What opening each of `tree`'s dependencies asks of the loader.
    std::vector<loader::LoadRequest> dependency_requests(const FetchResult& tree,
                                                         const std::string& load_torch_from) const {
        std::vector<loader::LoadRequest> requests;
        for (const FetchResult& dependency : tree.dependencies) {
            requests.push_back(load_request(dependency, dependency_spec_of(dependency).file));
            requests.back().load_torch_from = load_torch_from;
        }
        return requests;
    }
    bool selecting_elsewhere() const { return !settings.host.empty() || !settings.targets.empty(); }

    // Options::sigstore_trusted_root (or KERNHUB_SIGSTORE_TRUSTED_ROOT), else
    // the built-in root; read once, with a warning when its keys are old.
    const sigstore::RootDocument& trusted_root();

    // The signature check for `spec`: its policy with the trusted root, or
    // nullopt; Error(verification) when signatures are required and the
    // entry has no policy (docs/trust.md, "Signatures").
    std::optional<fetch::SignatureCheck> signature_check(const registry::KernelSpec& spec);

    // Error(verification) unless the hub marks the organisation of an
    // ad-hoc repo a trusted kernel publisher (trust.cpp); offline, a notice
    // once instead. ask_publisher asks the hub's overview.
    void check_publisher(const registry::KernelSpec& spec);
    void ask_publisher(const std::string& repo_id, const std::string& org);
    // check_publisher on a thread of its own, for a fetch to pass before it
    // requests a file (FetchRequest::gate): the overview goes out beside the
    // revision and listing requests. Null when no question to the hub is
    // needed (the check does not apply, offline, or this Client found the
    // organisation trusted within the day); the record in the cache is read
    // by the gate's thread.
    std::shared_ptr<fetch::Gate> start_publisher_check(const registry::KernelSpec& spec);
    bool publisher_question_needed(const registry::KernelSpec& spec);

    // UNSTABLE_KERNELS_ALL_LATEST (all_latest.cpp): when it is on, points
    // `request` at the repo's highest "vN" branch and its commit (the hub's
    // refs, offline the cache's), with one warning naming what it
    // overrides. Error(not_found), offline Error(offline), when the repo
    // has no numbered version.
    void use_latest_version(const registry::KernelSpec& spec, fetch::FetchRequest& request);
    // Error(usage) naming the variable when it is on: `command` (lock,
    // prewarm) exists for the pinned commits it overrides.
    void refuse_all_latest(const std::string& command) const;

    // Every fetch, load, info, lock and prewarm asks here first, so the
    // organisation allow-list, the trusted-publisher check and the
    // signature policy apply before a request or a cached file.
    // `check_trust` false: for a request that only reads the cache (cache
    // path), which the trusted-publisher check has nothing to guard.
    fetch::FetchRequest request_for(const registry::KernelSpec& spec, bool check_trust = true) {
        api::check_allowed_org(settings, spec.repo_id);
        std::optional<fetch::SignatureCheck> signature = signature_check(spec);
        fetch::FetchRequest request;
        // After every check that needs no request, so that a refusal they
        // make sends nothing.
        if (check_trust) request.gate = start_publisher_check(spec);
        request.repo = hub::RepoRef{spec.repo_type, spec.repo_id};
        request.revision = spec.effective_revision();
        request.required_file = spec.file;
        request.host = host_facts();
        request.offline = settings.offline;
        request.use_locks = settings.use_flock;
        request.cancel = options.cancel;
        request.archive_limits.max_bytes = settings.archive_max_bytes;
        request.archive_limits.max_entries = static_cast<std::uint64_t>(settings.archive_max_entries);
        request.archive_limits.max_path_bytes = static_cast<std::size_t>(settings.archive_max_path);
        request.signature = std::move(signature);
        request.max_connections = settings.max_connections;
        request.ref_ttl_seconds = settings.ref_ttl_seconds;
        return request;
    }
};

// Client's private implementation type is the one above.
struct __attribute__((visibility("hidden"))) Client::Impl : ClientImpl {
    using ClientImpl::ClientImpl;
};

}  // namespace kernhub
