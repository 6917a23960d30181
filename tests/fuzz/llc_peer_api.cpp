// SPDX-License-Identifier: MIT
// LlcPeer: the group's API driven from the input, one call at a time on the API lane.
#include <string_view>

#include "smc/core/conn_errors.h"
#include "smc/llc/link_errors.h"
#include "tests/fuzz/llc_peer.h"

namespace smc::fuzz
{

namespace
{
// Written against both shapes of the connection API: a Connection* or a
// shared_ptr<Connection> handle, complete() with or without the peer RMB's size.
template <typename H> auto closeVia(LinkGroup& g, H& conn)
{
    if constexpr (requires { g.closeConnection(*conn); })
        return g.closeConnection(*conn);
    else
        return g.closeConnection(conn);
}

template <typename H>
auto writeVia(LinkGroup& g, const H& conn, std::size_t offset, std::span<const std::byte> data)
{
    if constexpr (requires { g.write(*conn, offset, data); })
        return g.write(*conn, offset, data);
    else
        return g.write(conn, offset, data);
}

template <typename Hs> auto completeVia(Hs& hs, RtokenTable::Rtoken peerRmb, std::size_t bytes)
{
    if constexpr (requires { hs.complete(peerRmb, bytes); })
        return hs.complete(peerRmb, bytes);
    else
        return hs.complete(peerRmb);
}

template <typename R> std::error_code errorOf(const R& r)
{
    return r ? std::error_code() : r.error();
}

bool isAny(std::error_code ec, std::initializer_list<std::error_code> codes)
{
    for (const std::error_code& c : codes)
        if (ec == c)
            return true;
    return false;
}

// The errors link_group.h (and link_errors.h for the flows) promises per call.
bool documented(const char* call, std::error_code ec)
{
    using std::errc;
    const std::string_view c(call);
    const auto e = [](auto code) { return std::error_code(make_error_code(code)); };
    // A flow that waits for the peer: the generic codes (link_errors.h).
    const bool flowGeneric =
        isAny(ec, {e(errc::timed_out), e(errc::not_connected), e(errc::connection_refused),
                   e(errc::protocol_error), e(errc::operation_in_progress)});
    const bool opening = ec.category() == poolCategory() ||
                         isAny(ec, {e(errc::no_buffer_space), e(errc::not_connected)});
    if (!ec)
        return true;
    if (c == "openConnection")
        return opening;
    if (c == "beginHandshake")
        return opening || ec == errc::timed_out;
    if (c == "complete")
        return isAny(ec, {e(ConnErrc::HandshakeDone), e(errc::invalid_argument),
                          e(errc::no_buffer_space)}) ||
               flowGeneric;
    if (c == "closeConnection")
        return isAny(ec, {e(ConnErrc::UnknownConnection), e(ConnErrc::Closed),
                          e(errc::not_connected), e(errc::timed_out)});
    if (c == "write") // the in-process channel's: no writer, link down, bad rkey or range
        return isAny(ec,
                     {e(ConnErrc::UnknownConnection), e(ConnErrc::Closed), e(ConnErrc::SndbufRange),
                      e(ConnErrc::PeerRmbUnknown), e(ConnErrc::PeerRmbRange),
                      e(ConnErrc::PeerRmbGone), e(errc::not_connected),
                      e(errc::operation_not_supported), e(errc::permission_denied)});
    if (c == "addLink") // the provider's: no_such_device
        return isAny(ec, {e(LinkErrc::WrongRole), e(LinkErrc::NoSuchLink), e(LinkErrc::NoLinkRoom),
                          e(errc::no_such_device)}) ||
               flowGeneric;
    if (c == "requestAddLink")
        return isAny(ec, {e(LinkErrc::WrongRole), e(LinkErrc::NoLinkRoom)}) || flowGeneric;
    if (c == "deleteLink")
        return isAny(ec, {e(LinkErrc::InvalidSlot), e(LinkErrc::NoSuchLink)}) || flowGeneric;
    if (c == "breakLink")
        return ec == LinkErrc::NoSuchLink;
    return true;
}
} // namespace

// A connection completed with peer RMB i writes into RMB i or nowhere, and
// keeps it until the peer deletes it: unless the peer sent rkeys that may
// name another RMB's row, or gave RMB i to two handshakes (a failed one then
// takes the row with it, as Linux's peer would never make it).
void LlcPeer::checkWriteTarget(const Connection* conn, std::error_code ec)
{
    unsigned rmb, uses;
    {
        MutexLocker lock(apiMutex_);
        const auto it = peerRmbOf_.find(conn);
        if (it == peerRmbOf_.end() || peerLied_)
            return;
        rmb = it->second;
        uses = rmbUses_[rmb];
    }
    const int landed = PeerRmbs::lastLanded;
    if (!ec && landed >= 0 && static_cast<unsigned>(landed) != rmb)
        fail("a write for peer RMB " + std::to_string(rmb) + " landed in peer RMB " +
             std::to_string(landed));
    if (ec == ConnErrc::PeerRmbGone && !(deletedRmbs_ & (1u << rmb)) && uses == 1)
        fail("write says peer RMB " + std::to_string(rmb) + " is gone; the peer never deleted it");
}

// Buffer sizes: the classes, and the edges (0, 1, one past a class, too big).
std::size_t LlcPeer::bufferBytes(std::uint8_t code)
{
    constexpr std::size_t kTooBig = std::size_t{1} << 30;
    static constexpr std::size_t kSizes[16] = {16384,   16384, 32768, 65536,  1,     16385,
                                               131072,  16384, 0,     262144, 16384, 1 << 20,
                                               kTooBig, 32768, 16384, 65536};
    return kSizes[code & 15];
}

// 0: any link; bit 7: the id in the low bits; else one of the group's links.
std::optional<std::uint8_t> LlcPeer::apiLinkId(std::uint8_t arg)
{
    if (arg == 0)
        return std::nullopt;
    if (arg & 0x80)
        return static_cast<std::uint8_t>(arg & 0x7f);
    const std::vector<LinkInfo> links = group_->links();
    if (links.empty())
        return std::nullopt;
    return links[(arg - 1u) % links.size()].linkId;
}

// `contract`: the call was made as its header allows (not on a closed
// connection), so its error must be one the header names.
void LlcPeer::traceResult(const char* what, std::error_code ec, bool contract)
{
    trace("api %s: %s", what, ec ? ec.message().c_str() : "ok");
    if (contract && !documented(what, ec))
        fail(std::string(what) + " returned an error its header does not name: " +
             ec.category().name() + ":" + std::to_string(ec.value()) + " " + ec.message());
}

void LlcPeer::post(unsigned lane, const char* what, std::function<void()> call)
{
    trace("api %s posted (lane %u)", what, lane);
    if (!lane_.post(lane, std::move(call)))
        trace("api %s dropped: the lane is full", what);
}

// The lists below are the API threads' (two lanes): each call takes what it
// needs under apiMutex_ and calls the group without it.
void LlcPeer::apiStep(Op op, std::uint8_t opcode)
{
    // A handle used after close: legal once handles are shared pointers
    // (the call must then fail cleanly), a dangling pointer before. Calls on
    // a second lane run beside the first (closes beside writes): only with
    // handles that outlive close.
    const bool useAfterClose = !(options_.avoid & kAvoidUseAfterClose);
    constexpr bool kHandlesOutliveClose = !std::is_pointer_v<ConnHandle>;
    const unsigned lane = kHandlesOutliveClose && (opcode & kHold) ? 1 : 0;
    switch (op) {
    case Op::Open:
    case Op::BeginHandshake: {
        const std::uint8_t sizes = in_.u8(), linkArg = in_.u8();
        const bool handshake = op == Op::BeginHandshake;
        post(lane, handshake ? "beginHandshake" : "openConnection",
             [this, sizes, linkArg, handshake] {
                 const std::size_t rmb = bufferBytes(sizes), snd = bufferBytes(sizes >> 4);
                 const std::optional<std::uint8_t> id = apiLinkId(linkArg);
                 if (handshake) {
                     auto r = group_->beginHandshake(rmb, snd, id);
                     traceResult("beginHandshake", errorOf(r));
                     MutexLocker lock(apiMutex_);
                     if (r)
                         handshakes_.push_back(std::move(*r));
                 } else {
                     auto r = group_->openConnection(rmb, snd, id);
                     traceResult("openConnection", errorOf(r));
                     MutexLocker lock(apiMutex_);
                     if (r)
                         conns_.push_back(*r);
                 }
             });
        break;
    }
    case Op::Complete: {
        const std::uint8_t which = in_.u8(), rmbArg = in_.u8();
        const std::uint32_t rkey = rmbArg & 0x80 ? in_.u32() : 0;
        const std::uint8_t offset = rmbArg & 0x80 ? in_.u8() : 0;
        post(lane, "complete", [this, which, rmbArg, rkey, offset] {
            std::optional<LinkGroup::Handshake> hs;
            {
                MutexLocker lock(apiMutex_);
                if (handshakes_.empty())
                    return;
                const auto at = handshakes_.begin() + which % handshakes_.size();
                hs.emplace(std::move(*at));
                handshakes_.erase(at);
            }
            auto conn = hs->connection();
            const unsigned rmb = rmbArg % kPeerRmbs;
            // What CLC would carry: the peer RMB's rtoken on the connection's link.
            RtokenTable::Rtoken token{PeerRmbs::rkey(rmb, group_->linkId(conn->link())),
                                      rmbs_.vaddr(rmb)};
            if (rmbArg & 0x80)
                token = {rkey, rmbs_.vaddr(rmb) + offset};
            // ... and the other way: our RMB on the connection's link.
            const RtokenTable::Rtoken ours = hs->rtoken();
            const std::uint8_t ourLink = group_->linkId(conn->link());
            auto r = completeVia(*hs, token, kPeerRmbBytes);
            traceResult("complete", errorOf(r));
            if (r) {
                MutexLocker lock(learntMutex_);
                learnt_[ourLink].insert(ours.rkey);
            }
            MutexLocker lock(apiMutex_);
            if (!(rmbArg & 0x80))
                ++rmbUses_[rmb];
            if (r) {
                conns_.push_back(conn);
                completed_.insert(&*conn);
                if (!(rmbArg & 0x80)) {
                    shared_ |= 1u << rmb;
                    peerRmbOf_[&*conn] = rmb;
                }
            } else {
                closed_.push_back(conn); // complete() closed it
            }
        });
        break;
    }
    case Op::Abandon: {
        const std::uint8_t which = in_.u8();
        post(lane, "abandon", [this, which] {
            std::optional<LinkGroup::Handshake> hs;
            {
                MutexLocker lock(apiMutex_);
                if (handshakes_.empty())
                    return;
                const auto at = handshakes_.begin() + which % handshakes_.size();
                closed_.push_back(at->connection());
                hs.emplace(std::move(*at));
                handshakes_.erase(at);
            }
            hs.reset(); // abandons it: its connection closes
        });
        break;
    }
    case Op::Close: {
        const std::uint8_t which = in_.u8();
        post(lane, "closeConnection", [this, which, useAfterClose] {
            ConnHandle conn{};
            bool contract = kHandlesOutliveClose;
            {
                MutexLocker lock(apiMutex_);
                if ((which & 0x40) && useAfterClose && !handshakes_.empty()) {
                    conn = handshakes_[which % handshakes_.size()].connection(); // still pending
                } else if ((which & 0x80) && useAfterClose && !closed_.empty()) {
                    conn = closed_[which % closed_.size()]; // closed already
                } else if (!conns_.empty()) {
                    contract = true;
                    const auto at = conns_.begin() + (which & 0x3f) % conns_.size();
                    conn = *at;
                    conns_.erase(at);
                } else {
                    return;
                }
            }
            traceResult("closeConnection", errorOf(closeVia(*group_, conn)), contract);
            MutexLocker lock(apiMutex_);
            peerRmbOf_.erase(&*conn);
            completed_.erase(&*conn); // its address may come back as another connection's
            closed_.push_back(conn);
            if (closed_.size() > 8)
                closed_.erase(closed_.begin());
        });
        break;
    }
    case Op::Write: {
        const std::uint8_t which = in_.u8(), offset = in_.u8(), length = in_.u8();
        post(lane, "write", [this, which, offset, length, useAfterClose] {
            ConnHandle conn{};
            bool closed;
            {
                MutexLocker lock(apiMutex_);
                closed = (which & 0x80) && useAfterClose && !closed_.empty();
                if (closed)
                    conn = closed_[which % closed_.size()];
                else if (!conns_.empty())
                    conn = conns_[which % conns_.size()];
                else
                    return;
            }
            const std::vector<std::byte> data(length + 1u, std::byte{which});
            PeerRmbs::lastLanded = -1;
            auto r = writeVia(*group_, conn, offset * 256u, data);
            traceResult("write", errorOf(r), kHandlesOutliveClose || !closed);
            checkWriteTarget(&*conn, errorOf(r));
        });
        break;
    }
    case Op::AddLinkApi:
        post(lane, "addLink", [this] { traceResult("addLink", errorOf(group_->addLink())); });
        break;
    case Op::RequestAddLink:
        post(lane, "requestAddLink",
             [this] { traceResult("requestAddLink", errorOf(group_->requestAddLink())); });
        break;
    case Op::DeleteLinkApi: {
        const unsigned slot = in_.u8() % (kMaxLinks + 1);
        post(lane, "deleteLink",
             [this, slot] { traceResult("deleteLink", errorOf(group_->deleteLink(slot))); });
        break;
    }
    case Op::BreakLink: {
        const unsigned slot = in_.u8() % (kMaxLinks + 1);
        post(lane, "breakLink",
             [this, slot] { traceResult("breakLink", errorOf(group_->breakLink(slot))); });
        break;
    }
    case Op::Terminate: {
        const bool orderly = in_.u8() & 0x01;
        post(lane, "terminate", [this, orderly] {
            group_->terminate("fuzz", llc::DeleteReason::ProgramTerminated, orderly);
            traceResult("terminate", {});
        });
        break;
    }
    default:
        break;
    }
}

} // namespace smc::fuzz
