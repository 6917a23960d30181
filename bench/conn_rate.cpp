// SPDX-License-Identifier: MIT
// conn_rate: the seed-000 experiment with real connections (seed 003's burst as a second mode).
#include <pthread.h>
#include <sys/resource.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <cstring>
#include <fstream>
#include <functional>
#include <map>
#include <mutex>
#include <sstream>
#include <string>
#include <string_view>
#include <thread>
#include <vector>

#include "bench/common/args.h"
#include "bench/common/cpu.h"
#include "bench/common/die.h"
#include "bench/common/peer_process.h"
#include "smc/socket/socket.h"

using namespace smc;
using namespace smc::bench;

namespace
{

using Clock = std::chrono::steady_clock;
constexpr std::size_t kMessage = 64; // the request and the response
constexpr unsigned kServersPerListener = 32;

// A column: the pool's lock policy (both processes), SMC-D or TCP, and the listener's design.
struct Column {
    const char* name;
    LockPolicy policy;
    Mode mode;
    bool sharedQueue;
};
constexpr Column kColumns[] = {
    {"global", LockPolicy::Global, Mode::SmcD, false},
    {"bucket", LockPolicy::Bucket, Mode::SmcD, false},
    {"default", LockPolicy::Default, Mode::SmcD, false},
    {"tcp", LockPolicy::Default, Mode::Tcp, false},
    {"smcd-shared-queue", LockPolicy::Default, Mode::SmcD, true},
};
constexpr std::size_t kColumnCount = std::size(kColumns);

// Four socket buffer sizes, as the seed's clients use: the RMB each connection asks for.
constexpr std::size_t kRmbSizes[] = {16 << 10, 32 << 10, 64 << 10, 128 << 10};

std::unique_ptr<SmcStack> makeStack(LockPolicy policy)
{
    StackConfig config;
    config.poolPolicy = policy;
    Result<std::unique_ptr<SmcStack>> stack = SmcStack::create(config);
    if (!stack)
        die("smc stack", stack.error());
    return std::move(*stack);
}

// 10,000 connections need more descriptors than the usual limits: as many as the system
// allows (root may raise the hard limit too), else the hard limit.
void raiseFileLimit()
{
    rlimit r{};
    if (::getrlimit(RLIMIT_NOFILE, &r) != 0)
        return;
    const rlim_t want = 1 << 20;
    if (r.rlim_max < want) {
        const rlimit raised{want, want};
        if (::setrlimit(RLIMIT_NOFILE, &raised) == 0)
            return;
    }
    r.rlim_cur = r.rlim_max;
    (void)::setrlimit(RLIMIT_NOFILE, &r);
}

// Threads with small stacks: the burst runs thousands of them.
void runThreads(unsigned n, const std::function<void(unsigned)>& body)
{
    struct Arg {
        const std::function<void(unsigned)>* body;
        unsigned index;
    };
    std::vector<Arg> args(n);
    std::vector<pthread_t> threads(n);
    pthread_attr_t attr;
    pthread_attr_init(&attr);
    pthread_attr_setstacksize(&attr, 256 << 10);
    for (unsigned i = 0; i < n; ++i) {
        args[i] = {&body, i};
        const int rc = pthread_create(
            &threads[i], &attr,
            [](void* p) -> void* {
                auto* a = static_cast<Arg*>(p);
                (*a->body)(a->index);
                return nullptr;
            },
            &args[i]);
        if (rc != 0)
            die("pthread_create", {rc, std::generic_category()});
    }
    pthread_attr_destroy(&attr);
    for (pthread_t t : threads)
        pthread_join(t, nullptr);
}

// TcpExt ListenOverflows from /proc/net/netstat: SYNs dropped because a listen queue was full.
std::uint64_t listenOverflows()
{
    std::ifstream in("/proc/net/netstat");
    std::string names, values;
    while (std::getline(in, names) && std::getline(in, values)) {
        if (names.rfind("TcpExt:", 0) != 0)
            continue;
        std::istringstream n(names), v(values);
        std::string name, value;
        while (n >> name && v >> value)
            if (name == "ListenOverflows")
                return std::stoull(value);
    }
    return 0;
}

// The server: a request in, a response out, then the client's close ("Connection: close").
void serve(Socket s)
{
    std::array<std::byte, kMessage> msg{};
    if (!readExactly(s, msg) || !writeAll(s, msg))
        return;
    (void)s.recv(msg); // until the client closes: then the close is orderly on both ends
}

[[noreturn]] void runServer(std::size_t handshakeLimit)
{
    raiseFileLimit();
    std::map<LockPolicy, std::unique_ptr<SmcStack>> stacks;
    std::vector<Listener> listeners;
    for (const Column& c : kColumns) {
        auto& stack = stacks[c.policy];
        if (!stack)
            stack = makeStack(c.policy);
        SocketOptions o;
        o.mode = c.mode;
        o.rmbBytes = 64 << 10; // Linux's default RMB (sk_rcvbuf / 2)
        o.busyPoll = {};
        ListenerOptions limits;
        limits.sharedAcceptQueue = c.sharedQueue;
        limits.handshakeLimit = handshakeLimit;
        Result<Listener> l = Listener::listen(*stack, "127.0.0.1", 0, o, limits);
        if (!l)
            die("listen", l.error());
        listeners.push_back(std::move(*l));
    }
    for (const Listener& l : listeners)
        std::printf("%u ", l.port());
    std::printf("\n");
    std::fflush(stdout);
    std::vector<std::thread> loops;
    for (Listener& l : listeners)
        for (unsigned i = 0; i < kServersPerListener; ++i)
            loops.emplace_back([&l] {
                for (;;) {
                    Result<Socket> s = l.accept();
                    if (!s)
                        return;
                    serve(std::move(*s));
                }
            });
    char ch;
    while (::read(STDIN_FILENO, &ch, 1) > 0) {
    }
    std::_Exit(0); // serving threads may still run: no destructors under them
}

// This program again, with `args`: its stdin and stdout are pipes to us.
struct Child {
    pid_t pid = -1;
    int in = -1;  // its stdin
    int out = -1; // its stdout
};
Child spawnSelf(const char* self, const std::vector<std::string>& args)
{
    int in[2], out[2];
    if (::pipe(in) != 0 || ::pipe(out) != 0)
        die("pipe", {errno, std::generic_category()});
    std::vector<char*> argv{const_cast<char*>(self)};
    for (const std::string& a : args)
        argv.push_back(const_cast<char*>(a.c_str()));
    argv.push_back(nullptr);
    Child c;
    c.pid = ::fork();
    if (c.pid < 0)
        die("fork", {errno, std::generic_category()});
    if (c.pid == 0) {
        ::dup2(in[0], STDIN_FILENO);
        ::dup2(out[1], STDOUT_FILENO);
        ::close(in[1]);
        ::close(out[0]);
        ::execv(self, argv.data());
        std::_Exit(127);
    }
    ::close(in[0]);
    ::close(out[1]);
    c.in = in[1];
    c.out = out[0];
    return c;
}

// Reads one line from a child's stdout.
std::string readLine(int fd)
{
    std::string line;
    char ch;
    while (::read(fd, &ch, 1) == 1 && ch != '\n')
        line += ch;
    return line;
}

// The server process; it ends when this object goes (its stdin closes).
class Server
{
public:
    Server(const char* self, std::size_t handshakeLimit)
        : child_(spawnSelf(self, {"--serve-conns", std::to_string(handshakeLimit)}))
    {
        std::istringstream ports(readLine(child_.out));
        for (std::size_t i = 0; i < kColumnCount; ++i)
            if (!(ports >> ports_[i]))
                die("server process", std::make_error_code(std::errc::protocol_error));
    }
    ~Server()
    {
        ::close(child_.in);
        ::close(child_.out);
        int status = 0;
        ::waitpid(child_.pid, &status, 0);
    }
    std::uint16_t port(std::size_t column) const { return ports_[column]; }
    pid_t pid() const noexcept { return child_.pid; }

private:
    Child child_;
    std::uint16_t ports_[kColumnCount]{};
};

struct Cell {
    double connsPerS = 0;
    std::uint64_t conns = 0;
    std::uint64_t overflows = 0;
    std::uint64_t fallbacks = 0;
    std::uint64_t errors = 0;
    double seconds = 0;
    std::map<std::string, std::uint64_t> reasons; // of the errors: what each said, how often
    std::chrono::microseconds clientCpu{};        // the client processes'
    std::chrono::microseconds serverCpu{};        // the server process's, meanwhile
    // CPU per completed connection, both sides.
    double cpuPerConn() const
    {
        return conns == 0 ? NAN
                          : static_cast<double>((clientCpu + serverCpu).count()) /
                                static_cast<double>(conns);
    }
    // "N timed out, M reset" (the most frequent first), or "-".
    std::string why() const
    {
        std::vector<std::pair<std::uint64_t, std::string>> byCount;
        for (const auto& [reason, n] : reasons)
            byCount.emplace_back(n, reason);
        std::sort(byCount.rbegin(), byCount.rend());
        std::string out;
        for (const auto& [n, reason] : byCount)
            out += (out.empty() ? "" : ", ") + std::to_string(n) + " " + reason;
        return out.empty() ? "-" : out;
    }
};

// `threads` clients, each connecting, asking, reading and closing until `seconds` pass.
Cell runCell(SmcStack& stack, const Column& column, std::uint16_t port, unsigned threads,
             double seconds)
{
    std::atomic<std::uint64_t> conns{0}, fallbacks{0}, errors{0};
    std::mutex reasonsMutex;
    std::map<std::string, std::uint64_t> reasons;
    const std::uint64_t overflows0 = listenOverflows();
    const auto cpu0 = processCpu();
    const auto start = Clock::now();
    const auto end = start + std::chrono::duration<double>(seconds);
    runThreads(threads, [&](unsigned index) {
        std::array<std::byte, kMessage> msg{};
        for (unsigned i = index; Clock::now() < end; ++i) {
            SocketOptions o;
            o.mode = column.mode;
            o.rmbBytes = kRmbSizes[i % std::size(kRmbSizes)];
            o.busyPoll = {}; // thousands of threads on two cores: a spinning wait only steals
            o.recvTimeout = o.sendTimeout = std::chrono::seconds(30);
            Result<Socket> s = Socket::connect(stack, "127.0.0.1", port, o);
            if (!s || !writeAll(*s, msg) || !readExactly(*s, msg)) {
                errors.fetch_add(1, std::memory_order_relaxed);
                std::lock_guard lock(reasonsMutex);
                ++reasons[s ? "request or response" : s.error().message()];
                continue;
            }
            if (column.mode != Mode::Tcp && s->transport() == Transport::Tcp)
                fallbacks.fetch_add(1, std::memory_order_relaxed);
            conns.fetch_add(1, std::memory_order_relaxed);
        }
    });
    const double elapsed = std::chrono::duration<double>(Clock::now() - start).count();
    Cell c;
    c.conns = conns;
    c.connsPerS = static_cast<double>(c.conns) / elapsed;
    c.seconds = elapsed;
    c.overflows = listenOverflows() - overflows0;
    c.fallbacks = fallbacks;
    c.errors = errors;
    c.reasons = std::move(reasons);
    c.clientCpu = processCpu() - cpu0;
    return c;
}

// Clients per load-generating process in a burst: an SMC-D client holds a TCP socket and
// DMB descriptors, and a process may have 20,000 descriptors or fewer.
constexpr unsigned kClientsPerProcess = 2000;

// `clients` at once, spread over processes of this program (--burst-client), summed.
Cell runBurst(const char* self, std::size_t column, std::uint16_t port, unsigned clients,
              double seconds)
{
    const unsigned processes = (clients + kClientsPerProcess - 1) / kClientsPerProcess;
    const std::uint64_t overflows0 = listenOverflows();
    std::vector<Child> children;
    for (unsigned p = 0; p < processes; ++p) {
        const unsigned n = clients / processes + (p < clients % processes ? 1 : 0);
        children.push_back(
            spawnSelf(self, {"--burst-client", std::to_string(column), std::to_string(port),
                             std::to_string(n), std::to_string(seconds)}));
    }
    Cell sum;
    for (Child& c : children) {
        std::istringstream counts(readLine(c.out));
        Cell one;
        long long cpuUs = 0;
        if (!(counts >> one.conns >> one.fallbacks >> one.errors >> one.seconds >> cpuUs))
            die("burst client", std::make_error_code(std::errc::protocol_error));
        // Then "count reason" lines, and an empty one.
        for (std::string line = readLine(c.out); !line.empty(); line = readLine(c.out)) {
            const std::size_t space = line.find(' ');
            sum.reasons[line.substr(space + 1)] += std::stoull(line.substr(0, space));
        }
        sum.conns += one.conns;
        sum.fallbacks += one.fallbacks;
        sum.errors += one.errors;
        sum.seconds = std::max(sum.seconds, one.seconds);
        sum.clientCpu += std::chrono::microseconds(cpuUs);
        ::close(c.in);
        ::close(c.out);
        int status = 0;
        ::waitpid(c.pid, &status, 0);
    }
    sum.overflows = listenOverflows() - overflows0;
    sum.connsPerS = sum.seconds > 0 ? static_cast<double>(sum.conns) / sum.seconds : 0;
    return sum;
}

// One process of a burst: prints its counts and its first error.
[[noreturn]] void runBurstClient(char** argv)
{
    raiseFileLimit();
    const Column& column = kColumns[std::stoul(argv[2])];
    const auto port = static_cast<std::uint16_t>(std::stoul(argv[3]));
    std::unique_ptr<SmcStack> stack = makeStack(column.policy);
    const Cell c = runCell(*stack, column, port, static_cast<unsigned>(std::stoul(argv[4])),
                           std::stod(argv[5]));
    std::printf("%llu %llu %llu %f %lld\n", static_cast<unsigned long long>(c.conns),
                static_cast<unsigned long long>(c.fallbacks),
                static_cast<unsigned long long>(c.errors), c.seconds,
                static_cast<long long>(processCpu().count()));
    for (const auto& [reason, n] : c.reasons)
        std::printf("%llu %s\n", static_cast<unsigned long long>(n), reason.c_str());
    std::printf("\n");
    std::fflush(stdout);
    std::_Exit(0); // its connections are closed; the stack's threads need no teardown
}

std::string ratio(double a, double b)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%.2fx", b > 0 ? a / b : NAN);
    return buf;
}

