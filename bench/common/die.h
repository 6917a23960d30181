// SPDX-License-Identifier: MIT
// die() and fail(): a benchmark's error messages, "<program>: what went wrong".
#pragma once

#include <system_error>

namespace smc::bench
{

// The name error messages start with; Args::parse() sets it from argv[0].
void setProgramName(const char* argv0);
const char* programName();

// Prints "<program>: <what>: <ec's message>" on stderr and exits 1.
[[noreturn]] void die(const char* what, std::error_code ec);
// Prints "<program>: <what>" on stderr and exits 1: an error no system call reported.
[[noreturn]] void die(const char* what);
// die(what, errno's error): after a system call that failed.
[[noreturn]] void dieErrno(const char* what);

// Prints "<program>: <printf-style message>" on stderr and returns 1, for
// `return fail(...)` where live objects (threads, link groups) must be torn
// down in order rather than left to exit().
[[gnu::format(printf, 1, 2)]] int fail(const char* format, ...);

} // namespace smc::bench
