// SPDX-License-Identifier: MIT
// smc-kernel-setup: the kernel SMC's UEID and pnet table over generic netlink (no smc-tools
// on Debian); its SMC-R link groups and sockets (SMC_DIAG) read back. Interop test scaffolding.
#include <arpa/inet.h>
#include <linux/genetlink.h>
#include <linux/netlink.h>
#include <linux/smc.h>
#include <linux/smc_diag.h>
#include <linux/sock_diag.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cerrno>
#include <charconv>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <string>
#include <string_view>
#include <vector>

#include "smc/net/tcp_option.h"

namespace
{

// A generic netlink request: header, genl header, attributes, each padded to 4 bytes.
class Request
{
public:
    // A generic netlink command of `family`.
    Request(std::uint16_t family, std::uint8_t cmd, std::uint16_t flags)
    {
        genlmsghdr g{};
        g.cmd = cmd;
        g.version = 1;
        start(family, flags, &g, sizeof g);
    }
    // Any netlink request: the header, then `body`.
    template <typename Body>
    static Request raw(std::uint16_t type, std::uint16_t flags, const Body& body)
    {
        Request r;
        r.start(type, flags, &body, sizeof body);
        return r;
    }
    void attr(std::uint16_t type, const void* data, std::size_t len)
    {
        nlattr a{static_cast<std::uint16_t>(NLA_HDRLEN + len), type};
        append(&a, sizeof a);
        append(data, len);
    }
    void attr(std::uint16_t type, std::string_view text) // NUL-terminated
    {
        std::string s(text);
        attr(type, s.c_str(), s.size() + 1);
    }
    std::vector<char>& bytes()
    {
        auto* h = reinterpret_cast<nlmsghdr*>(bytes_.data());
        h->nlmsg_len = static_cast<std::uint32_t>(bytes_.size());
        return bytes_;
    }

private:
    Request() = default;
    void start(std::uint16_t type, std::uint16_t flags, const void* body, std::size_t len)
    {
        nlmsghdr h{};
        h.nlmsg_type = type;
        h.nlmsg_flags = static_cast<std::uint16_t>(NLM_F_REQUEST | flags);
        h.nlmsg_seq = 1;
        append(&h, sizeof h);
        append(body, len);
    }
    void append(const void* data, std::size_t len)
    {
        const char* p = static_cast<const char*>(data);
        bytes_.insert(bytes_.end(), p, p + len);
        bytes_.resize(NLMSG_ALIGN(bytes_.size()));
    }
    std::vector<char> bytes_;
};

struct Netlink {
    explicit Netlink(int protocol) : fd(::socket(AF_NETLINK, SOCK_RAW | SOCK_CLOEXEC, protocol))
    {
        const timeval limit{5, 0}; // a reply that never comes is an error, not a hang
        ::setsockopt(fd, SOL_SOCKET, SO_RCVTIMEO, &limit, sizeof limit);
    }
    int fd;
    ~Netlink()
    {
        if (fd >= 0)
            ::close(fd);
    }
    // Sends `r` and hands each reply message to `onMessage` until the ack or the dump's
    // end. Returns 0 or the negative errno the kernel (or a call) answered.
    template <typename F> int transact(Request& r, F onMessage)
    {
        std::vector<char>& out = r.bytes();
        if (::send(fd, out.data(), out.size(), 0) < 0)
            return -errno;
        std::vector<char> in(1 << 16);
        for (;;) {
            const ssize_t n = ::recv(fd, in.data(), in.size(), 0);
            if (n < 0)
                return -errno;
            // NLMSG_OK and NLMSG_NEXT, without their signed/unsigned comparisons.
            std::size_t at = 0;
            while (static_cast<std::size_t>(n) - at >= sizeof(nlmsghdr)) {
                const auto* h = reinterpret_cast<const nlmsghdr*>(in.data() + at);
                if (h->nlmsg_len < sizeof(nlmsghdr) ||
                    h->nlmsg_len > static_cast<std::size_t>(n) - at)
                    break;
                if (h->nlmsg_type == NLMSG_DONE)
                    return 0;
                if (h->nlmsg_type == NLMSG_ERROR)
                    return static_cast<const nlmsgerr*>(NLMSG_DATA(h))->error;
                onMessage(*h);
                at += NLMSG_ALIGN(h->nlmsg_len);
            }
        }
    }
};

// The attributes of a genl message (or of a nest) by type.
template <typename F> void forEachAttr(const char* data, int len, F f)
{
    for (auto* a = reinterpret_cast<const nlattr*>(data);
         len >= NLA_HDRLEN && a->nla_len >= NLA_HDRLEN && a->nla_len <= len;) {
        f(*a, reinterpret_cast<const char*>(a) + NLA_HDRLEN, a->nla_len - NLA_HDRLEN);
        const int step = NLA_ALIGN(a->nla_len);
        len -= step;
        a = reinterpret_cast<const nlattr*>(reinterpret_cast<const char*>(a) + step);
    }
}

int familyId(Netlink& nl, const char* name)
{
    Request r(GENL_ID_CTRL, CTRL_CMD_GETFAMILY, NLM_F_ACK); // the reply, then the ack
    r.attr(CTRL_ATTR_FAMILY_NAME, name);
    int id = 0;
    const int rc = nl.transact(r, [&](const nlmsghdr& h) {
        const char* p = static_cast<const char*>(NLMSG_DATA(&h)) + GENL_HDRLEN;
        forEachAttr(p, static_cast<int>(h.nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN),
                    [&](const nlattr& a, const char* v, int) {
                        if ((a.nla_type & NLA_TYPE_MASK) == CTRL_ATTR_FAMILY_ID)
                            std::memcpy(&id, v, 2);
                    });
    });
    return rc < 0 ? rc : id;
}

int fail(const char* what, int rc)
{
    std::fprintf(stderr, "smc-kernel-setup: %s: %s\n", what, std::strerror(-rc));
    return 1;
}

int usage()
{
    std::fprintf(stderr, "usage: smc-kernel-setup ueid add EID\n"
                         "       smc-kernel-setup pnet add PNETID eth NETDEV\n"
                         "       smc-kernel-setup pnet add PNETID ib DEVICE PORT\n"
                         "       smc-kernel-setup lgr   (SMC-R link groups and their links)\n"
                         "       smc-kernel-setup diag [cursors]  (AF_SMC sockets)\n"
                         "       smc-kernel-setup stats (SMC-R handshakes done, by role, version)\n"
                         "       smc-kernel-setup tcp-option CGROUP_DIR  (SMC's TCP option on\n"
                         "           the cgroup's SYNs and SYN-ACKs, by a BPF sock_ops program)\n"
                         "Adding what is there already succeeds.\n");
    return 2;
}

// SMC_DIAG: one line per AF_SMC socket, "SMCR|SMCD|FALLBACK state S local > peer", with the
// fallback reason when there is one; with `cursors`, an SMC-R connection's cursors too
// (wrap:count of the producer and consumer cursors it got and sent, and of its send buffer).
int diag(bool cursors)
{
    Netlink nl(NETLINK_SOCK_DIAG);
    if (nl.fd < 0)
        return fail("sock_diag socket", -errno);
    smc_diag_req req{};
    req.diag_family = 43; // AF_SMC
    req.diag_ext = 1 << (SMC_DIAG_FALLBACK - 1);
    if (cursors)
        req.diag_ext |= 1 << (SMC_DIAG_CONNINFO - 1);
    Request r = Request::raw(SOCK_DIAG_BY_FAMILY, NLM_F_DUMP, req);
    int n = 0;
    const int rc = nl.transact(r, [&](const nlmsghdr& h) {
        if (h.nlmsg_len < NLMSG_LENGTH(sizeof(smc_diag_msg)))
            return;
        const auto* m = static_cast<const smc_diag_msg*>(NLMSG_DATA(&h));
        char src[INET_ADDRSTRLEN] = "?", dst[INET_ADDRSTRLEN] = "?";
        ::inet_ntop(AF_INET, m->id.idiag_src, src, sizeof src);
        ::inet_ntop(AF_INET, m->id.idiag_dst, dst, sizeof dst);
        const char* mode = m->diag_mode == SMC_DIAG_MODE_SMCR           ? "SMCR"
                           : m->diag_mode == SMC_DIAG_MODE_SMCD         ? "SMCD"
                           : m->diag_mode == SMC_DIAG_MODE_FALLBACK_TCP ? "FALLBACK"
                                                                        : "?";
        std::printf("smc-diag: %s state %u %s:%u > %s:%u", mode, m->diag_state, src,
                    ntohs(m->id.idiag_sport), dst, ntohs(m->id.idiag_dport));
        const char* attrs = reinterpret_cast<const char*>(m) + NLMSG_ALIGN(sizeof *m);
        forEachAttr(attrs, static_cast<int>(h.nlmsg_len - NLMSG_LENGTH(NLMSG_ALIGN(sizeof *m))),
                    [&](const nlattr& a, const char* v, int len) {
                        smc_diag_fallback f{};
                        if (a.nla_type == SMC_DIAG_FALLBACK && len >= int(sizeof f)) {
                            std::memcpy(&f, v, sizeof f);
                            if (f.reason != 0)
                                std::printf(" reason 0x%08x", f.reason);
                        }
                        smc_diag_conninfo c{};
                        if (a.nla_type == SMC_DIAG_CONNINFO && len >= int(sizeof c)) {
                            std::memcpy(&c, v, sizeof c);
                            const auto at = [](const smc_diag_cursor& x) {
                                return std::to_string(x.wrap) + ":" + std::to_string(x.count);
                            };
                            std::printf(
                                " rx prod %s cons %s tx prod %s cons %s"
                                " flags %02x/%02x sndbuf prep %s sent %s fin %s",
                                at(c.rx_prod).c_str(), at(c.rx_cons).c_str(), at(c.tx_prod).c_str(),
                                at(c.tx_cons).c_str(), c.rx_conn_state_flags, c.tx_conn_state_flags,
                                at(c.tx_prep).c_str(), at(c.tx_sent).c_str(), at(c.tx_fin).c_str());
                        }
                    });
        std::printf("\n");
        ++n;
    });
    if (rc < 0)
        return fail("smc_diag dump (modprobe smc_diag)", rc);
    std::printf("%d AF_SMC sockets\n", n);
    return 0;
}

} // namespace

