// SPDX-License-Identifier: MIT
// JSON rendering of pool statistics.
#include "pool/stats.h"

#include <sstream>

namespace smc
{
namespace
{

void writeKind(std::ostringstream& out, const char* name, const KindStats& k)
{
    out << '"' << name << "\":{\"allocs\":" << k.allocs << ",\"reuses\":" << k.reuses
        << ",\"downgrades\":" << k.downgrades << ",\"failures\":" << k.failures
        << ",\"releases\":" << k.releases << ",\"freed\":" << k.freed
        << ",\"reclaimed\":" << k.reclaimed << ",\"reclaimed_bytes\":" << k.reclaimedBytes
        << ",\"in_use_bytes\":" << k.inUseBytes << ",\"pooled_bytes\":" << k.pooledBytes
        << ",\"descriptors\":" << k.descriptors << ",\"class_histogram\":{";
    bool first = true;
    for (unsigned c = 0; c < kSizeClasses; ++c) {
        if (k.classHistogram[c] == 0)
            continue;
        out << (first ? "" : ",") << '"' << (classBytes(c) >> 10) << "K\":" << k.classHistogram[c];
        first = false;
    }
    out << "}}";
}

} // namespace

std::string PoolStats::toJson() const
{
    std::ostringstream out;
    out << '{';
    writeKind(out, "rmb", rmb);
    out << ',';
    writeKind(out, "sndbuf", sndbuf);
    out << '}';
    return out.str();
}

} // namespace smc