// One line per target: met or MISSED, with what was measured.
void target(const std::string& what, bool met, const std::string& measured)
{
    std::printf("target %s: %s (%s)\n", what.c_str(), met ? "met" : "MISSED", measured.c_str());
}

// The targets of an SMC-D connection's setup: against TCP at every T, against Linux's list
// walk (the pool policy `global`) where threads contend, and the burst's.
void printTargets(const std::map<unsigned, std::vector<Cell>>& rows,
                  const std::map<std::size_t, Cell>& burst)
{
    std::printf("\n");
    auto lowest = [&](std::size_t a, std::size_t b, unsigned minThreads) {
        std::pair<double, unsigned> low{INFINITY, 0};
        for (const auto& [t, row] : rows)
            if (t >= minThreads && row[b].connsPerS > 0)
                low = std::min(low, std::pair(row[a].connsPerS / row[b].connsPerS, t));
        return low;
    };
    auto say = [&](const char* what, std::pair<double, unsigned> low, double goal) {
        if (low.second == 0)
            return std::printf("target %s: not measured (no such row)\n", what), void();
        char m[64];
        std::snprintf(m, sizeof m, "lowest %.2fx, at T = %u", low.first, low.second);
        target(what, low.first >= goal, m);
    };
    say("default/tcp >= 0.80x at every T", lowest(2, 3, 0), 0.8);
    say("default/global >= 1.20x at every T >= 8", lowest(2, 0, 8), 1.2);
    if (burst.empty())
        return;
    const Cell& d = burst.at(2);
    target("burst: no client fails", d.errors == 0, std::to_string(d.errors) + " failed");
    target("burst: no listen overflow", d.overflows == 0, std::to_string(d.overflows));
    target("burst: default >= 0.80x tcp conns/s",
           burst.at(3).connsPerS > 0 && d.connsPerS >= 0.8 * burst.at(3).connsPerS,
           ratio(d.connsPerS, burst.at(3).connsPerS));
    target("burst: separate queue >= 5x shared queue",
           burst.at(4).connsPerS > 0 && d.connsPerS >= 5 * burst.at(4).connsPerS,
           ratio(d.connsPerS, burst.at(4).connsPerS));
}

} // namespace

