// (not yet implemented)
#include "api/client_impl.hpp"

namespace kernhub {

LockReport Client::lock(const LockOptions&) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

PrewarmReport Client::prewarm_lock(const std::string&) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

}  // namespace kernhub
