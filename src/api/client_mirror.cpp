// (not yet implemented)
#include "api/client_impl.hpp"

namespace kernhub {

MirrorReport Client::mirror(const std::vector<std::string>&, const MirrorOptions&) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

}  // namespace kernhub
