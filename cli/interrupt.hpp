// SIGINT and SIGTERM stop a running command cleanly: the handler only sets
// a flag that the library polls (Options::cancel), so partial downloads are
// kept and the command exits 130 or 143 with one line saying so.
#pragma once

#include <atomic>

namespace kernhub::cli {

// Installs the handlers (without SA_RESTART, so a blocking wait returns
// EINTR and looks at the flag). A second signal of either kind ends the
// process at once, as the default action would.
void install_interrupt_handlers();

// The flag to pass as Options::cancel.
const std::atomic<bool>* interrupt_flag();

// The signal that set the flag, or 0.
int interrupt_signal();

}  // namespace kernhub::cli
