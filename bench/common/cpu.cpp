// SPDX-License-Identifier: MIT
// processCpu: getrusage for ourselves, /proc/PID/stat for a peer process.
#include "bench/common/cpu.h"

#include <sys/resource.h>
#include <unistd.h>

#include <fstream>
#include <sstream>
#include <string>

namespace smc::bench
{

std::chrono::microseconds processCpu()
{
    rusage u{};
    ::getrusage(RUSAGE_SELF, &u);
    return std::chrono::seconds(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
           std::chrono::microseconds(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

std::chrono::microseconds processCpu(pid_t pid)
{
    std::ifstream in("/proc/" + std::to_string(pid) + "/stat");
    std::string stat;
    std::getline(in, stat);
    // Fields 14 and 15 (utime, stime) follow the command name in parentheses, which may
    // itself hold spaces: count from its closing one.
    const std::size_t close = stat.rfind(')');
    if (close == std::string::npos)
        return {};
    std::istringstream fields(stat.substr(close + 2));
    std::string skip;
    for (int i = 3; i < 14; ++i) // state (3) .. cmajflt (13)
        fields >> skip;
    unsigned long long utime = 0, stime = 0;
    if (!(fields >> utime >> stime))
        return {};
    const long hz = ::sysconf(_SC_CLK_TCK);
    return std::chrono::microseconds((utime + stime) * 1'000'000ull /
                                     static_cast<unsigned long long>(hz > 0 ? hz : 100));
}

} // namespace smc::bench
