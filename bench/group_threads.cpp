// SPDX-License-Identifier: MIT
// group_threads: how many threads a process runs with N in-process link-group pairs (two links
// each).
#include <sys/resource.h>

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "smc/core/link_group.h"
#include "smc/testing/inproc_fabric.h"
#include "smc/testing/local_pair.h"

using namespace smc;
using namespace std::chrono_literals;

namespace
{

unsigned threadsNow()
{
    std::ifstream status("/proc/self/status");
    for (std::string line; std::getline(status, line);)
        if (line.rfind("Threads:", 0) == 0)
            return static_cast<unsigned>(std::stoul(line.substr(8)));
    return 0;
}

} // namespace

// Usage: group_threads [PAIRS ...] (default 1 100 1000). Prints, per count,
// the threads while the groups are up and idle (after blocking flow threads
// retired), and the peak sampled during setup.
int main(int argc, char** argv)
{
    std::vector<unsigned> counts;
    for (int i = 1; i < argc; ++i)
        counts.push_back(static_cast<unsigned>(std::strtoul(argv[i], nullptr, 10)));
    if (counts.empty())
        counts = {1, 100, 1000};
    rlimit files{};
    if (getrlimit(RLIMIT_NOFILE, &files) == 0) { // the old design needs an fd per thread or so
        files.rlim_cur = files.rlim_max;
        (void)setrlimit(RLIMIT_NOFILE, &files);
    }
    std::printf("%8s %8s %10s %10s\n", "pairs", "groups", "threads", "peak");
    for (unsigned n : counts) {
        InprocRegistrar serverKeys, clientKeys;
        InprocFabric fabric(serverKeys, clientKeys);
        std::vector<std::unique_ptr<LinkGroup>> groups;
        unsigned peak = 0;
        for (unsigned i = 0; i < n; ++i) {
            LinkGroupConfig config;
            config.maxLinks = 2;
            config.timeouts.testLink = 0ms;
            config.role = Role::Server;
            Result<std::unique_ptr<LinkGroup>> s = LinkGroup::create(config, fabric);
            config.role = Role::Client;
            Result<std::unique_ptr<LinkGroup>> c = LinkGroup::create(config, fabric);
            if (!s || !c) {
                std::fprintf(stderr, "group_threads: create: %s\n",
                             (s ? c.error() : s.error()).message().c_str());
                return 1;
            }
            if (Result<void> r = startLocalPair(**s, **c, fabric);
                !r || !waitForLinks(**s, **c, 2, 30s)) {
                std::fprintf(stderr, "group_threads: pair %u: %s\n", i,
                             r ? "links did not come up" : r.error().message().c_str());
                return 1;
            }
            peak = std::max(peak, threadsNow());
            groups.push_back(std::move(*s));
            groups.push_back(std::move(*c));
        }
        std::this_thread::sleep_for(2s); // idle blocking threads end after 1 s
        std::printf("%8u %8zu %10u %10u\n", n, groups.size(), threadsNow(), peak);
        std::fflush(stdout);
    }
    return 0;
}
