#include "http/curl_api.hpp"

#include "common/dynlib.hpp"
#include "kernhub/error.hpp"

namespace kernhub::http {

namespace {

CurlApi bind_curl() {
    const dynlib::Library lib =
        dynlib::open_first({"libcurl.so.4", "libcurl.so"}, "to download kernels",
                           "install libcurl4 (Debian, Ubuntu) or libcurl (other systems); kernels already in the "
                           "cache load without it, offline or at a pinned commit");
    CurlApi api;
    dynlib::resolve(lib, "curl_global_init", api.global_init);
    dynlib::resolve(lib, "curl_easy_init", api.easy_init);
    dynlib::resolve(lib, "curl_easy_cleanup", api.easy_cleanup);
    dynlib::resolve(lib, "curl_easy_reset", api.easy_reset);
    dynlib::resolve(lib, "curl_easy_setopt", api.easy_setopt);
    dynlib::resolve(lib, "curl_easy_getinfo", api.easy_getinfo);
    dynlib::resolve(lib, "curl_easy_perform", api.easy_perform);
    dynlib::resolve(lib, "curl_easy_strerror", api.easy_strerror);
    dynlib::resolve(lib, "curl_slist_append", api.slist_append);
    dynlib::resolve(lib, "curl_slist_free_all", api.slist_free_all);
    dynlib::resolve(lib, "curl_getdate", api.getdate);
    const bool multi = dynlib::resolve_optional(lib, "curl_multi_init", api.multi_init) &&
                       dynlib::resolve_optional(lib, "curl_multi_cleanup", api.multi_cleanup) &&
                       dynlib::resolve_optional(lib, "curl_multi_setopt", api.multi_setopt) &&
                       dynlib::resolve_optional(lib, "curl_multi_add_handle", api.multi_add_handle) &&
                       dynlib::resolve_optional(lib, "curl_multi_remove_handle", api.multi_remove_handle) &&
                       dynlib::resolve_optional(lib, "curl_multi_perform", api.multi_perform) &&
                       dynlib::resolve_optional(lib, "curl_multi_poll", api.multi_poll) &&
                       dynlib::resolve_optional(lib, "curl_multi_wakeup", api.multi_wakeup) &&
                       dynlib::resolve_optional(lib, "curl_multi_info_read", api.multi_info_read) &&
                       dynlib::resolve_optional(lib, "curl_easy_pause", api.easy_pause);
    decltype(&::curl_version_info) version_info = nullptr;
    const bool async_resolver = dynlib::resolve_optional(lib, "curl_version_info", version_info) &&
                                (version_info(CURLVERSION_NOW)->features & CURL_VERSION_ASYNCHDNS) != 0;
    // Otherwise every transfer runs on its caller.
    api.multi_usable = multi && async_resolver;
    // Under the binding's once-initialisation: curl_global_init is not
    // thread-safe on older libcurl and must run once before any handle.
    if (const CURLcode code = api.global_init(CURL_GLOBAL_DEFAULT); code != CURLE_OK) {
        throw Error(ErrorCode::internal, "libcurl failed to initialise (" + lib.name + "); check its TLS backend",
                    api.easy_strerror(code));
    }
    return api;
}

}  // namespace

const CurlApi& curl_api() {
    return dynlib::bound<CurlApi, bind_curl>();
}

}  // namespace kernhub::http
