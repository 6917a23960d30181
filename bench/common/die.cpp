// SPDX-License-Identifier: MIT
// die() and fail(), and the program name they print.
#include "bench/common/die.h"

#include <cerrno>
#include <cstdarg>
#include <cstdio>
#include <cstdlib>
#include <cstring>

namespace smc::bench
{

namespace
{

const char* program = "bench";

} // namespace

void setProgramName(const char* argv0)
{
    const char* slash = std::strrchr(argv0, '/');
    program = slash ? slash + 1 : argv0;
}

const char* programName()
{
    return program;
}

void die(const char* what, std::error_code ec)
{
    std::fprintf(stderr, "%s: %s: %s\n", program, what, ec.message().c_str());
    std::exit(1);
}

void die(const char* what)
{
    std::fprintf(stderr, "%s: %s\n", program, what);
    std::exit(1);
}

void dieErrno(const char* what)
{
    die(what, std::error_code(errno, std::system_category()));
}

int fail(const char* format, ...)
{
    std::va_list args;
    va_start(args, format);
    std::fprintf(stderr, "%s: ", program);
    std::vfprintf(stderr, format, args);
    std::fputc('\n', stderr);
    va_end(args);
    return 1;
}

} // namespace smc::bench
