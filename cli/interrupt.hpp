// SIGINT and SIGTERM stop a running command cleanly: the handler only sets
// a flag that the library polls (Options::cancel), so partial downloads are
// kept and the command exits 130 or 143 with one line saying so.
#pragma once

#include <atomic>
#include <string>

namespace kernhub::cli {

// Installs the handlers (without SA_RESTART, so a blocking wait returns
// EINTR and looks at the flag). A second signal of either kind ends the
// process at once, as the default action would.
void install_interrupt_handlers();

// The flag to pass as Options::cancel.
const std::atomic<bool>* interrupt_flag();

// The signal that set the flag, or 0.
int interrupt_signal();

// The one line an interrupted command prints (without "kernhub: "), naming
// the signal and then `note`, what the interruption leaves behind.
std::string interrupted_line(const char* note);
// The exit code of an interrupted command: 128 + the signal, or 130 (a
// cancel request without a signal).
int interrupted_exit_code();

}  // namespace kernhub::cli
