// SPDX-License-Identifier: MIT
// floors: what this machine lets any user-space SMC-D reach, each floor beside TCP in one run.
//
// No smc-core here. Each row runs the least that an SMC-D connection between two processes
// must do, with nothing else, beside the same work over TCP loopback:
//  - a round trip that sleeps: a bare futex wake-up each way on shared memory (what a
//    blocking receive of SMC-D waits on), against a 64-byte TCP ping-pong; the two processes
//    pinned to two CPUs, and to one;
//  - keep-alive requests in epoll loops (2 server processes, 2 client threads, C connections,
//    40-byte requests, 1 KiB replies): the reply copied through shared memory and one byte on a
//    Unix socket per message, the fewest system calls that wake an unmodified program's epoll
//    (what smc-run's pulses are), against TCP;
//  - Connection: close in epoll loops (a server process with 2 threads, 2 client threads): TCP
//    with the CLC's three messages (SMC-Dv2's PROPOSAL, ACCEPT and CONFIRM, as smc-run sends
//    them) before the request, against TCP without them. Every SMC, Linux's included, speaks
//    CLC on the TCP connection first; the request and the page still go over TCP here.
// For the epoll rows the machine's CPU time per operation is measured too (/proc/stat): what the
// floor saves or adds per operation bounds a program that does its own work beside it
// (bench/apps prints those bounds for its nginx rows).
#include <arpa/inet.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <signal.h>
#include <sys/epoll.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/socket.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <chrono>
#include <csignal>
#include <cstdint>
#include <cstdio>
#include <functional>
#include <string>
#include <thread>
#include <tuple>
#include <utility>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/die.h"
#include "bench/common/stats.h"
#include "bench/common/wakeup.h"

using namespace smc::bench;

namespace
{

using Clock = std::chrono::steady_clock;

// Message sizes: an HTTP GET as wrk sends it, a redis reply of 1 KiB, nginx's answer for
// bench/apps' 6-byte page (its headers included), and the CLC messages of an SMC-Dv2 handshake as
// smc-run sends them.
constexpr std::size_t kRequest = 40;
constexpr std::size_t kReply = 1024;
constexpr std::size_t kPage = 250;
constexpr std::size_t kProposal = 224;
constexpr std::size_t kAccept = 130;
constexpr std::size_t kConfirm = 130;
// A keep-alive connection's mailbox each way (a message fits).
constexpr std::size_t kMailbox = 4096;

void check(bool ok, const char* what)
{
    if (!ok)
        dieErrno(what);
}

double secondsSince(Clock::time_point t0)
{
    return std::chrono::duration<double>(Clock::now() - t0).count();
}

// A child process running `body`; killed and reaped by the destructor.
class Child
{
public:
    explicit Child(const std::function<void()>& body)
    {
        std::fflush(nullptr); // a child that dies must not write our buffered output again
        const pid_t parent = ::getpid();
        pid_ = ::fork();
        check(pid_ >= 0, "fork");
        if (pid_ == 0) {
            ::prctl(PR_SET_PDEATHSIG, SIGKILL); // never outlive the benchmark
            if (::getppid() != parent)
                ::_exit(1); // it died before the line above
            body();
            ::_exit(0);
        }
    }
    // A child serves until killed: one that ended before (an error) leaves a partial cell.
    ~Child()
    {
        int status = 0;
        ::kill(pid_, SIGKILL);
        ::waitpid(pid_, &status, 0);
        if (!WIFSIGNALED(status) || WTERMSIG(status) != SIGKILL)
            die("a serving process ended early");
    }
    Child(const Child&) = delete;
    Child& operator=(const Child&) = delete;

private:
    pid_t pid_;
};

// A loopback listener on a port of the kernel's choice; with `reusePort`, a second one may
// share its port.
int listenOn(std::uint16_t port, bool reusePort)
{
    int l = ::socket(AF_INET, SOCK_STREAM, 0);
    check(l >= 0, "socket");
    int one = 1;
    if (reusePort)
        check(::setsockopt(l, SOL_SOCKET, SO_REUSEPORT, &one, sizeof one) == 0, "SO_REUSEPORT");
    sockaddr_in a{};
    a.sin_family = AF_INET;
    a.sin_port = htons(port);
    a.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    check(::bind(l, reinterpret_cast<sockaddr*>(&a), sizeof a) == 0, "bind");
    check(::listen(l, 4096) == 0, "listen");
    return l;
}

sockaddr_in addressOf(int l)
{
    sockaddr_in a{};
    socklen_t len = sizeof a;
    check(::getsockname(l, reinterpret_cast<sockaddr*>(&a), &len) == 0, "getsockname");
    return a;
}

void noDelay(int fd)
{
    int one = 1;
    check(::setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one) == 0, "TCP_NODELAY");
}

