// (not yet implemented)
#include "api/client_impl.hpp"

namespace kernhub {

ExportReport Client::cache_export(const std::string&, const std::vector<std::string>&) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

ImportReport Client::cache_import(const std::string&) {
    throw Error(ErrorCode::internal, "not implemented yet");
}

}  // namespace kernhub
