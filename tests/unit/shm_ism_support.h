// SPDX-License-Identifier: MIT
// Helpers of the shm-ism tests: forked children, pipes, a raw client and owner of the wire format.
#pragma once

#include <atomic>
#include <cstring>
#include <fstream>
#include <functional>
#include <string>
#include <thread>

#include <dirent.h>
#include <fcntl.h>
#include <poll.h>
#include <signal.h>
#include <sys/eventfd.h>
#include <sys/mman.h>
#include <sys/socket.h>
#include <sys/un.h>
#include <sys/wait.h>
#include <unistd.h>

#include "base/executor.h"
#include "base/unique_fd.h"
#include "smc/ism/shm_ism.h"
#include "smc/ism/shm_wire.h"

namespace smc::shmtest
{

using namespace std::chrono_literals;

constexpr std::size_t kDmbBytes = 65536;
constexpr auto kTimeout = 2000ms;

// --- processes and pipes -------------------------------------------------------

template <typename T> inline bool put(int fd, const T& value)
{
    return ::write(fd, &value, sizeof value) == sizeof value;
}

template <typename T> inline bool get(int fd, T& value, int timeoutMs = 10000)
{
    pollfd pfd{fd, POLLIN, 0};
    if (::poll(&pfd, 1, timeoutMs) != 1)
        return false;
    return ::read(fd, &value, sizeof value) == sizeof value;
}

struct Hello {
    IsmGid gid;
    DmbToken token = 0;
};

// A forked process running `body(in, out)`; its return value is the exit
// status (0 = passed, else the failing line). Devices are made after the
// fork, each process its own.
class Child
{
public:
    explicit Child(const std::function<int(int in, int out)>& body)
    {
        int down[2], up[2];
        if (::pipe2(down, O_CLOEXEC) != 0 || ::pipe2(up, O_CLOEXEC) != 0)
            std::abort();
        pid_ = ::fork();
        if (pid_ == 0) {
            ::close(down[1]);
            ::close(up[0]);
            ::_exit(body(down[0], up[1]));
        }
        ::close(down[0]);
        ::close(up[1]);
        toChild_.reset(down[1]);
        fromChild_.reset(up[0]);
    }
    ~Child()
    {
        if (pid_ > 0) {
            ::kill(pid_, SIGKILL);
            (void)wait();
        }
    }
    int in() const { return fromChild_.get(); }
    int out() const { return toChild_.get(); }
    pid_t pid() const { return pid_; }
    // The exit status, or -signal.
    int wait()
    {
        int status = 0;
        if (pid_ <= 0 || ::waitpid(pid_, &status, 0) != pid_)
            return -1000;
        pid_ = -1;
        return WIFEXITED(status) ? WEXITSTATUS(status) : -WTERMSIG(status);
    }

private:
    pid_t pid_ = -1;
    UniqueFd toChild_, fromChild_;
};

#define CHILD_CHECK(cond)                                                                          \
    do {                                                                                           \
        if (!(cond))                                                                               \
            return __LINE__ % 250 + 1;                                                             \
    } while (0)

struct Device {
    Executor executor{Executor::Config{1, 4, 1000ms}};
    std::unique_ptr<ShmIsm> ism = std::move(ShmIsm::open(executor)).value();
};

struct Dmb {
    std::shared_ptr<std::byte> memory;
    DmbToken token = 0;
};

inline Dmb makeDmb(ShmIsm& ism)
{
    Dmb d;
    d.memory = ism.allocator().allocate(kDmbBytes);
    d.token = ism.registerDmb(d.memory, kDmbBytes).value().token;
    return d;
}

inline bool readable(int fd, int timeoutMs)
{
    pollfd pfd{fd, POLLIN, 0};
    return ::poll(&pfd, 1, timeoutMs) == 1;
}

// --- a raw client and a raw (hostile) server speaking the wire format ----------

struct RawReply {
    shm::AttachStatus status = shm::AttachStatus::Refused;
    std::size_t fds = 0;
    bool ok = false;
};

inline RawReply rawAttach(const IsmGid& owner, const shm::AttachRequest& request)
{
    RawReply out;
    UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
    sockaddr_un addr{};
    addr.sun_family = AF_UNIX;
    const std::string name = shm::socketName(owner);
    std::memcpy(addr.sun_path, name.data(), name.size());
    const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
    if (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0 ||
        ::send(s.get(), &request, sizeof request, MSG_NOSIGNAL) != sizeof request ||
        !readable(s.get(), 5000))
        return out;
    shm::AttachReply reply;
    iovec iov{&reply, sizeof reply};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))];
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    msg.msg_control = control;
    msg.msg_controllen = sizeof control;
    if (::recvmsg(s.get(), &msg, MSG_CMSG_CLOEXEC) != sizeof reply)
        return out;
    for (cmsghdr* c = CMSG_FIRSTHDR(&msg); c != nullptr; c = CMSG_NXTHDR(&msg, c)) {
        const std::size_t n = (c->cmsg_len - CMSG_LEN(0)) / sizeof(int);
        for (std::size_t i = 0; i < n; ++i) {
            int fd;
            std::memcpy(&fd, CMSG_DATA(c) + i * sizeof(int), sizeof fd);
            ::close(fd);
        }
        out.fds += n;
    }
    out.status = reply.status;
    out.ok = true;
    return out;
}