// Both ends of one TCP connection through `l`: {client, server}.
std::pair<int, int> tcpPair(int l)
{
    int c = ::socket(AF_INET, SOCK_STREAM, 0);
    check(c >= 0, "socket");
    const sockaddr_in a = addressOf(l);
    check(::connect(c, reinterpret_cast<const sockaddr*>(&a), sizeof a) == 0, "connect");
    int s = ::accept(l, nullptr, nullptr);
    check(s >= 0, "accept");
    noDelay(c);
    noDelay(s);
    return {c, s};
}

void writeAll(int fd, const char* p, std::size_t n)
{
    while (n > 0) {
        ssize_t w = ::write(fd, p, n);
        if (w < 0 && errno == EINTR)
            continue;
        check(w >= 0, "write");
        p += w;
        n -= static_cast<std::size_t>(w);
    }
}

void readAll(int fd, char* p, std::size_t n)
{
    while (n > 0) {
        ssize_t r = ::read(fd, p, n);
        if (r < 0 && errno == EINTR)
            continue;
        if (r == 0)
            die("the other end closed");
        check(r > 0, "read");
        p += r;
        n -= static_cast<std::size_t>(r);
    }
}

// --- A round trip that sleeps -------------------------------------------------------------

// Median round trip (µs) for `seconds`: bare futex wake-ups between this process and a child,
// or 64 bytes each way over TCP, pinned as `placement` says.
double roundTrip(bool futex, double seconds, Placement placement)
{
    std::vector<double> rtts;
    if (futex) {
        rtts = sleepingRoundTrips(seconds, placement, Sides::Processes);
    } else {
        const SavedAffinity saved;
        const auto [ours, theirs] = placementCpus(placement);
        int l = listenOn(0, false);
        auto [c, s] = tcpPair(l);
        {
            Child echo([s = s, theirs = theirs] {
                pinTo(theirs);
                char b[64];
                for (;;) {
                    readAll(s, b, sizeof b);
                    writeAll(s, b, sizeof b);
                }
            });
            ::close(s);
            pinTo(ours);
            char b[64] = {};
            for (int i = 0; i < 100; ++i) {
                writeAll(c, b, sizeof b);
                readAll(c, b, sizeof b);
            }
            const auto start = Clock::now();
            while (secondsSince(start) < seconds) {
                const auto t0 = Clock::now();
                writeAll(c, b, sizeof b);
                readAll(c, b, sizeof b);
                rtts.push_back(
                    std::chrono::duration<double, std::micro>(Clock::now() - t0).count());
            }
        }
        ::close(c);
        ::close(l);
    }
    if (rtts.empty())
        die("no round trip within the cell's time");
    return median(rtts);
}

// --- Keep-alive requests in epoll loops -----------------------------------------------------

// One connection: two descriptors and, for the shared-memory floor, a mailbox each way (a
// request and its reply strictly alternate, so one message's room is the whole ring).
struct KeepAliveConn {
    int client = -1;
    int server = -1;
    char* toServer = nullptr;
    char* toClient = nullptr;
    std::size_t serverGot = 0; // of a request that came over TCP in pieces
    std::size_t clientGot = 0; // of a reply
};

