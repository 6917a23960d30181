// SPDX-License-Identifier: MIT
// The SMC experimental TCP option (kind 254, magic E2D4C3D9) on every SYN and SYN-ACK of a
// cgroup's TCP sockets: a BPF sock_ops program, assembled here and loaded with bpf(2) (no
// libbpf: the project's dependencies are fixed). Linux's SMC goes SMC only with it.
#include "tests/interop/tcp_option.h"

#include <fcntl.h>
#include <linux/bpf.h>
#include <sys/syscall.h>
#include <unistd.h>

#include <cerrno>
#include <cstddef>
#include <cstdint>
#include <vector>

namespace smc::interop
{
namespace
{

long bpf(int cmd, bpf_attr& attr)
{
    return ::syscall(__NR_bpf, cmd, &attr, sizeof attr);
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
    void storeImm(int size, int dst, int off, int imm)
    {
        emit(BPF_ST | BPF_MEM | size, dst, 0, off, imm);
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

std::vector<bpf_insn> program()
{
    enum { kFlags, kReserve, kWrite, kOut };
    const int op = offsetof(bpf_sock_ops, op);
    const int tcpFlags = offsetof(bpf_sock_ops, skb_tcp_flags);
    Assembler a;
    a.movReg(6, 1); // r6 = ctx
    a.loadWord(2, 6, op);
    a.jumpIf(2, BPF_SOCK_OPS_TCP_LISTEN_CB, kFlags);
    a.jumpIf(2, BPF_SOCK_OPS_TCP_CONNECT_CB, kFlags);
    a.jumpIf(2, BPF_SOCK_OPS_HDR_OPT_LEN_CB, kReserve);
    a.jumpIf(2, BPF_SOCK_OPS_WRITE_HDR_OPT_CB, kWrite);
    a.jump(kOut);

    a.label(kFlags); // the header callbacks for this socket (a listener's: its SYN-ACKs)
    a.movReg(1, 6);
    a.movImm(2, BPF_SOCK_OPS_WRITE_HDR_OPT_CB_FLAG);
    a.call(BPF_FUNC_sock_ops_cb_flags_set);
    a.jump(kOut);

    a.label(kReserve); // 6 bytes on a SYN or SYN-ACK
    a.loadWord(2, 6, tcpFlags);
    a.andImm(2, kSyn);
    a.jumpIf(2, 0, kOut);
    a.movReg(1, 6);
    a.movImm(2, 6);
    a.movImm(3, 0);
    a.call(BPF_FUNC_reserve_hdr_opt);
    a.jump(kOut);

    a.label(kWrite); // kind 254, length 6, E2 D4 C3 D9
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

} // namespace

int attachSmcTcpOption(const char* cgroupDir, std::string& log)
{
    const std::vector<bpf_insn> insns = program();
    static const char license[] = "Dual MIT/GPL";
    std::vector<char> verifierLog(1 << 16);
    bpf_attr load{};
    load.prog_type = BPF_PROG_TYPE_SOCK_OPS;
    load.insns = reinterpret_cast<std::uintptr_t>(insns.data());
    load.insn_cnt = static_cast<__u32>(insns.size());
    load.license = reinterpret_cast<std::uintptr_t>(license);
    load.log_buf = reinterpret_cast<std::uintptr_t>(verifierLog.data());
    load.log_size = static_cast<__u32>(verifierLog.size());
    load.log_level = 1;
    const int prog = static_cast<int>(bpf(BPF_PROG_LOAD, load));
    if (prog < 0) {
        const int e = errno;
        log = verifierLog.data();
        return -e;
    }
    const int cgroup = ::open(cgroupDir, O_RDONLY | O_DIRECTORY | O_CLOEXEC);
    if (cgroup < 0) {
        const int e = errno;
        ::close(prog);
        return -e;
    }
    bpf_attr attach{};
    attach.target_fd = static_cast<__u32>(cgroup);
    attach.attach_bpf_fd = static_cast<__u32>(prog);
    attach.attach_type = BPF_CGROUP_SOCK_OPS;
    attach.attach_flags = BPF_F_ALLOW_MULTI;
    const long rc = bpf(BPF_PROG_ATTACH, attach);
    const int e = errno;
    ::close(cgroup);
    ::close(prog); // the cgroup holds the program now
    return rc < 0 ? -e : 0;
}

} // namespace smc::interop
