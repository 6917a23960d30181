// SPDX-License-Identifier: MIT
// SMC's TCP option by BPF sock_ops: the program assembled here and loaded with bpf(2) (no
// libbpf or clang: the project's dependencies are fixed), its socket map and cgroup link.
#include "smc/net/tcp_option.h"
#include "base/sys_error.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/socket.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <fstream>
#include <sstream>
#include <vector>

namespace smc::net
{
namespace
{

Result<UniqueFd> bpf(int cmd, bpf_attr& attr) noexcept
{
    const long fd = ::syscall(__NR_bpf, cmd, &attr, sizeof attr);
    if (fd < 0)
        return lastError();
    return UniqueFd(static_cast<int>(fd));
}

// A few eBPF instructions, and forward jumps by label.
class Assembler
{
public:
    void movReg(int dst, int src) { emit(BPF_ALU64 | BPF_MOV | BPF_X, dst, src, 0, 0); }
    void movImm(int dst, int imm) { emit(BPF_ALU64 | BPF_MOV | BPF_K, dst, 0, 0, imm); }
    void addImm(int dst, int imm) { emit(BPF_ALU64 | BPF_ADD | BPF_K, dst, 0, 0, imm); }
    void andImm(int dst, int imm) { emit(BPF_ALU64 | BPF_AND | BPF_K, dst, 0, 0, imm); }
    void loadWord(int dst, int src, int off) { emit(BPF_LDX | BPF_MEM | BPF_W, dst, src, off, 0); }
    void storeDouble(int dst, int off, int src)
    {
        emit(BPF_STX | BPF_MEM | BPF_DW, dst, src, off, 0);
    }
    void storeImm(int size, int dst, int off, int imm)
    {
        emit(BPF_ST | BPF_MEM | size, dst, 0, off, imm);
    }
    void loadMap(int dst, int mapFd) // two instructions: a 64-bit immediate
    {
        emit(BPF_LD | BPF_DW | BPF_IMM, dst, BPF_PSEUDO_MAP_FD, 0, mapFd);
        emit(0, 0, 0, 0, 0);
    }
    void call(int helper) { emit(BPF_JMP | BPF_CALL, 0, 0, 0, helper); }
    void exit() { emit(BPF_JMP | BPF_EXIT, 0, 0, 0, 0); }
    // if dst == imm goto label
    void jumpIf(int dst, int imm, int label)
    {
        fixups_.push_back({insns_.size(), label});
        emit(BPF_JMP | BPF_JEQ | BPF_K, dst, 0, 0, imm);
    }
    void jump(int label)
    {
        fixups_.push_back({insns_.size(), label});
        emit(BPF_JMP | BPF_JA, 0, 0, 0, 0);
    }
    void label(int id)
    {
        if (labels_.size() <= static_cast<std::size_t>(id))
            labels_.resize(id + 1);
        labels_[id] = insns_.size();
    }
    std::vector<bpf_insn> done()
    {
        for (const auto& [at, id] : fixups_)
            insns_[at].off = static_cast<__s16>(labels_[id] - at - 1);
        return insns_;
    }

private:
    void emit(int code, int dst, int src, int off, int imm)
    {
        bpf_insn i{};
        i.code = static_cast<__u8>(code);
        i.dst_reg = static_cast<__u8>(dst) & 0xf;
        i.src_reg = static_cast<__u8>(src) & 0xf;
        i.off = static_cast<__s16>(off);
        i.imm = imm;
        insns_.push_back(i);
    }
    struct Fixup {
        std::size_t at;
        int label;
    };
    std::vector<bpf_insn> insns_;
    std::vector<Fixup> fixups_;
    std::vector<std::size_t> labels_;
};

constexpr int kSyn = 0x02;

// On connect and listen: the header-option callbacks for the socket (a listener's cover its
// SYN-ACKs), if `mapFd` < 0 or the socket's cookie is in the map. Then 6 bytes reserved and
// written on each SYN or SYN-ACK: kind 254, length 6, E2 D4 C3 D9. Every branch returns 1.
std::vector<bpf_insn> program(int mapFd)
{
    enum { kMark, kFlags, kReserve, kWrite, kOut };
    const int op = offsetof(bpf_sock_ops, op);
    const int tcpFlags = offsetof(bpf_sock_ops, skb_tcp_flags);
    Assembler a;
    a.movReg(6, 1); // r6 = ctx
    a.loadWord(2, 6, op);
    a.jumpIf(2, BPF_SOCK_OPS_TCP_LISTEN_CB, kMark);
    a.jumpIf(2, BPF_SOCK_OPS_TCP_CONNECT_CB, kMark);
    a.jumpIf(2, BPF_SOCK_OPS_HDR_OPT_LEN_CB, kReserve);
    a.jumpIf(2, BPF_SOCK_OPS_WRITE_HDR_OPT_CB, kWrite);
    a.jump(kOut);

    a.label(kMark);
    if (mapFd >= 0) {
        a.movReg(1, 6);
        a.call(BPF_FUNC_get_socket_cookie);
        a.storeDouble(10, -16, 0);
        a.loadMap(1, mapFd);
        a.movReg(2, 10);
        a.addImm(2, -16);
        a.call(BPF_FUNC_map_lookup_elem);
        a.jumpIf(0, 0, kOut);
    }
    a.label(kFlags);
    a.movReg(1, 6);
    a.movImm(2, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
    a.call(BPF_FUNC_sock_ops_cb_flags_set);
    a.jump(kOut);

    a.label(kReserve);
    a.loadWord(2, 6, tcpFlags);
    a.andImm(2, kSyn);
    a.jumpIf(2, 0, kOut);
    a.movReg(1, 6);
    a.movImm(2, 6);
    a.movImm(3, 0);
    a.call(BPF_FUNC_reserve_hdr_opt);
    a.jump(kOut);

    a.label(kWrite); // -EEXIST: a kernel SMC socket of the cgroup wrote it already
    a.loadWord(2, 6, tcpFlags);
    a.andImm(2, kSyn);
    a.jumpIf(2, 0, kOut);
    a.storeImm(BPF_W, 10, -8, static_cast<int>(0xD4E206FEu));
    a.storeImm(BPF_H, 10, -4, 0xD9C3);
    a.movReg(1, 6);
    a.movReg(2, 10);
    a.addImm(2, -8);
    a.movImm(3, 6);
    a.movImm(4, 0);
    a.call(BPF_FUNC_store_hdr_opt);

    a.label(kOut);
    a.movImm(0, 1);
    a.exit();
    return a.done();
}

Result<UniqueFd> load(int mapFd, std::string* log)
{
    const std::vector<bpf_insn> insns = program(mapFd);
    static const char license[] = "Dual MIT/GPL";
    std::vector<char> verifierLog(log != nullptr ? 1 << 16 : 0);
    bpf_attr attr{};
    attr.prog_type = BPF_PROG_TYPE_SOCK_OPS;
    attr.insns = reinterpret_cast<std::uintptr_t>(insns.data());
    attr.insn_cnt = static_cast<__u32>(insns.size());
    attr.license = reinterpret_cast<std::uintptr_t>(license);
    if (log != nullptr) {
        attr.log_buf = reinterpret_cast<std::uintptr_t>(verifierLog.data());
        attr.log_size = static_cast<__u32>(verifierLog.size());
        attr.log_level = 1;
    }
    Result<UniqueFd> prog = bpf(BPF_PROG_LOAD, attr);
    if (!prog && log != nullptr)
        *log = verifierLog.data();
    if (!prog && prog.error() == std::errc::permission_denied) // EACCES: the verifier's no
        return std::make_error_code(std::errc::invalid_argument);
    return prog;
}

// Where this process's cgroup v2 directory is: the cgroup2 mount (/proc/self/mountinfo)
// joined with the "0::" path of /proc/self/cgroup.
Result<std::string> ownCgroupDir()
{
    std::string mount, path, line;
    std::ifstream info("/proc/self/mountinfo");
    while (mount.empty() && std::getline(info, line)) {
        // ... mount point (5th field) ... " - " fstype ...
        const std::size_t dash = line.find(" - ");
        if (dash == std::string::npos || line.compare(dash + 3, 8, "cgroup2 ") != 0)
            continue;
        std::istringstream fields(line);
        std::string field;
        for (int i = 0; i < 5 && fields >> field; ++i) {
        }
        mount = field;
    }
    std::ifstream cgroups("/proc/self/cgroup");
    while (path.empty() && std::getline(cgroups, line))
        if (line.rfind("0::", 0) == 0)
            path = line.substr(3);
    if (mount.empty() || path.empty())
        return std::make_error_code(std::errc::not_supported);
    return mount + (path == "/" ? "" : path);
}

Result<std::uint64_t> cookieOf(int fd) noexcept
{
    std::uint64_t cookie = 0;
    socklen_t len = sizeof cookie;
    if (::getsockopt(fd, SOL_SOCKET, SO_COOKIE, &cookie, &len) != 0)
        return lastError();
    return cookie;
}

} // namespace

Result<std::unique_ptr<SmcTcpOption>> SmcTcpOption::attach()
{
    bpf_attr m{};
    m.map_type = BPF_MAP_TYPE_HASH;
    m.key_size = sizeof(std::uint64_t);
    m.value_size = 1;
    m.max_entries = kMaxMarked;
    Result<UniqueFd> map = bpf(BPF_MAP_CREATE, m);
    if (!map)
        return map.error();
    Result<UniqueFd> prog = load(map->get(), nullptr);
    if (!prog)
        return prog.error();
    Result<std::string> dir = ownCgroupDir();
    if (!dir)
        return dir.error();
    UniqueFd cgroup(::open(dir->c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup)
        return lastError();
    bpf_attr l{};
    l.link_create.prog_fd = static_cast<__u32>(prog->get());
    l.link_create.target_fd = static_cast<__u32>(cgroup.get());
    l.link_create.attach_type = BPF_CGROUP_SOCK_OPS;
    Result<UniqueFd> link = bpf(BPF_LINK_CREATE, l);
    if (!link)
        return link.error();
    return std::unique_ptr<SmcTcpOption>(new SmcTcpOption(std::move(*map), std::move(*link)));
}

SmcTcpOption::~SmcTcpOption() = default; // closing the link detaches the program

Result<void> SmcTcpOption::mark(int fd) const noexcept
{
    Result<std::uint64_t> cookie = cookieOf(fd);
    if (!cookie)
        return cookie.error();
    const std::uint8_t yes = 1;
    bpf_attr attr{};
    attr.map_fd = static_cast<__u32>(map_.get());
    attr.key = reinterpret_cast<std::uintptr_t>(&*cookie);
    attr.value = reinterpret_cast<std::uintptr_t>(&yes);
    attr.flags = BPF_ANY;
    if (::syscall(__NR_bpf, BPF_MAP_UPDATE_ELEM, &attr, sizeof attr) != 0)
        return errnoCode(errno == E2BIG ? ENOSPC : errno);
    return {};
}

void SmcTcpOption::unmark(int fd) const noexcept
{
    Result<std::uint64_t> cookie = cookieOf(fd);
    if (!cookie)
        return;
    bpf_attr attr{};
    attr.map_fd = static_cast<__u32>(map_.get());
    attr.key = reinterpret_cast<std::uintptr_t>(&*cookie);
    (void)::syscall(__NR_bpf, BPF_MAP_DELETE_ELEM, &attr, sizeof attr);
}

Result<void> attachSmcTcpOptionToCgroup(const std::string& cgroupDir, std::string& log)
{
    Result<UniqueFd> prog = load(-1, &log);
    if (!prog)
        return prog.error();
    UniqueFd cgroup(::open(cgroupDir.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC));
    if (!cgroup)
        return lastError();
    bpf_attr attr{};
    attr.target_fd = static_cast<__u32>(cgroup.get());
    attr.attach_bpf_fd = static_cast<__u32>(prog->get());
    attr.attach_type = BPF_CGROUP_SOCK_OPS;
    attr.attach_flags = BPF_F_ALLOW_MULTI;
    if (::syscall(__NR_bpf, BPF_PROG_ATTACH, &attr, sizeof attr) != 0)
        return lastError();
    return {}; // the cgroup holds the program now
}

} // namespace smc::net