// Requests answered per second: `shared` copies through shared memory and wakes the peer with
// one byte on a Unix socket per message; otherwise the bytes go over TCP.
double keepAlive(bool shared, double seconds, unsigned conns)
{
    std::vector<KeepAliveConn> cs(conns);
    const std::size_t mailboxes = 2 * kMailbox * conns;
    char* shm = nullptr;
    int l = -1;
    if (shared) {
        shm = static_cast<char*>(
            ::mmap(nullptr, mailboxes, PROT_READ | PROT_WRITE, MAP_SHARED | MAP_ANONYMOUS, -1, 0));
        check(shm != MAP_FAILED, "mmap");
    } else {
        l = listenOn(0, false);
    }
    for (unsigned i = 0; i < conns; ++i) {
        KeepAliveConn& c = cs[i];
        if (shared) {
            int sv[2];
            check(::socketpair(AF_UNIX, SOCK_STREAM | SOCK_NONBLOCK, 0, sv) == 0, "socketpair");
            c.client = sv[0];
            c.server = sv[1];
            c.toServer = shm + 2 * kMailbox * i;
            c.toClient = c.toServer + kMailbox;
        } else {
            std::tie(c.client, c.server) = tcpPair(l);
            check(::fcntl(c.client, F_SETFL, O_NONBLOCK) == 0, "fcntl");
            check(::fcntl(c.server, F_SETFL, O_NONBLOCK) == 0, "fcntl");
        }
    }
    // One whole message on `fd`: the pulse and a copy out of the mailbox, or the bytes
    // themselves, counted in `got` until all `n` are there.
    const auto take = [shared](int fd, const char* mailbox, char* into, std::size_t n,
                               std::size_t& got) {
        const auto ended = [](ssize_t r) {
            if (r == 0)
                die("the other end closed");
            check(r > 0 || errno == EAGAIN || errno == EINTR, "read");
            return r < 0;
        };
        if (shared) {
            char pulse;
            if (ended(::read(fd, &pulse, 1)))
                return false;
            std::copy_n(mailbox, n, into);
            return true;
        }
        ssize_t r = ::read(fd, into + got, n - got);
        if (ended(r))
            return false;
        got += static_cast<std::size_t>(r);
        if (got < n)
            return false;
        got = 0;
        return true;
    };
    const auto give = [shared](int fd, char* mailbox, const char* from, std::size_t n) {
        if (shared) {
            std::copy_n(from, n, mailbox);
            writeAll(fd, "", 1);
        } else {
            writeAll(fd, from, n);
        }
    };
    // Connections [lo, hi) in one epoll loop; `serve` answers, otherwise asks again and counts.
    const auto loop = [&](unsigned lo, unsigned hi, bool serve, double until, long* answered) {
        int ep = ::epoll_create1(0);
        check(ep >= 0, "epoll_create1");
        std::vector<char> buf(kMailbox);
        for (unsigned i = lo; i < hi; ++i) {
            epoll_event e{EPOLLIN, {.u32 = i}};
            check(::epoll_ctl(ep, EPOLL_CTL_ADD, serve ? cs[i].server : cs[i].client, &e) == 0,
                  "epoll_ctl");
            if (!serve)
                give(cs[i].client, cs[i].toServer, buf.data(), kRequest);
        }
        const auto start = Clock::now();
        epoll_event evs[64];
        while (serve || secondsSince(start) < until) {
            int n = ::epoll_wait(ep, evs, 64, 100);
            for (int k = 0; k < n; ++k) {
                KeepAliveConn& c = cs[evs[k].data.u32];
                if (serve) {
                    if (take(c.server, c.toServer, buf.data(), kRequest, c.serverGot))
                        give(c.server, c.toClient, buf.data(), kReply);
                } else if (take(c.client, c.toClient, buf.data(), kReply, c.clientGot)) {
                    give(c.client, c.toServer, buf.data(), kRequest);
                    ++*answered;
                }
            }
        }
        ::close(ep);
    };
    long answered[2] = {0, 0};
    {
        Child w0([&] { loop(0, conns / 2, true, 0, nullptr); });
        Child w1([&] { loop(conns / 2, conns, true, 0, nullptr); });
        std::thread t0(loop, 0, conns / 2, false, seconds, &answered[0]);
        std::thread t1(loop, conns / 2, conns, false, seconds, &answered[1]);
        t0.join();
        t1.join();
    }
    for (KeepAliveConn& c : cs) {
        ::close(c.client);
        ::close(c.server);
    }
    if (shm != nullptr)
        ::munmap(shm, mailboxes);
    if (l >= 0)
        ::close(l);
    return static_cast<double>(answered[0] + answered[1]) / seconds;
}

