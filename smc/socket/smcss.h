// SPDX-License-Identifier: MIT
// smcss-style views of a process's SMC connections: a table and JSON.
#pragma once

#include <string>
#include <vector>

#include "smc/socket/stack.h"

namespace smc
{

// One line per connection, columns as `smcss` prints them (state, addresses, mode with the
// fallback reason, RMB sizes, cursors).
std::string smcssTable(const std::vector<ConnectionInfo>& connections);
// {"connections": [...], "stats": {...}}: every field of ConnectionInfo and StackStats.
std::string smcssJson(const std::vector<ConnectionInfo>& connections, const StackStats& stats);
// smcssJson into `path`; false if it could not be written.
bool writeSmcssJson(const std::string& path, const std::vector<ConnectionInfo>& connections,
                    const StackStats& stats);

} // namespace smc
