// SPDX-License-Identifier: MIT
// SignalPolicy: whether a blocking call that a signal handler interrupted fails or goes on.
#pragma once

namespace smc
{

// Asked when a signal handler ran while a blocking send or recv of an SMC-D connection slept:
// true fails the call with std::errc::interrupted (EINTR), false lets it sleep again (as the
// kernel restarts a socket call for a handler with SA_RESTART). `timed`: the call has a timeout
// (for such a call the kernel fails it whatever the handler's flags). Called on the interrupted
// thread with the connection's lock held: it must not call into the connection.
using SignalPolicy = bool (*)(bool timed) noexcept;

} // namespace smc