// --- Connection: close in epoll loops -------------------------------------------------------

// What a server has read from a connection, by descriptor.
using Received = std::vector<std::uint32_t>;

// A server thread: accepts on `l`; answers the PROPOSAL with an ACCEPT when `clc`, and the
// request with the page, then closes (as nginx does under Connection: close).
void closeServer(int l, bool clc)
{
    check(::fcntl(l, F_SETFL, O_NONBLOCK) == 0, "fcntl"); // accepts until EAGAIN
    int ep = ::epoll_create1(0);
    check(ep >= 0, "epoll_create1");
    epoll_event le{EPOLLIN, {.fd = l}};
    check(::epoll_ctl(ep, EPOLL_CTL_ADD, l, &le) == 0, "epoll_ctl");
    Received got(1 << 16);
    const std::uint32_t handshake = clc ? kProposal + kConfirm : 0;
    std::vector<char> buf(4096);
    epoll_event evs[64];
    for (;;) {
        int n = ::epoll_wait(ep, evs, 64, -1);
        for (int k = 0; k < n; ++k) {
            int fd = evs[k].data.fd;
            if (fd == l) {
                for (int c; (c = ::accept4(l, nullptr, nullptr, SOCK_NONBLOCK)) >= 0;) {
                    check(static_cast<std::size_t>(c) < got.size(), "descriptor table");
                    noDelay(c);
                    got[static_cast<std::size_t>(c)] = 0;
                    epoll_event e{EPOLLIN, {.fd = c}};
                    check(::epoll_ctl(ep, EPOLL_CTL_ADD, c, &e) == 0, "epoll_ctl");
                }
                continue;
            }
            ssize_t r = ::read(fd, buf.data(), buf.size());
            if (r < 0 && errno == EAGAIN)
                continue;
            if (r <= 0) {
                ::close(fd);
                continue;
            }
            std::uint32_t& seen = got[static_cast<std::size_t>(fd)];
            const std::uint32_t before = seen;
            seen += static_cast<std::uint32_t>(r);
            if (clc && before < kProposal && seen >= kProposal)
                writeAll(fd, buf.data(), kAccept);
            if (seen >= handshake + kRequest) {
                writeAll(fd, buf.data(), kPage);
                ::close(fd); // also leaves the epoll set
            }
        }
    }
}

// A client thread: `conns` connections, each connecting, (with `clc`) sending the PROPOSAL,
// taking the ACCEPT and sending the CONFIRM, then the request; reading the page to the end,
// closing and starting over, for `seconds`. Returns the connections completed.
long closeClient(const sockaddr_in& to, bool clc, unsigned conns, double seconds)
{
    enum class Step { Connecting, Accepting, Answering };
    struct Conn {
        int fd = -1;
        Step step = Step::Connecting;
        std::size_t got = 0;
    };
    int ep = ::epoll_create1(0);
    check(ep >= 0, "epoll_create1");
    std::vector<char> buf(4096);
    const auto open = [&](Conn& c) {
        c.fd = ::socket(AF_INET, SOCK_STREAM | SOCK_NONBLOCK, 0);
        check(c.fd >= 0, "socket");
        noDelay(c.fd);
        int r = ::connect(c.fd, reinterpret_cast<const sockaddr*>(&to), sizeof to);
        check(r == 0 || errno == EINPROGRESS, "connect");
        c.step = Step::Connecting;
        c.got = 0;
        epoll_event e{EPOLLOUT, {.ptr = &c}};
        check(::epoll_ctl(ep, EPOLL_CTL_ADD, c.fd, &e) == 0, "epoll_ctl");
    };
    std::vector<Conn> cs(conns);
    for (Conn& c : cs)
        open(c);
    long done = 0;
    const auto start = Clock::now();
    epoll_event evs[64];
    while (secondsSince(start) < seconds) {
        int n = ::epoll_wait(ep, evs, 64, 100);
        for (int k = 0; k < n; ++k) {
            Conn& c = *static_cast<Conn*>(evs[k].data.ptr);
            if (c.step == Step::Connecting) {
                writeAll(c.fd, buf.data(), clc ? kProposal : kRequest);
                c.step = clc ? Step::Accepting : Step::Answering;
                epoll_event e{EPOLLIN, {.ptr = &c}};
                check(::epoll_ctl(ep, EPOLL_CTL_MOD, c.fd, &e) == 0, "epoll_ctl");
                continue;
            }
            ssize_t r = ::read(c.fd, buf.data(), buf.size());
            if (r < 0 && errno == EAGAIN)
                continue;
            check(r >= 0, "read");
            c.got += static_cast<std::size_t>(r);
            if (c.step == Step::Accepting && c.got >= kAccept) {
                writeAll(c.fd, buf.data(), kConfirm);
                writeAll(c.fd, buf.data(), kRequest);
                c.step = Step::Answering;
                c.got -= kAccept;
            } else if (r == 0) {
                if (c.step != Step::Answering)
                    die("the server closed before the page");
                if (c.got != kPage)
                    die("a short page");
                ::close(c.fd);
                ++done;
                open(c);
            }
        }
    }
    for (Conn& c : cs)
        ::close(c.fd);
    ::close(ep);
    return done;
}

