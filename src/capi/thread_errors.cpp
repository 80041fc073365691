#include "capi/thread_errors.hpp"

#include <algorithm>

#include "kernhub/error.hpp"

namespace kernhub::capi {
namespace {

constexpr const char* k_out_of_memory = "internal error: out of memory";

// Whether `weak` refers to `handle`; by ownership, so an expired entry never
// matches a handle that took over its address.
bool same_handle(const std::weak_ptr<const HandleLife>& weak, const HandleToken& handle) noexcept {
    return !weak.owner_before(handle) && !handle.owner_before(weak);
}

// The entry of `handle` in `entries`, or entries.end().
template <class Entries>
auto find_entry(Entries& entries, const HandleToken& handle) noexcept {
    return std::find_if(entries.begin(), entries.end(),
                        [&](const auto& entry) { return same_handle(entry.handle, handle); });
}

}  // namespace

ThreadErrors& ThreadErrors::current() noexcept {
    // The one piece of state this layer keeps outside its handles; each
    // thread owns its own, so nothing here is shared between threads.
    thread_local ThreadErrors errors;
    return errors;
}

void ThreadErrors::failed(const HandleToken& handle, int code, std::string_view message) noexcept {
    std::string text;
    try {
        text = std::string(to_string(static_cast<ErrorCode>(code))) + ": " + printable(message);
    } catch (...) {
        text.clear();  // reads as out of memory
    }
    if (same_handle(m_unrecorded, handle)) m_unrecorded.reset();
    if (auto entry = find_entry(m_entries, handle); entry != m_entries.end()) {
        entry->text = std::move(text);
        return;
    }
    // A new entry: first drop those of handles freed since.
    m_entries.remove_if([](const Entry& entry) { return entry.handle.expired(); });
    try {
        m_entries.push_back(Entry{handle, std::move(text)});
    } catch (...) {
        m_unrecorded = handle;
    }
}

void ThreadErrors::succeeded(const HandleToken& handle) noexcept {
    if (auto entry = find_entry(m_entries, handle); entry != m_entries.end()) m_entries.erase(entry);
    if (same_handle(m_unrecorded, handle)) m_unrecorded.reset();
}

const char* ThreadErrors::last(const HandleToken& handle) const noexcept {
    if (auto entry = find_entry(m_entries, handle); entry != m_entries.end()) {
        return entry->text.empty() ? k_out_of_memory : entry->text.c_str();
    }
    return same_handle(m_unrecorded, handle) ? k_out_of_memory : nullptr;
}

}  // namespace kernhub::capi