int main(int argc, char** argv)
{
    const std::vector<std::string_view> a(argv + 1, argv + argc);
    if ((a.size() == 1 || (a.size() == 2 && a[1] == "cursors")) && a[0] == "diag")
        return diag(a.size() == 2);
    if (a.size() == 2 && a[0] == "tcp-option") {
        std::string log;
        const smc::Result<void> r = smc::net::attachSmcTcpOptionToCgroup(argv[2], log);
        if (!log.empty())
            std::fprintf(stderr, "%s\n", log.c_str());
        return r ? 0 : fail("tcp-option", -r.error().value());
    }
    Netlink nl(NETLINK_GENERIC);
    if (nl.fd < 0)
        return fail("netlink socket", -errno);
    const bool pnet = !a.empty() && a[0] == "pnet";
    const int family = familyId(nl, pnet ? SMCR_GENL_FAMILY_NAME : SMC_GENL_FAMILY_NAME);
    if (family < 0)
        return fail("the SMC netlink family (modprobe smc)", family);

    if (a.size() == 3 && a[0] == "ueid" && a[1] == "add") {
        // The kernel takes exactly 32 blank-padded bytes and a NUL.
        char eid[33];
        std::snprintf(eid, sizeof eid, "%-32.32s", std::string(a[2]).c_str());
        Request r(static_cast<std::uint16_t>(family), SMC_NETLINK_ADD_UEID, NLM_F_ACK);
        r.attr(SMC_NLA_EID_TABLE_ENTRY, eid, sizeof eid);
        const int rc = nl.transact(r, [](const nlmsghdr&) {});
        return rc < 0 && rc != -EEXIST ? fail("ueid add", rc) : 0;
    }
    if ((a.size() == 5 && a[3] == "eth") || (a.size() == 6 && a[3] == "ib")) {
        if (!pnet || a[1] != "add")
            return usage();
        Request r(static_cast<std::uint16_t>(family), SMC_PNETID_ADD, NLM_F_ACK);
        r.attr(SMC_PNETID_NAME, a[2]);
        if (a[3] == "eth") {
            r.attr(SMC_PNETID_ETHNAME, a[4]);
        } else {
            r.attr(SMC_PNETID_IBNAME, a[4]);
            std::uint8_t port = 0;
            const auto [end, ec] = std::from_chars(a[5].data(), a[5].data() + a[5].size(), port);
            if (ec != std::errc() || end != a[5].data() + a[5].size())
                return usage();
            r.attr(SMC_PNETID_IBPORT, &port, 1);
        }
        const int rc = nl.transact(r, [](const nlmsghdr&) {});
        return rc < 0 && rc != -EEXIST ? fail("pnet add", rc) : 0;
    }
    if (a.size() == 1 && a[0] == "lgr") {
        // The link dump sends each group, then each of its usable links.
        Request r(static_cast<std::uint16_t>(family), SMC_NETLINK_GET_LINK_SMCR, NLM_F_DUMP);
        int groups = 0;
        std::uint32_t group = 0;
        const int rc = nl.transact(r, [&](const nlmsghdr& h) {
            const char* p = static_cast<const char*>(NLMSG_DATA(&h)) + GENL_HDRLEN;
            forEachAttr(p, static_cast<int>(h.nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN),
                        [&](const nlattr& top, const char* v, int len) {
                            const int type = top.nla_type & NLA_TYPE_MASK;
                            if (type == SMC_GEN_LGR_SMCR) {
                                std::uint32_t conns = 0;
                                forEachAttr(v, len, [&](const nlattr& x, const char* xv, int) {
                                    const int t = x.nla_type & NLA_TYPE_MASK;
                                    if (t == SMC_NLA_LGR_R_ID)
                                        std::memcpy(&group, xv, 4);
                                    else if (t == SMC_NLA_LGR_R_CONNS_NUM)
                                        std::memcpy(&conns, xv, 4);
                                });
                                std::printf("lgr %08x conns %u\n", group, conns);
                                ++groups;
                            } else if (type == SMC_GEN_LINK_SMCR) {
                                std::uint8_t id = 0;
                                std::string dev, gid, peer;
                                forEachAttr(v, len, [&](const nlattr& x, const char* xv, int xl) {
                                    const int t = x.nla_type & NLA_TYPE_MASK;
                                    const std::string text(xv, strnlen(xv, xl));
                                    if (t == SMC_NLA_LINK_ID)
                                        id = static_cast<std::uint8_t>(*xv);
                                    else if (t == SMC_NLA_LINK_IB_DEV)
                                        dev = text;
                                    else if (t == SMC_NLA_LINK_GID)
                                        gid = text;
                                    else if (t == SMC_NLA_LINK_PEER_GID)
                                        peer = text;
                                });
                                std::printf("link %08x %u %s %s > %s\n", group, id, dev.c_str(),
                                            gid.c_str(), peer.c_str());
                            }
                        });
        });
        if (rc < 0)
            return fail("lgr dump", rc);
        std::printf("%d SMC-R link groups\n", groups);
        return 0;
    }
    if (a.size() == 1 && a[0] == "stats") {
        // The successful SMC-R handshakes by role and version, since the module loaded.
        Request r(static_cast<std::uint16_t>(family), SMC_NETLINK_GET_STATS, NLM_F_DUMP);
        std::uint64_t succ[4] = {}; // client v1, client v2, server v1, server v2
        const int rc = nl.transact(r, [&](const nlmsghdr& h) {
            const char* p = static_cast<const char*>(NLMSG_DATA(&h)) + GENL_HDRLEN;
            forEachAttr(p, static_cast<int>(h.nlmsg_len - NLMSG_HDRLEN - GENL_HDRLEN),
                        [&](const nlattr& top, const char* v, int len) {
                            if ((top.nla_type & NLA_TYPE_MASK) != SMC_GEN_STATS)
                                return;
                            forEachAttr(v, len, [&](const nlattr& tech, const char* tv, int tl) {
                                if ((tech.nla_type & NLA_TYPE_MASK) != SMC_NLA_STATS_SMCR_TECH)
                                    return;
                                forEachAttr(tv, tl, [&](const nlattr& x, const char* xv, int xl) {
                                    const int t = x.nla_type & NLA_TYPE_MASK;
                                    if (t >= SMC_NLA_STATS_T_CLNT_V1_SUCC &&
                                        t <= SMC_NLA_STATS_T_SRV_V2_SUCC && xl >= 8)
                                        std::memcpy(&succ[t - SMC_NLA_STATS_T_CLNT_V1_SUCC], xv, 8);
                                });
                            });
                        });
        });
        if (rc < 0)
            return fail("stats dump", rc);
        std::printf(
            "smcr client v1 %llu v2 %llu server v1 %llu v2 %llu\n",
            static_cast<unsigned long long>(succ[0]), static_cast<unsigned long long>(succ[1]),
            static_cast<unsigned long long>(succ[2]), static_cast<unsigned long long>(succ[3]));
        return 0;
    }
    return usage();
}