int main(int argc, char** argv)
{
    if (argc == 3 && std::string_view(argv[1]) == "--serve-conns")
        runServer(std::stoul(argv[2]));
    if (argc == 6 && std::string_view(argv[1]) == "--burst-client")
        runBurstClient(argv);
    std::vector<unsigned> threads = {2, 4, 8, 16, 32, 64, 128};
    double seconds = 1.0;
    unsigned burst = 10000;
    double burstSeconds = 5.0;
    unsigned handshakeLimit = static_cast<unsigned>(ListenerOptions{}.handshakeLimit);
    std::string csv, plot;
    Args args("[--threads T,T,...] [--seconds S] [--burst C] [--burst-seconds S]\n"
              "[--handshake-limit N] [--csv FILE] [--plot FILE.png]\n"
              "A server process (this program, re-run) and T client threads here, each opening\n"
              "a connection, sending a 64-byte request, reading the 64-byte response and\n"
              "closing, for S seconds, each connection's RMB one of 16/32/64/128 KiB. Columns:\n"
              "SMC-D with the pool policies global, bucket and default (both processes), plain\n"
              "TCP, and SMC-D with the old shared accept/handshake queue. Then C clients at once\n"
              "(--burst; 0: none; 2000 per process) for the default, shared-queue and TCP\n"
              "columns. Listen\n"
              "overflows from /proc/net/netstat (the whole host), fallbacks to TCP counted.\n");
    args.wholeList("--threads", threads, 1, 100000)
        .real("--seconds", seconds, 0, 3600)
        .whole("--burst", burst, 0, 100000)
        .real("--burst-seconds", burstSeconds, 0, 3600)
        .whole("--handshake-limit", handshakeLimit, 0, 1'000'000)
        .text("--csv", csv)
        .text("--plot", plot);
    args.parse(argc, argv);
    raiseFileLimit();

    Server server(argv[0], handshakeLimit);
    std::map<LockPolicy, std::unique_ptr<SmcStack>> stacks;
    for (const Column& c : kColumns)
        if (!stacks[c.policy])
            stacks[c.policy] = makeStack(c.policy);
    std::ofstream out;
    if (!csv.empty()) {
        out.open(csv);
        out << "threads,conns,mode,conns_per_s,listen_overflows,fallbacks,errors,cpu_us_per_conn\n";
    }
    auto record = [&](unsigned t, std::size_t column, const Cell& c) {
        if (out)
            out << t << ',' << c.conns << ',' << kColumns[column].name << ',' << c.connsPerS << ','
                << c.overflows << ',' << c.fallbacks << ',' << c.errors << ',' << c.cpuPerConn()
                << '\n';
    };
    // A cell with the server's CPU time meanwhile.
    auto measured = [&](auto run) {
        const auto server0 = processCpu(server.pid());
        Cell c = run();
        c.serverCpu = processCpu(server.pid()) - server0;
        return c;
    };

    std::printf("connections/s (request, response, close), RMB 16..128 KiB\n%7s", "threads");
    for (const Column& c : kColumns)
        std::printf(" %17s", c.name);
    std::printf(" | default/tcp default/global default/shared | cpu us/conn default tcp | "
                "overflows fallbacks errors\n");
    std::map<unsigned, std::vector<Cell>> rows;
    for (unsigned t : threads) {
        std::vector<Cell>& row = rows[t];
        for (std::size_t i = 0; i < kColumnCount; ++i) { // side by side in one run
            row.push_back(measured([&] {
                return runCell(*stacks[kColumns[i].policy], kColumns[i], server.port(i), t,
                               seconds);
            }));
            record(t, i, row.back());
        }
        std::uint64_t overflows = 0, fallbacks = 0, errors = 0;
        std::printf("%7u", t);
        for (const Cell& c : row) {
            std::printf(" %17.0f", c.connsPerS);
            overflows += c.overflows;
            fallbacks += c.fallbacks;
            errors += c.errors;
        }
        std::printf(" | %11s %14s %14s | %19.0f %4.0f | %9llu %9llu %6llu\n",
                    ratio(row[2].connsPerS, row[3].connsPerS).c_str(),
                    ratio(row[2].connsPerS, row[0].connsPerS).c_str(),
                    ratio(row[2].connsPerS, row[4].connsPerS).c_str(), row[2].cpuPerConn(),
                    row[3].cpuPerConn(), static_cast<unsigned long long>(overflows),
                    static_cast<unsigned long long>(fallbacks),
                    static_cast<unsigned long long>(errors));
        std::fflush(stdout);
    }

    std::map<std::size_t, Cell> burstCells;
    if (burst > 0) {
        std::printf("\n%u clients at once for %.1f s\n%18s %12s %8s %10s %10s %11s %7s  %s\n",
                    burst, burstSeconds, "mode", "conns/s", "conns", "overflows", "fallbacks",
                    "cpu us/conn", "errors", "why");
        for (std::size_t i : {std::size_t{2}, std::size_t{4}, std::size_t{3}}) {
            const Cell& c = burstCells[i] =
                measured([&] { return runBurst(argv[0], i, server.port(i), burst, burstSeconds); });
            record(burst, i, c);
            std::printf("%18s %12.0f %8llu %10llu %10llu %11.0f %7llu  %s\n", kColumns[i].name,
                        c.connsPerS, static_cast<unsigned long long>(c.conns),
                        static_cast<unsigned long long>(c.overflows),
                        static_cast<unsigned long long>(c.fallbacks), c.cpuPerConn(),
                        static_cast<unsigned long long>(c.errors), c.why().c_str());
            std::fflush(stdout);
        }
        std::printf("separate queue / shared queue: %s\n",
                    ratio(burstCells[2].connsPerS, burstCells[4].connsPerS).c_str());
    }

    printTargets(rows, burstCells);

    if (!plot.empty()) {
        const std::string data = plot + ".dat";
        std::ofstream d(data);
        for (const auto& [t, row] : rows) {
            d << t;
            for (const Cell& c : row)
                d << ' ' << c.connsPerS;
            d << '\n';
        }
        d.close();
        std::string script = "set terminal png size 900,560; set output '" + plot +
                             "'; set logscale x 2; set xlabel 'client threads'; set ylabel "
                             "'connections/s'; set key outside; set grid; set title 'smc-core "
                             "connection rate (SMC-D between two processes)'; plot '" +
                             data + "'";
        for (std::size_t i = 0; i < kColumnCount; ++i)
            script += std::string(i ? ", ''" : "") + " using 1:" + std::to_string(i + 2) +
                      " with linespoints title '" + kColumns[i].name + "'";
        if (std::system(("gnuplot -e \"" + script + "\"").c_str()) != 0)
            die("gnuplot (apt-get install gnuplot-nox)", std::make_error_code(std::errc::io_error));
        std::remove(data.c_str());
        std::printf("plot written to %s\n", plot.c_str());
    }
    return 0;
}