// Connections a second, nginx- and wrk-like: two server threads on one port, two client
// threads with `conns` connections between them.
double closeRate(bool clc, double seconds, unsigned conns)
{
    int l0 = listenOn(0, true);
    int l1 = listenOn(ntohs(addressOf(l0).sin_port), true);
    const sockaddr_in to = addressOf(l0);
    long done[2] = {0, 0};
    {
        Child server([&] {
            std::thread other(closeServer, l1, clc);
            closeServer(l0, clc);
        });
        ::close(l0);
        ::close(l1);
        std::thread t0([&] { done[0] = closeClient(to, clc, conns / 2, seconds); });
        done[1] = closeClient(to, clc, conns - conns / 2, seconds);
        t0.join();
    }
    return static_cast<double>(done[0] + done[1]) / seconds;
}

// --- The table ------------------------------------------------------------------------------

// CPU seconds the whole machine has spent busy so far (/proc/stat: user, nice, system, irq,
// softirq; not idle, iowait or steal). A cell's share is what both processes and the kernel's
// work for them cost, whatever number of CPUs they kept busy.
double machineBusySeconds()
{
    std::FILE* f = std::fopen("/proc/stat", "r");
    check(f != nullptr, "/proc/stat");
    unsigned long long user = 0, nice = 0, system = 0, idle = 0, iowait = 0, irq = 0, softirq = 0;
    const int n = std::fscanf(f, "cpu %llu %llu %llu %llu %llu %llu %llu", &user, &nice, &system,
                              &idle, &iowait, &irq, &softirq);
    std::fclose(f);
    if (n != 7)
        die("/proc/stat: no cpu line");
    return static_cast<double>(user + nice + system + irq + softirq) /
           static_cast<double>(::sysconf(_SC_CLK_TCK));
}

// A row: the floor and TCP, measured in turns. `perOp`: a rate, for which the machine's CPU
// time per operation is measured too; otherwise a latency in µs.
struct Row {
    const char* key; // the CSV's
    const char* what;
    const char* unit;
    const char* floorName;
    std::function<double(bool floor)> measure;
    bool perOp;
    const char* verdict; // the row's line below the table: what it bounds
};

} // namespace

