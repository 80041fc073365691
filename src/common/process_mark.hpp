// Which process this is, in a way fork() always changes: 1 in the first
// process, and in each child made by fork() one more than in its parent
// (a pthread_atfork handler, common/one_at_a_time.cpp), so a child's mark
// differs from every ancestor's, also across pid namespaces. What a
// process began and a child inherits half done (a turn, a cache lock, a
// partial download) records its mark, and the child leaves it alone.
#pragma once

namespace kernhub {

int process_mark() noexcept;

}  // namespace kernhub
