// A download target that keeps the body in memory and counts restarts (the
// server ignored Range), for tests of the http and hub layers.
#pragma once

#include <cstdint>
#include <string>

#include "http/http.hpp"

namespace kernhub::test {

class StringTarget : public http::BodyTarget {
public:
    std::uint64_t size() const override { return data.size(); }
    void write(const char* bytes, std::size_t count) override { data.append(bytes, count); }
    void restart() override {
        ++restarts;
        data.clear();
    }

    std::string data;
    int restarts = 0;
};

}  // namespace kernhub::test