inline shm::AttachRequest requestFor(DmbToken token, const IsmGid& claimed)
{
    shm::AttachRequest r;
    r.token = token;
    r.gid = claimed.gid;
    r.gidExt = claimed.gidExt;
    return r;
}

// Listens under `gid` and answers one connection with `respond(conn, request)`.
class RawOwner
{
public:
    using Respond = std::function<void(int conn, const shm::AttachRequest&)>;
    RawOwner(const IsmGid& gid, Respond respond)
    {
        if (::pipe2(stop_, O_CLOEXEC) != 0)
            std::abort();
        listener_.reset(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_CLOEXEC, 0));
        sockaddr_un addr{};
        addr.sun_family = AF_UNIX;
        const std::string name = shm::socketName(gid);
        std::memcpy(addr.sun_path, name.data(), name.size());
        const auto len = static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
        bound_ = ::bind(listener_.get(), reinterpret_cast<sockaddr*>(&addr), len) == 0 &&
                 ::listen(listener_.get(), 4) == 0;
        thread_ = std::thread([this, respond = std::move(respond)] {
            if (!readable(listener_.get(), 5000))
                return;
            UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
            shm::AttachRequest request;
            if (conn && ::recv(conn.get(), &request, sizeof request, 0) == sizeof request)
                respond(conn.get(), request);
            // Keep the connection until the test is done with it (a silent owner).
            (void)readable(stop_[0], 5000);
        });
    }
    ~RawOwner()
    {
        (void)!::write(stop_[1], "x", 1);
        thread_.join();
        ::close(stop_[0]);
        ::close(stop_[1]);
    }
    bool bound() const { return bound_; }

private:
    UniqueFd listener_;
    bool bound_ = false;
    int stop_[2] = {-1, -1};
    std::thread thread_;
};

inline void sendReply(int conn, const shm::AttachRequest& request, std::uint64_t size,
                      std::initializer_list<int> fds)
{
    shm::AttachReply reply;
    reply.status = shm::AttachStatus::Granted;
    reply.token = request.token;
    reply.size = size;
    iovec iov{&reply, sizeof reply};
    alignas(cmsghdr) char control[CMSG_SPACE(4 * sizeof(int))] = {};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    if (fds.size() > 0) {
        msg.msg_control = control;
        msg.msg_controllen = CMSG_SPACE(fds.size() * sizeof(int));
        cmsghdr* c = CMSG_FIRSTHDR(&msg);
        c->cmsg_level = SOL_SOCKET;
        c->cmsg_type = SCM_RIGHTS;
        c->cmsg_len = CMSG_LEN(fds.size() * sizeof(int));
        std::memcpy(CMSG_DATA(c), fds.begin(), fds.size() * sizeof(int));
    }
    (void)::sendmsg(conn, &msg, MSG_NOSIGNAL);
}

inline std::size_t countFds()
{
    std::size_t n = 0;
    if (DIR* d = ::opendir("/proc/self/fd")) {
        while (::readdir(d) != nullptr)
            ++n;
        ::closedir(d);
    }
    return n;
}

inline std::size_t countMemfdLinks()
{
    std::size_t n = 0;
    DIR* d = ::opendir("/proc/self/fd");
    if (d == nullptr)
        return 9999;
    while (dirent* e = ::readdir(d)) {
        char target[256];
        const std::string path = std::string("/proc/self/fd/") + e->d_name;
        const ssize_t len = ::readlink(path.c_str(), target, sizeof target - 1);
        if (len > 0 && std::string(target, static_cast<std::size_t>(len)).rfind("/memfd:", 0) == 0)
            ++n;
    }
    ::closedir(d);
    return n;
}

inline std::size_t countMemfdMappings()
{
    std::ifstream maps("/proc/self/maps");
    std::size_t n = 0;
    for (std::string line; std::getline(maps, line);)
        n += line.find("/memfd:") != std::string::npos;
    return n;
}

} // namespace smc::shmtest