int main(int argc, char** argv)
{
    double seconds = 3;
    unsigned rounds = 3;
    unsigned conns = 50;
    std::string csvPath;
    Args args("[--seconds S] [--rounds R] [--conns C] [--csv FILE]\n"
              "What this machine lets any user-space SMC-D reach: each floor (the least an SMC-D\n"
              "connection between two processes must do, and nothing else) beside the same work\n"
              "over TCP loopback, in one run; no smc-core. Each cell is the median of R rounds\n"
              "of S/R seconds, floor and TCP taking turns to go first; C connections in the\n"
              "epoll rows (wrk's 200 scaled to two cores, as bench/apps).\n");
    args.real("--seconds", seconds, 0, 3600)
        .whole("--rounds", rounds, 1, 100)
        .whole("--conns", conns, 2, 10000)
        .text("--csv", csvPath);
    args.parse(argc, argv);
    const double cell = seconds / rounds;
    const std::size_t cores = allowedCpus().size();
    // A peer that is gone must fail the run with a message, not kill it with a signal.
    std::signal(SIGPIPE, SIG_IGN);

    std::vector<Row> rows;
    if (cores >= 2)
        rows.push_back(
            {"rtt-two-cpus", "round trip, asleep, two CPUs", "us", "futex",
             [&](bool f) { return roundTrip(f, cell, Placement::TwoCpus); }, false,
             "a receive that sleeps cannot get SMC-D/TCP below this ratio with the two ends\n"
             "  on two CPUs (pingpong --busy-poll 0 asks <=0.5, sockperf pp <=0.56)"});
    rows.push_back({"rtt-one-cpu", "round trip, asleep, one CPU", "us", "futex",
                    [&](bool f) { return roundTrip(f, cell, Placement::OneCpu); }, false,
                    "nor below this one on one CPU"});
    rows.push_back(
        {"keep-alive", "keep-alive, 1 KiB replies", "req/s", "shm+pulse",
         [&](bool f) { return keepAlive(f, cell, conns); }, true,
         "a program that costs the machine c us of CPU a request over TCP reaches at\n"
         "  most c / (c - (TCP - floor)) under a user-space SMC-D that wakes it through\n"
         "  the kernel's epoll (a pulse a message)"});
    rows.push_back({"close", "Connection: close", "conns/s", "tcp+clc",
                    [&](bool f) { return closeRate(f, cell, conns); }, true,
                    "the CLC's three messages cost (floor - TCP) of CPU a connection before any\n"
                    "  SMC work; the request and the page still go over TCP here"});

    std::FILE* csv = nullptr;
    if (!csvPath.empty()) {
        csv = std::fopen(csvPath.c_str(), "w");
        if (csv == nullptr)
            dieErrno("open --csv");
        std::fprintf(csv, "row,mode,value\n");
    }
    std::printf("%-30s %8s %10s %12s %12s %9s %12s %16s\n", "what", "unit", "floor is", "floor",
                "TCP", "floor/TCP", "per round", "CPU us/op fl,TCP");
    std::vector<std::string> verdicts;
    for (const Row& row : rows) {
        std::vector<double> floors, tcps, ratios, floorCpu, tcpCpu;
        // One cell; for a rate, also the machine's CPU time per operation.
        const auto once = [&](bool floor) {
            const double busy0 = machineBusySeconds();
            const double v = row.measure(floor);
            const double busy = machineBusySeconds() - busy0;
            (floor ? floors : tcps).push_back(v);
            if (row.perOp)
                (floor ? floorCpu : tcpCpu).push_back(busy * 1e6 / (v * cell));
        };
        for (unsigned r = 0; r < rounds; ++r) {
            // Each goes first in turn: a noisy moment moves one round of each, not one column.
            once(r % 2 == 0);
            once(r % 2 != 0);
            ratios.push_back(floors.back() / tcps.back());
        }
        const double f = median(floors), t = median(tcps), ratio = f / t;
        char range[32];
        std::snprintf(range, sizeof range, "%.2f-%.2fx",
                      *std::min_element(ratios.begin(), ratios.end()),
                      *std::max_element(ratios.begin(), ratios.end()));
        char cpu[40] = "-";
        if (row.perOp)
            std::snprintf(cpu, sizeof cpu, "%.2f,%.2f", median(floorCpu), median(tcpCpu));
        std::printf("%-30s %8s %10s %12.1f %12.1f %8.2fx %12s %16s\n", row.what, row.unit,
                    row.floorName, f, t, ratio, range, cpu);
        if (csv != nullptr) {
            std::fprintf(csv, "%s,%s,%.3f\n", row.key, row.floorName, f);
            std::fprintf(csv, "%s,tcp,%.3f\n", row.key, t);
            if (row.perOp) {
                std::fprintf(csv, "%s,%s-cpu-us,%.3f\n", row.key, row.floorName, median(floorCpu));
                std::fprintf(csv, "%s,tcp-cpu-us,%.3f\n", row.key, median(tcpCpu));
            }
        }
        verdicts.emplace_back(std::string(row.what) + ": " + row.verdict);
    }
    std::printf("\nwhat each floor bounds:\n");
    for (const std::string& v : verdicts)
        std::printf("- %s\n", v.c_str());
    if (csv != nullptr)
        std::fclose(csv);
    return 0;
}
