// SPDX-License-Identifier: MIT
// ShmIsm across processes: identity, the owner's attach server, attachRemote, RemoteDmb.
#include "smc/ism/shm_ism.h"

#include <algorithm>
#include <array>
#include <cerrno>
#include <cstdio>
#include <cstring>
#include <string>
#include <thread>

#include <fcntl.h>
#include <poll.h>
#include <sys/mman.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <sys/un.h>
#include <unistd.h>

#include "base/sys_error.h"
#include "smc/ism/fd_passing.h"
#include "smc/ism/shm_wire.h"

namespace smc
{

namespace
{

std::uint64_t fnv1a(const char* data, std::size_t n) noexcept
{
    std::uint64_t h = 0xcbf29ce484222325ull;
    for (std::size_t i = 0; i < n; ++i)
        h = (h ^ static_cast<unsigned char>(data[i])) * 0x100000001b3ull;
    return h;
}

// sockaddr_un for an abstract name; returns the address length.
socklen_t abstractAddress(const IsmGid& gid, sockaddr_un& addr) noexcept
{
    const std::string name = shm::socketName(gid);
    std::memset(&addr, 0, sizeof addr);
    addr.sun_family = AF_UNIX;
    std::memcpy(addr.sun_path, name.data(), name.size()); // < 108 bytes: 15 + 2 * 16 + 1
    return static_cast<socklen_t>(offsetof(sockaddr_un, sun_path) + name.size());
}

bool peerCredentials(int fd, ucred& cred) noexcept
{
    socklen_t len = sizeof cred;
    return ::getsockopt(fd, SOL_SOCKET, SO_PEERCRED, &cred, &len) == 0 && len == sizeof cred;
}

} // namespace

std::string shm::socketName(const IsmGid& gid)
{
    char name[64];
    const int n = std::snprintf(name, sizeof name, "%csmc-core/ism/%016llx/%016llx", '\0',
                                static_cast<unsigned long long>(gid.gid),
                                static_cast<unsigned long long>(gid.gidExt));
    return std::string(name, static_cast<std::size_t>(n));
}

std::uint64_t ShmIsm::hostGid() noexcept
{
    // The boot id is the same for every process of the host (every
    // container too: they are then told apart by socket reachability).
    char buffer[128];
    std::size_t n = 0;
    if (FILE* f = std::fopen("/proc/sys/kernel/random/boot_id", "re")) {
        n = std::fread(buffer, 1, sizeof buffer, f);
        std::fclose(f);
    }
    if (n == 0 && ::gethostname(buffer, sizeof buffer) == 0)
        n = ::strnlen(buffer, sizeof buffer);
    const std::uint64_t h = fnv1a(buffer, n);
    return h == 0 ? 1 : h;
}

Result<std::unique_ptr<ShmIsm>> ShmIsm::open(Executor& executor)
{
    std::random_device random;
    for (int attempt = 0;; ++attempt) {
        std::uint32_t ext;
        do {
            ext = static_cast<std::uint32_t>(random());
        } while (ext == 0);
        const IsmGid gid{hostGid(),
                         (std::uint64_t(static_cast<std::uint32_t>(::getpid())) << 32) | ext};
        UniqueFd listener(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
        if (!listener)
            return lastError();
        sockaddr_un addr;
        const socklen_t len = abstractAddress(gid, addr);
        if (::bind(listener.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
            if (errno == EADDRINUSE && attempt < 8)
                continue; // another device of this process drew the same random32
            return lastError();
        }
        if (::listen(listener.get(), kListenBacklog) != 0)
            return lastError();
        rlimit files{};
        const std::size_t fdShare = ::getrlimit(RLIMIT_NOFILE, &files) == 0
                                        ? static_cast<std::size_t>(files.rlim_cur / 8)
                                        : 0;
        std::unique_ptr<ShmIsm> device(
            new ShmIsm(executor, gid, std::move(listener), std::min(kKeptRemotes, fdShare)));
        {
            MutexLocker lock(device->serverMutex_);
            device->spareFd_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
        }
        ShmIsm* self = device.get();
        device->listenWatch_ =
            executor.watch(device->listener_.get(), [self] { self->onListenerReadable(); });
        if (device->listenWatch_ < 0)
            return lastError();
        return device;
    }
}

void ShmIsm::onListenerReadable()
{
    for (;;) {
        UniqueFd conn(::accept4(listener_.get(), nullptr, nullptr, SOCK_NONBLOCK | SOCK_CLOEXEC));
        if (!conn) {
            if (errno == EINTR || errno == ECONNABORTED)
                continue;
            if (errno == EMFILE || errno == ENFILE) {
                // Level-triggered: an unaccepted connection would wake us
                // forever. Give up the spare fd to take it, and drop it.
                MutexLocker lock(serverMutex_);
                spareFd_.reset();
                UniqueFd dropped(::accept4(listener_.get(), nullptr, nullptr, SOCK_CLOEXEC));
                spareFd_.reset(::open("/dev/null", O_RDONLY | O_CLOEXEC));
                refused_.fetch_add(1, std::memory_order_relaxed);
                if (dropped)
                    continue;
            }
            return; // EAGAIN: all taken
        }
        // Most requesters send right after connect: answer at once if so.
        if (serve(conn.get()))
            continue;
        std::vector<Pending> evicted;
        MutexLocker lock(serverMutex_);
        const std::uint64_t id = nextPending_++;
        Pending p;
        const int fd = conn.get();
        p.fd = std::move(conn);
        p.watch = executor_.watch(fd, [this, id] { onConnectionReadable(id); });
        if (p.watch < 0)
            continue; // p closes the connection
        pending_.emplace(id, std::move(p));
        // A requester that connects and stays silent holds a slot only
        // until kMaxPending newer ones came.
        while (pending_.size() > kMaxPending) {
            evicted.push_back(std::move(pending_.begin()->second));
            pending_.erase(pending_.begin());
            refused_.fetch_add(1, std::memory_order_relaxed);
        }
        lock.unlock();
        // Their callbacks run on this thread, so none is running: no wait.
        for (Pending& e : evicted)
            executor_.unwatch(e.watch);
    }
}

void ShmIsm::onConnectionReadable(std::uint64_t id)
{
    Executor& executor = executor_;
    Pending done;
    {
        MutexLocker lock(serverMutex_);
        auto it = pending_.find(id);
        if (it == pending_.end())
            return; // evicted or the device is going
        if (!serve(it->second.fd.get()))
            return; // spurious wake-up
        done = std::move(it->second);
        pending_.erase(it);
    }
    // Nothing of the device is touched from here on: its destructor no longer
    // knows this watch and may be running. Unwatching oneself does not wait.
    executor.unwatch(done.watch);
}

// Answers the request waiting on `fd`; false if none is there yet.
bool ShmIsm::serve(int fd)
{
    std::array<std::byte, sizeof(shm::AttachRequest) + 1> buffer;
    const ssize_t n = ::recv(fd, buffer.data(), buffer.size(), MSG_DONTWAIT);
    if (n < 0 && (errno == EAGAIN || errno == EINTR))
        return false;
    if (n <= 0)
        return true; // the requester went away without asking: nothing to answer
    shm::AttachRequest request;
    shm::AttachReply reply;
    UniqueFd memfd, button;
    ucred cred{};
    const bool wellFormed = n == sizeof request &&
                            (std::memcpy(&request, buffer.data(), sizeof request), true) &&
                            request.magic == shm::kMagic && request.version == shm::kVersion;
    // Another user gets nothing; the requester must be the process its GID
    // names (pid in the high half; 0 = not in our pid namespace).
    if (wellFormed && peerCredentials(fd, cred) && cred.uid == ::geteuid() && cred.pid > 0 &&
        static_cast<std::uint64_t>(cred.pid) == request.gidExt >> 32) {
        reply.token = request.token;
        MutexLocker lock(mutex_);
        Dmb* dmb = find(request.token);
        if (dmb != nullptr && dmb->grant == IsmGid{request.gid, request.gidExt}) {
            dmb->grant.reset(); // single use, whatever happens to the reply
            Result<UniqueFd> copy = allocator_.dupMemfd(dmb->memory.get(), dmb->size);
            UniqueFd bell(::fcntl(dmb->bell.button.get(), F_DUPFD_CLOEXEC, 0));
            if (copy && bell) {
                dmb->exposedTo = IsmGid{request.gid, request.gidExt};
                memfd = std::move(*copy);
                button = std::move(bell);
                reply.status = shm::AttachStatus::Granted;
                reply.size = dmb->size;
            }
        }
    }
    if (reply.status != shm::AttachStatus::Granted)
        reply.token = wellFormed ? request.token : 0;

    iovec iov{&reply, sizeof reply};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) std::array<char, CMSG_SPACE(2 * sizeof(int))> control{};
    if (reply.status == shm::AttachStatus::Granted) {
        const int fds[2] = {memfd.get(), button.get()};
        fdpass::attach(msg, control, fds);
    }
    // Counted before the reply leaves, so that a requester that has its
    // answer sees it counted; a reply that cannot be sent moves to refused.
    // A fresh connection's buffer holds one reply: this does not block.
    std::atomic<std::uint64_t>& counter =
        reply.status == shm::AttachStatus::Granted ? served_ : refused_;
    counter.fetch_add(1, std::memory_order_relaxed);
    if (::sendmsg(fd, &msg, MSG_DONTWAIT | MSG_NOSIGNAL) != sizeof reply &&
        reply.status == shm::AttachStatus::Granted) {
        served_.fetch_sub(1, std::memory_order_relaxed);
        refused_.fetch_add(1, std::memory_order_relaxed);
    }
    return true;
}

Result<RemoteDmb> ShmIsm::attachRemote(const IsmGid& owner, DmbToken token,
                                       std::chrono::milliseconds timeout)
{
    if (owner.gid != gid_.gid || owner.gidExt == 0)
        return IsmErrc::PeerUnreachable;
    if (RemoteDmb kept = takeKeptRemote(owner, token))
        return kept;
    const Clock::time_point deadline = Clock::now() + timeout;
    auto remainingMs = [&] {
        const auto left =
            std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
        return left.count() > 0 ? static_cast<int>(std::min<long long>(left.count(), 1 << 30)) : 0;
    };

    UniqueFd s(::socket(AF_UNIX, SOCK_SEQPACKET | SOCK_NONBLOCK | SOCK_CLOEXEC, 0));
    if (!s)
        return lastError();
    sockaddr_un addr;
    const socklen_t len = abstractAddress(owner, addr);
    while (::connect(s.get(), reinterpret_cast<sockaddr*>(&addr), len) != 0) {
        if (errno == ECONNREFUSED || errno == ENOENT)
            return IsmErrc::PeerUnreachable;
        if (errno != EAGAIN && errno != EINTR)
            return lastError();
        if (remainingMs() == 0) // the owner's backlog is full: retry until the deadline
            return std::make_error_code(std::errc::timed_out);
        std::this_thread::sleep_for(std::chrono::milliseconds(1));
    }
    // Anybody can bind an abstract name, e.g. after the owner died: the
    // listener must be the owner's process, of our user.
    ucred cred{};
    if (!peerCredentials(s.get(), cred) || cred.uid != ::geteuid() || cred.pid <= 0 ||
        static_cast<std::uint64_t>(cred.pid) != owner.gidExt >> 32)
        return IsmErrc::OwnerMismatch;

    shm::AttachRequest request;
    request.token = token;
    request.gid = gid_.gid;
    request.gidExt = gid_.gidExt;
    if (::send(s.get(), &request, sizeof request, MSG_NOSIGNAL) != sizeof request)
        return lastError();

    pollfd pfd{s.get(), POLLIN, 0};
    for (;;) {
        const int ready = ::poll(&pfd, 1, remainingMs());
        if (ready > 0)
            break;
        if (ready == 0)
            return std::make_error_code(std::errc::timed_out);
        if (errno != EINTR)
            return lastError();
    }
    shm::AttachReply reply;
    iovec iov{&reply, sizeof reply};
    msghdr msg{};
    msg.msg_iov = &iov;
    msg.msg_iovlen = 1;
    alignas(cmsghdr) std::array<char, CMSG_SPACE(4 * sizeof(int))> control{};
    msg.msg_control = control.data();
    msg.msg_controllen = control.size();
    const ssize_t n = ::recvmsg(s.get(), &msg, MSG_DONTWAIT | MSG_CMSG_CLOEXEC);
    if (n < 0 && errno != ECONNRESET)
        return lastError();
    // Whatever arrives is closed on every error path.
    std::vector<UniqueFd> fds;
    fdpass::forEach(msg, [&fds](UniqueFd fd) { fds.push_back(std::move(fd)); });
    if (n != sizeof reply || (msg.msg_flags & (MSG_TRUNC | MSG_CTRUNC)) != 0 ||
        reply.magic != shm::kMagic || reply.version != shm::kVersion || reply.token != token)
        return IsmErrc::BadReply;
    if (reply.status == shm::AttachStatus::Refused)
        return IsmErrc::AttachRefused;
    if (reply.status != shm::AttachStatus::Granted || fds.size() != 2 || reply.size == 0)
        return IsmErrc::BadReply;

    // The memfd: sealed so that nobody can shrink it under our mapping (a
    // SIGBUS on our data path), of the announced size.
    UniqueFd& memfd = fds[0];
    struct stat st {
    };
    const int seals = ::fcntl(memfd.get(), F_GET_SEALS);
    if (seals < 0 || (seals & (F_SEAL_SHRINK | F_SEAL_GROW)) != (F_SEAL_SHRINK | F_SEAL_GROW) ||
        ::fstat(memfd.get(), &st) != 0 || !S_ISREG(st.st_mode) ||
        static_cast<std::uint64_t>(st.st_size) != reply.size)
        return IsmErrc::BadSharedMemory;
    // The doorbell: rung with MSG_DONTWAIT, whatever flags the owner sets on it.
    UniqueFd& button = fds[1];
    if (!doorbell::isButton(button.get()))
        return IsmErrc::BadDoorbell;
    const auto size = static_cast<std::size_t>(reply.size);
    void* p = ::mmap(nullptr, size, PROT_READ | PROT_WRITE, MAP_SHARED, memfd.get(), 0);
    if (p == MAP_FAILED)
        return lastError();
    // The mapping keeps the memory; the memfd closes here.
    return RemoteDmb(static_cast<std::byte*>(p), size, token, std::move(button), remoteDmbs_);
}

RemoteDmb ShmIsm::takeKeptRemote(const IsmGid& owner, DmbToken token)
{
    RemoteDmb kept = remotes_.take(owner, token);
    if (kept)
        attachesKept_.fetch_add(1, std::memory_order_relaxed);
    return kept;
}

RemoteDmb& RemoteDmb::operator=(RemoteDmb&& other) noexcept
{
    if (this != &other) {
        reset();
        data_ = std::exchange(other.data_, nullptr);
        size_ = std::exchange(other.size_, 0);
        token_ = std::exchange(other.token_, 0);
        button_ = std::move(other.button_);
        direct_ = std::move(other.direct_);
        looked_ = std::exchange(other.looked_, false);
        live_ = std::move(other.live_);
    }
    return *this;
}

void RemoteDmb::signal() noexcept
{
    if (button_)
        doorbell::ring(button_.get());
}

bool RemoteDmb::canPulse() noexcept
{
    if (!looked_ && button_) { // the owner offered before it turned the pulse word on
        looked_ = true;
        direct_ = doorbell::takeOffer(button_.get());
    }
    return static_cast<bool>(direct_);
}

bool RemoteDmb::pulse() noexcept
{
    const char one = 1;
    if (direct_ && ::send(direct_.get(), &one, 1, MSG_DONTWAIT | MSG_NOSIGNAL) == 1)
        return true;
    direct_.reset();
    return false;
}

void RemoteDmb::forgetOffer() noexcept
{
    direct_.reset();
    looked_ = false;
}

void RemoteDmb::reset() noexcept
{
    if (data_ != nullptr)
        ::munmap(data_, size_);
    data_ = nullptr;
    size_ = 0;
    token_ = 0;
    button_.reset();
    forgetOffer();
    if (live_)
        live_->fetch_sub(1, std::memory_order_relaxed);
    live_.reset();
}

} // namespace smc
