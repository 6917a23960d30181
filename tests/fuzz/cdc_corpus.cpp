// SPDX-License-Identifier: MIT
// Writes the CDC fuzzer's seed corpus: a golden SMC-R CDC, and step sequences (format in
// cdc_fuzz.cpp) that fill and drain rings across wraps, with crafted cursors among them.
#include <cstdio>
#include <fstream>
#include <string>
#include <vector>

#include "smc/cdc/cdc_messages.h"

namespace
{

using namespace smc::cdc;
using Bytes = std::vector<std::uint8_t>;

void u16(Bytes& b, std::size_t v)
{
    b.push_back(static_cast<std::uint8_t>(v >> 8));
    b.push_back(static_cast<std::uint8_t>(v));
}

void smcr(Bytes& b, const CdcMessage& m)
{
    b.push_back(0);
    for (const std::byte x : encodeSmcr(m))
        b.push_back(std::to_integer<std::uint8_t>(x));
}

// Rings 1000 (ours) and 100 (the peer's): honest traffic over many wraps.
Bytes honest()
{
    Bytes b{3 | 2 << 3};
    for (int i = 0; i < 40; ++i) {
        b.push_back(4); // the peer writes 300 and consumes 60
        u16(b, 300);
        u16(b, 60);
        b.push_back(2 | 0x80); // we read 250
        u16(b, 250);
        b.push_back(1 | 0x80); // we write up to 80
        u16(b, 80);
        b.push_back(3); // and tell the peer
        u16(b, 10);
    }
    return b;
}

// The same rings, then crafted cursors: out of range, too far, backwards, beyond producer.
Bytes crafted()
{
    Bytes b = honest();
    CdcMessage m;
    m.producer = {0, 1000};
    smcr(b, m);
    m.producer = {7, 0};
    smcr(b, m);
    m.producer = {0, 0};
    m.consumer = {0, 99};
    smcr(b, m);
    m.consumer = {1, 0};
    m.connFlags.peerConnAbort = true;
    smcr(b, m);
    b.push_back(5); // an SMC-D head with a huge count
    for (int i = 0; i < 16; ++i)
        b.push_back(0xff);
    return b;
}

void write(const std::string& path, const Bytes& bytes)
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
    CdcMessage golden;
    golden.seq = 1;
    golden.token = 0x01020304;
    golden.producer = {1, 20};
    golden.consumer = {0, 10};
    golden.connFlags.peerDoneWriting = true;
    Bytes raw;
    for (const std::byte x : encodeSmcr(golden))
        raw.push_back(std::to_integer<std::uint8_t>(x));
    write(dir + "/smcr-golden", raw);
    write(dir + "/honest", honest());
    write(dir + "/crafted", crafted());
    Bytes big{5 | 7 << 3}; // 64 KiB ours, the largest ring the peer's
    for (int i = 0; i < 20; ++i) {
        big.push_back(4);
        u16(big, 0xffff);
        u16(big, 0);
        big.push_back(2 | 0x80);
        u16(big, 0xffff);
        big.push_back(3);
        u16(big, 0);
    }
    write(dir + "/wraps-64k", big);
    return 0;
}
