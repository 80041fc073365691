#include "loader/resolved_table.hpp"

namespace kernhub::loader {

void ResolvedTable::publish(const std::string& key, const LoadResult& result, std::uint64_t started) {
    std::lock_guard<std::mutex> lock(m_mutex);
    Slot& slot = m_table[key];
    if (started > slot.started) slot = Slot{result, started};
}

std::optional<LoadResult> ResolvedTable::find(const std::string& key) const {
    std::lock_guard<std::mutex> lock(m_mutex);
    auto it = m_table.find(key);
    if (it == m_table.end()) return std::nullopt;
    return it->second.result;
}

std::size_t ResolvedTable::size() const {
    std::lock_guard<std::mutex> lock(m_mutex);
    return m_table.size();
}

}  // namespace kernhub::loader
