// SPDX-License-Identifier: MIT
// smc-nc: netcat over smc-core; stdin to the connection and the connection to stdout.
#include <fcntl.h>
#include <poll.h>
#include <unistd.h>

#include <array>
#include <cerrno>
#include <charconv>
#include <chrono>
#include <cstdio>
#include <cstring>
#include <functional>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "smc/socket/smcss.h"
#include "smc/socket/socket.h"

namespace
{

using namespace smc;

int usage()
{
    std::fprintf(
        stderr,
        "usage: smc-nc [-v] [--smcd | --smcr DEVICE[,ALTERNATE...] [--v1] | --tcp] [--rmb BYTES] "
        "[--json FILE] [--smcss] [--count N] [--no-tcp-option] [--close-second]\n"
        "              HOST PORT | -l [HOST] PORT\n"
        "Copies stdin to the connection and the connection to stdout until both end\n"
        "(like nc -N). -v: the mode chosen on stderr; at the end, the connection smcss-style:\n"
        "--json into FILE, --smcss as a table on stderr. --smcr: SMC-R only, over the RDMA\n"
        "DEVICE (e.g. rxe0), with ALTERNATE devices for a second link (-v says when the\n"
        "group's links change); --v1: offer SMC-Rv1 only (Linux takes only v2 on rxe).\n"
        "Without a mode flag, SMC-D, else TCP fallback. --count: N connections one after\n"
        "another on one stack (later ones join its link groups); stdin goes to the first.\n"
        "--no-tcp-option: no SMC TCP option in our handshakes (Linux peers then fall back).\n"
        "--close-second: end our side only after the peer ended its own.\n");
    return 2;
}

bool parseNumber(std::string_view text, std::size_t& out)
{
    const auto [end, ec] = std::from_chars(text.data(), text.data() + text.size(), out);
    return ec == std::errc() && end == text.data() + text.size();
}

void describe(const Socket& s, const std::string& device)
{
    if (s.transport() == Transport::SmcD)
        std::fprintf(stderr, "smc-nc: SMC-D\n");
    else if (s.transport() == Transport::SmcR)
        std::fprintf(stderr, "smc-nc: SMC-Rv%u %s\n", s.info().version, device.c_str());
    else if (const auto reason = s.fallbackReason())
        std::fprintf(stderr, "smc-nc: TCP fallback %s (0x%08x)\n", clc::toString(*reason),
                     static_cast<unsigned>(*reason));
    else
        std::fprintf(stderr, "smc-nc: TCP\n");
}

// "2.5 s, 12 MiB in, 11 MiB out: links 2: 10.1.0.1>10.1.0.2 10.2.0.1>10.2.0.2" whenever the
// SMC-R groups' active links change.
class LinkReport
{
public:
    explicit LinkReport(SmcStack& stack) : stack_(stack) {}
    void operator()(std::uint64_t in, std::uint64_t out)
    {
        std::string now;
        unsigned n = 0;
        for (const LinkInfo& l : stack_.smcrLinks())
            if (l.state == LinkState::Active) {
                now += ' ';
                appendAddress(now, l.local.gid);
                now += '>';
                appendAddress(now, l.peer.gid);
                ++n;
            }
        if (now != last_) {
            const std::chrono::duration<double> t = std::chrono::steady_clock::now() - start_;
            std::fprintf(stderr, "smc-nc: %.1f s, %llu MiB in, %llu MiB out: links %u:%s\n",
                         t.count(), static_cast<unsigned long long>(in >> 20),
                         static_cast<unsigned long long>(out >> 20), n, now.c_str());
        }
        last_ = std::move(now);
    }

private:
    // Appended, not concatenated: gcc 12 at -O3 warns falsely (-Wrestrict) inside
    // operator+ on strings.
    static void appendAddress(std::string& out, const Gid& g)
    {
        char text[16];
        std::snprintf(text, sizeof text, "%u.%u.%u.%u", g[12], g[13], g[14], g[15]);
        out += text;
    }
    SmcStack& stack_;
    std::string last_;
    const std::chrono::steady_clock::time_point start_ = std::chrono::steady_clock::now();
};

// The copy loop: one poll over stdin, stdout-bound socket data and the socket's readiness.
// `tick` (bytes in, bytes out) runs after each round, at least every 100 ms. `closeSecond`:
// our side ends only once the peer ended its own.
int pump(Socket& s, bool closeSecond, const std::function<void(std::uint64_t, std::uint64_t)>& tick)
{
    std::uint64_t in = 0, sent = 0;
    const Result<int> ready = s.pollFd();
    if (!ready) {
        std::fprintf(stderr, "smc-nc: poll descriptor: %s\n", ready.error().message().c_str());
        return 1;
    }
    s.setNonBlocking(true);
    ::fcntl(STDIN_FILENO, F_SETFL, ::fcntl(STDIN_FILENO, F_GETFL) | O_NONBLOCK);
    std::vector<std::byte> out; // read from stdin, not yet sent
    std::size_t outAt = 0;
    bool inEof = false, shutDown = false, netEof = false;
    std::array<std::byte, 256 * 1024> buf;
    while (!(netEof && shutDown)) {
        pollfd fds[2] = {{STDIN_FILENO, 0, 0}, {*ready, 0, 0}};
        if (!inEof && outAt == out.size())
            fds[0].events = POLLIN;
        if (outAt < out.size())
            fds[1].events |= POLLOUT;
        if (!netEof)
            fds[1].events |= POLLIN;
        if (::poll(fds, 2, 100) < 0 && errno != EINTR)
            return 1;
        tick(in, sent);
        // POLLHUP comes whether asked or not: read only when there is room for more.
        if (fds[0].events != 0 && fds[0].revents != 0) {
            const ssize_t n = ::read(STDIN_FILENO, buf.data(), buf.size());
            if (n > 0) {
                out.assign(buf.begin(), buf.begin() + n);
                outAt = 0;
            } else if (n == 0 || (errno != EAGAIN && errno != EINTR)) {
                inEof = true;
            }
        }
        while (outAt < out.size()) {
            Result<std::size_t> n = s.send(std::span(out).subspan(outAt));
            if (!n) {
                if (n.error() == std::errc::resource_unavailable_try_again)
                    break;
                std::fprintf(stderr, "smc-nc: send: %s\n", n.error().message().c_str());
                return 1;
            }
            outAt += *n;
            sent += *n;
        }
        if (inEof && outAt == out.size() && !shutDown && (!closeSecond || netEof)) {
            (void)s.shutdown(Shutdown::Write);
            shutDown = true;
        }
        while (!netEof) {
            Result<std::size_t> n = s.recv(buf);
            if (!n) {
                if (n.error() == std::errc::resource_unavailable_try_again)
                    break;
                std::fprintf(stderr, "smc-nc: recv: %s\n", n.error().message().c_str());
                return 1;
            }
            if (*n == 0) {
                netEof = true;
                break;
            }
            in += *n;
            for (std::size_t done = 0; done < *n;) {
                const ssize_t w = ::write(STDOUT_FILENO, buf.data() + done, *n - done);
                if (w < 0 && errno != EINTR && errno != EAGAIN)
                    return 1;
                if (w > 0)
                    done += static_cast<std::size_t>(w);
            }
        }
    }
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    bool verbose = false, listen = false, smcss = false, offerV1Only = false, closeSecond = false;
    std::size_t count = 1;
    SocketOptions options;
    StackConfig config;
    std::string json, device;
    std::vector<std::string_view> rest;
    for (int i = 1; i < argc; ++i) {
        const std::string_view a = argv[i];
        if (a == "-v")
            verbose = true;
        else if (a == "-l")
            listen = true;
        else if (a == "--smcd")
            options.mode = Mode::SmcD;
        else if (a == "--tcp")
            options.mode = Mode::Tcp;
        else if (a == "--v1")
            offerV1Only = true;
        else if (a == "--close-second")
            closeSecond = true;
        else if (a == "--no-tcp-option")
            config.smcTcpOption = false;
        else if (a == "--rmb" && i + 1 < argc) {
            if (!parseNumber(argv[++i], options.rmbBytes))
                return usage();
        } else if (a == "--count" && i + 1 < argc) {
            if (!parseNumber(argv[++i], count) || count == 0)
                return usage();
        } else if (a == "--smcss") {
            smcss = true;
        } else if (a == "--json" && i + 1 < argc)
            json = argv[++i];
        else if (a == "--smcr" && i + 1 < argc) {
            device = argv[++i];
            config.smcr = SmcrConfig{};
            std::string_view names = device;
            config.smcr->device = std::string(names.substr(0, names.find(',')));
            for (std::size_t at = names.find(','); at != std::string_view::npos;) {
                const std::size_t next = names.find(',', at + 1);
                config.smcr->alternates.emplace_back(names.substr(at + 1, next - at - 1));
                at = next;
            }
            options.mode = Mode::SmcR;
        } else if (!a.empty() && a[0] == '-')
            return usage();
        else
            rest.push_back(a);
    }
    if (offerV1Only) {
        if (!config.smcr)
            return usage();
        config.smcr->offerV2 = false;
    }
    std::size_t port = 0;
    if (rest.empty() || rest.size() > 2 || !parseNumber(rest.back(), port) || port > 65535 ||
        (!listen && rest.size() != 2))
        return usage();
    const std::string host = rest.size() == 2 ? std::string(rest[0]) : std::string();

    Result<std::unique_ptr<SmcStack>> stack = SmcStack::create(config);
    if (!stack) {
        if (!device.empty())
            std::fprintf(stderr, "smc-nc: SMC-R device %s: %s\n", device.c_str(),
                         stack.error().message().c_str());
        else
            std::fprintf(stderr, "smc-nc: %s\n", stack.error().message().c_str());
        return 1;
    }
    if (verbose && config.smcr && config.smcTcpOption && (*stack)->tcpOptionError())
        std::fprintf(stderr, "smc-nc: no SMC TCP option (%s): Linux peers will fall back\n",
                     (*stack)->tcpOptionError().message().c_str());
    std::optional<Listener> listener;
    if (listen) {
        Result<Listener> l =
            Listener::listen(**stack, host, static_cast<std::uint16_t>(port), options);
        if (!l) {
            std::fprintf(stderr, "smc-nc: listen: %s\n", l.error().message().c_str());
            return 1;
        }
        if (verbose)
            std::fprintf(stderr, "smc-nc: listening on port %u\n", l->port());
        listener = std::move(*l);
    }
    LinkReport report(**stack);
    int rc = 0;
    std::optional<Socket> last; // open until its smcss line is out
    for (std::size_t k = 0; k < count && rc == 0; ++k) {
        last.reset();
        Result<Socket> s =
            listener ? listener->accept()
                     : Socket::connect(**stack, host, static_cast<std::uint16_t>(port), options);
        if (!s) {
            std::fprintf(stderr, "smc-nc: %s: %s\n", listen ? "accept" : "connect",
                         s.error().message().c_str());
            return 1;
        }
        if (verbose)
            describe(*s, device);
        rc = pump(*s, closeSecond, [&](std::uint64_t in, std::uint64_t out) {
            if (verbose)
                report(in, out);
        });
        last = std::move(*s);
    }
    if (!json.empty() && !writeSmcssJson(json, (*stack)->connections(), (*stack)->stats()))
        std::fprintf(stderr, "smc-nc: cannot write %s\n", json.c_str());
    if (smcss)
        std::fputs(smcssTable((*stack)->connections()).c_str(), stderr);
    return rc;
}
