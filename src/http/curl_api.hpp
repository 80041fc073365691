// libcurl, bound at run time on the first request (common/dynlib.hpp):
// a process that only loads cached kernels never maps libcurl and its
// dependency tree. The pointer types come from <curl/curl.h>, so they
// cannot drift from the library's signatures.
#pragma once

#include <curl/curl.h>

namespace kernhub::http {

struct CurlApi {
    decltype(&::curl_global_init) global_init = nullptr;
    decltype(&::curl_easy_init) easy_init = nullptr;
    decltype(&::curl_easy_cleanup) easy_cleanup = nullptr;
    decltype(&::curl_easy_reset) easy_reset = nullptr;
    decltype(&::curl_easy_setopt) easy_setopt = nullptr;
    decltype(&::curl_easy_getinfo) easy_getinfo = nullptr;
    decltype(&::curl_easy_perform) easy_perform = nullptr;
    decltype(&::curl_easy_strerror) easy_strerror = nullptr;
    decltype(&::curl_slist_append) slist_append = nullptr;
    decltype(&::curl_slist_free_all) slist_free_all = nullptr;
    decltype(&::curl_getdate) getdate = nullptr;
    // The multi interface (libcurl 7.68 or newer); without it (or without
    // an asynchronous resolver, see multi_usable) each transfer runs with
    // curl_easy_perform.
    decltype(&::curl_multi_init) multi_init = nullptr;
    decltype(&::curl_multi_cleanup) multi_cleanup = nullptr;
    decltype(&::curl_multi_setopt) multi_setopt = nullptr;
    decltype(&::curl_multi_add_handle) multi_add_handle = nullptr;
    decltype(&::curl_multi_remove_handle) multi_remove_handle = nullptr;
    decltype(&::curl_multi_perform) multi_perform = nullptr;
    decltype(&::curl_multi_poll) multi_poll = nullptr;
    decltype(&::curl_multi_wakeup) multi_wakeup = nullptr;
    decltype(&::curl_multi_info_read) multi_info_read = nullptr;
    decltype(&::curl_easy_pause) easy_pause = nullptr;
    // True when the multi interface is there and names are resolved
    // without blocking the thread that drives it (an asynchronous resolver).
    bool multi_usable = false;
};

// Opens libcurl.so.4 (else libcurl.so), resolves the table and runs
// curl_global_init once per process. Throws Error(internal) naming the
// library and what to install, on this and every later call, when it
// cannot; Error(network) when curl_global_init fails.
const CurlApi& curl_api();

}  // namespace kernhub::http
