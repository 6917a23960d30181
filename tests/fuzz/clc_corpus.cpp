// SPDX-License-Identifier: MIT
// Writes the CLC fuzzer's seed corpus: the hand-built golden messages, and encoded forms the
// goldens lack (v1 SMC-D, SMC-Rv2 offers, SEID, nothing offered, every list full).
#include <cstdio>
#include <fstream>
#include <string>

#include "tests/libtest/clc_golden.h"

namespace
{

using namespace smc::clc;
using namespace smc::testing::golden;

std::vector<Message> extraSeeds()
{
    Proposal v1d = std::get<Proposal>(proposalV1Ipv4().message);
    v1d.typeV1 = SmcType::Both;
    v1d.ismV1 = {0x0102030405060708, 0x0123};

    Proposal none; // v2, offering nothing

    Proposal r2 = std::get<Proposal>(proposalV2Linux().message);
    r2.typeV2 = SmcType::SmcR;
    r2.v2.roceV2Gid = kGid;
    r2.v2.maxConns = 255;
    r2.v2.maxLinks = 2;

    Proposal seid = std::get<Proposal>(proposalV2LoopbackOnly().message);
    seid.v2.userEids.clear();
    seid.v2.seid = true;
    seid.smcdV2.systemEid = *makeEid("IBM-SYSZ-ISMSEID00000000");

    Proposal full = std::get<Proposal>(proposalV2Linux().message);
    full.typeV1 = SmcType::Both;
    full.typeV2 = SmcType::Both;
    full.prefixes.ipv6.assign(kMaxIpv6Prefixes, Ipv6Prefix{{0x20, 0x01, 0x0d, 0xb8}, 32});
    full.v2.userEids.assign(kMaxUeids, kUeid);
    full.smcdV2.entries.assign(kMaxIsmV2Entries, IsmGidChid{kLoGid, kLoopbackChid});

    Accept d1 = std::get<Accept>(acceptSmcdV2().message);
    d1.version = kVersion1;
    Accept r2accept = std::get<Accept>(acceptSmcrV1().message);
    r2accept.version = kVersion2;
    r2accept.firstContact = false;
    return {v1d, none, r2, seid, full, d1, r2accept};
}

void write(const std::string& path, const std::vector<std::byte>& bytes)
{
    std::ofstream(path, std::ios::binary)
        .write(reinterpret_cast<const char*>(bytes.data()), std::streamsize(bytes.size()));
}

} // namespace

int main(int argc, char** argv)
{
    if (argc != 2) {
        std::fprintf(stderr, "usage: %s DIR\n", argv[0]);
        return 2;
    }
    const std::string dir = argv[1];
    for (const smc::testing::Golden& g : smc::testing::clcGoldens())
        write(dir + "/clc-" + g.name, g.bytes);
    write(dir + "/clc-linux-6.12-proposal", smc::testing::linux612Proposal());
    int n = 0;
    for (const Message& m : extraSeeds()) {
        const smc::Result<std::vector<std::byte>> wire = encode(m);
        if (!wire) {
            std::fprintf(stderr, "seed %d: %s\n", n, wire.error().message().c_str());
            return 1;
        }
        write(dir + "/clc-seed-" + std::to_string(n++), *wire);
    }
    return 0;
}
