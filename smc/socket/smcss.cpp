// SPDX-License-Identifier: MIT
// smcss-style table and JSON of the stack's connections and statistics.
#include "smc/socket/smcss.h"

#include <cstdio>
#include <fstream>
#include <sstream>

namespace smc
{
namespace
{

const char* jsonMode(Transport t)
{
    return t == Transport::SmcD ? "SMCD" : t == Transport::SmcR ? "SMCR" : "TCP";
}

std::string mode(const ConnectionInfo& c)
{
    if (c.transport == Transport::SmcR)
        return "SMCR link " + std::to_string(c.linkId);
    if (c.transport != Transport::Tcp)
        return jsonMode(c.transport);
    if (c.fallback)
        return std::string("TCP ") + clc::toString(*c.fallback);
    return "TCP";
}

void reasons(std::ostringstream& o, const std::map<clc::DeclineCode, std::uint64_t>& m)
{
    o << '{';
    bool first = true;
    for (const auto& [code, count] : m) {
        o << (first ? "" : ", ") << '"' << clc::toString(code) << "\": " << count;
        first = false;
    }
    o << '}';
}

} // namespace

std::string smcssTable(const std::vector<ConnectionInfo>& connections)
{
    std::ostringstream o;
    char line[512];
    std::snprintf(line, sizeof line, "%-14s %-22s %-22s %-16s %8s %8s %12s %12s\n", "State",
                  "Local Address", "Peer Address", "Mode", "RMB", "PeerRMB", "Prod", "Cons");
    o << line;
    for (const ConnectionInfo& c : connections) {
        char prod[32], cons[32];
        std::snprintf(prod, sizeof prod, "%u:%u", c.producerWrap, c.producerCount);
        std::snprintf(cons, sizeof cons, "%u:%u", c.consumerWrap, c.consumerCount);
        std::snprintf(line, sizeof line, "%-14s %-22s %-22s %-16s %8zu %8zu %12s %12s\n",
                      c.state.c_str(), c.local.c_str(), c.peer.c_str(), mode(c).c_str(), c.rmbBytes,
                      c.peerRmbBytes, prod, cons);
        o << line;
    }
    return o.str();
}

std::string smcssJson(const std::vector<ConnectionInfo>& connections, const StackStats& stats)
{
    std::ostringstream o;
    o << "{\"connections\": [";
    for (std::size_t i = 0; i < connections.size(); ++i) {
        const ConnectionInfo& c = connections[i];
        o << (i ? ", " : "") << "{\"state\": \"" << c.state << "\", \"mode\": \""
          << jsonMode(c.transport) << "\", \"fallback\": "
          << (c.fallback ? '"' + std::string(clc::toString(*c.fallback)) + '"' : "null")
          << ", \"role\": \"" << (c.server ? "server" : "client") << "\", \"local\": \"" << c.local
          << "\", \"peer\": \"" << c.peer << "\", \"rmb_bytes\": " << c.rmbBytes
          << ", \"peer_rmb_bytes\": " << c.peerRmbBytes << ", \"sndbuf_bytes\": " << c.sndbufBytes
          << ", \"dmb_token\": " << c.dmbToken << ", \"peer_dmb_token\": " << c.peerDmbToken
          << ", \"pulses\": " << (c.pulses ? "true" : "false") << ", \"token\": " << c.token
          << ", \"peer_token\": " << c.peerToken << ", \"link_id\": " << unsigned{c.linkId}
          << ", \"producer\": [" << c.producerWrap << ", " << c.producerCount
          << "], \"consumer\": [" << c.consumerWrap << ", " << c.consumerCount
          << "], \"bytes_sent\": " << c.bytesSent << ", \"bytes_received\": " << c.bytesReceived
          << '}';
    }
    o << "], \"stats\": {\"smcd_client\": " << stats.smcdClient
      << ", \"smcd_server\": " << stats.smcdServer << ", \"smcr_client\": " << stats.smcrClient
      << ", \"smcr_server\": " << stats.smcrServer << ", \"tcp_forced\": " << stats.tcpForced
      << ", \"handshake_errors\": " << stats.handshakeErrors
      << ", \"ready_pairs_reused\": " << stats.readyPairsReused << ", \"client_fallbacks\": ";
    reasons(o, stats.clientFallbacks);
    o << ", \"server_fallbacks\": ";
    reasons(o, stats.serverFallbacks);
    o << "}}\n";
    return o.str();
}

bool writeSmcssJson(const std::string& path, const std::vector<ConnectionInfo>& connections,
                    const StackStats& stats)
{
    std::ofstream f(path);
    f << smcssJson(connections, stats);
    return static_cast<bool>(f);
}

} // namespace smc
