// (not yet implemented)
#include "api/client_impl.hpp"

namespace kernhub {

CacheListing Client::cache_ls() {
    throw Error(ErrorCode::internal, "not implemented yet");
}

std::string Client::cache_path(const std::string&) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

CacheVerifyReport Client::cache_verify(bool) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

PruneReport Client::cache_prune(const PruneOptions&) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

}  // namespace kernhub
