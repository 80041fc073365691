// What the C API tests share: an owning handle and its last error text.
#pragma once

#include <memory>
#include <string>

#include "kernhub/kernhub.h"

namespace kernhub::test {

struct HubDeleter {
    void operator()(kh_hub* hub) const { kh_hub_free(hub); }
};
using Hub = std::unique_ptr<kh_hub, HubDeleter>;

// The calling thread's last error on `hub`, "" for none.
inline std::string last_error(const Hub& hub) {
    const char* text = kh_last_error(hub.get());
    return text == nullptr ? std::string() : std::string(text);
}

}  // namespace kernhub::test
