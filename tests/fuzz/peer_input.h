// SPDX-License-Identifier: MIT
// The LLC peer fuzzer's input: a header, steps read from the front, answer policies from the back.
#pragma once

#include <cstddef>
#include <cstdint>
#include <span>
#include <vector>

namespace smc::fuzz
{

// Input layout (every read past the end gives 0, so any byte string is an input):
//   header   cfg, peer max links, peer max conns, first link id (the peer serves)
//   steps    from the front: (modifiers | Op) then the op's arguments, at most kMaxSteps
//   answers  from the back, one byte per request of the group the peer answers, in the
//            order they arrive (Answer in the low 3 bits; Mutate takes two more bytes)
// Policies come from the back so that a mutated step does not reshuffle them.
inline constexpr unsigned kMaxSteps = 64;

// Header byte 0.
inline constexpr std::uint8_t kCfgClientGroup = 0x01;    // the group is the client: the peer serves
inline constexpr std::uint8_t kCfgOneLink = 0x02;        // the group wants one link (maxLinks 1)
inline constexpr std::uint8_t kCfgTestLink = 0x04;       // the group's TEST_LINK timer runs
inline constexpr std::uint8_t kCfgMuteTestLink = 0x08;   // the peer never answers a TEST_LINK
inline constexpr std::uint8_t kCfgGroupOneDevice = 0x10; // the group's side has one device
inline constexpr std::uint8_t kCfgPeerOneDevice = 0x20;  // the peer's side has one device
inline constexpr std::uint8_t kCfgShortIdle = 0x40;      // an idle group is freed after 60 ms
inline constexpr std::uint8_t kCfgNoFirstConfirm = 0x80; // the serving peer never confirms link 1

// Step opcode byte: modifiers in the high bits. On an API call, kHold
// means the second API thread (the call runs beside those on the first).
inline constexpr std::uint8_t kHold = 0x80;   // this step's messages go out after the next step's
inline constexpr std::uint8_t kRepeat = 0x40; // each message of this step goes out twice
inline constexpr std::uint8_t kOpMask = 0x3f;

// A "link" argument picks one of the peer's links in creation order: among the
// live ones, or (bit 7 set) among all of them, dead ones included.
inline constexpr std::uint8_t kAnyLink = 0x80;

// Arguments after the opcode, in order; "flags" bits as named per op.
enum class Op : std::uint8_t {
    Nop,
    // Peer to group, well-formed (fields fuzzed):
    TestLink,        // link, flags (0x01 response, 0x02 v2)
    ConfirmRkey,     // link, rmb, flags (0x01 negative, 0x02 retry, 0x04 response, 0x08 v2,
                     // 0x30 others: 0-2 of the other live links, 3 all; 0x40 fuzzed rkey: u32
                     // follows; 0x80 fuzzed link ids: one byte per other follows)
    DeleteRkey,      // link, flags (0x01 v2, 0x02 response, 0x04 negative, 0x08 unknown rkeys),
                     // count (v1: 1 + count % 8, v2: count), first rmb
    DeleteLink,      // link, flags (0x01 all, 0x02 orderly, 0x04 response, 0x08 fuzzed id), id
                     // (fuzzed) or target link, reason (index)
    AddLink,         // link, flags (0x01 reject, 0x02 response, 0x04 same device, 0x08 no such
                     // qpn, 0x10 mtu 0, 0x20 v2 with rkeys, 0xc0 id: fresh, in use, 0, fuzzed:
                     // one more byte)
    AddLinkCont,     // link, flags (0x01 response, 0x06 rkeys 0-2, 0x08 fuzzed id: one more
                     // byte), remaining
    ConfirmLink,     // link, flags (0x01 response, 0x02 fuzzed id: one more byte), links, conns
    ReqAddLink,      // link, flags (0x01 response, 0x06 gids 0-3)
    ConfirmRkeyCont, // link, flags (0x01 response)
    // Peer to group, anything:
    Raw,    // link, length, that many bytes
    Mutate, // link, message kind, position, xor: a proper message with one byte changed
    Flood,  // link, count, message kind: a burst of that many copies of a proper message
    // Faults and time:
    LinkFault, // link: the peer's end goes down (both ends see it)
    Wait,      // ms (% 64): let timers and timeouts run
    // The group's API (on one API thread, in order):
    Open,           // sizes, link (0: any; bit 7: fuzzed id in the low bits; else an id in use)
    BeginHandshake, // sizes, link (as Open)
    Complete,       // handshake, rmb (bit 7: fuzzed rtoken: u32 rkey, vaddr offset follow)
    Abandon,        // handshake
    Close,          // connection (bit 7: a closed one; bit 6: a pending handshake's)
    Write,          // connection (bit 7: a closed one), offset (x 256), length - 1
    AddLinkApi,     //
    RequestAddLink, //
    DeleteLinkApi,  // slot
    BreakLink,      // slot
    Terminate,      // flags (0x01 orderly)
    Count
};

// The proper messages Mutate and Flood start from (the kind byte, modulo).
enum class Kind : std::uint8_t {
    TestLink,
    ConfirmRkey,
    DeleteRkey,
    DeleteLink,
    AddLink,
    AddLinkCont,
    ConfirmLink,
    ReqAddLink,
    ConfirmRkeyCont,
    Count
};

// What the peer does with one request of the group (a policy byte, low 3 bits).
enum class Answer : std::uint8_t {
    Proper,
    Drop,      // never answers: the group's wait times out
    Duplicate, // answers twice
    Mutate,    // one byte changed: position and xor from the next two policy bytes
    WrongLink, // answers on another link
    Late,      // answers after the next step
    Negative,  // declines: reject, negative, unknown link
    Proper2,   // as Proper (a bias towards the happy path)
};

// Bytes of a fuzz input, read from both ends.
class InputReader
{
public:
    explicit InputReader(std::span<const std::uint8_t> data) : data_(data), back_(data.size()) {}

    bool empty() const noexcept { return front_ >= back_; }
    std::uint8_t u8() noexcept { return front_ < back_ ? data_[front_++] : 0; }
    std::uint32_t u32() noexcept
    {
        std::uint32_t v = 0;
        for (int i = 0; i < 4; ++i)
            v = v << 8 | u8();
        return v;
    }
    std::vector<std::uint8_t> bytes(std::size_t n)
    {
        std::vector<std::uint8_t> out;
        while (n-- > 0 && !empty())
            out.push_back(u8());
        return out;
    }
    // A policy byte, from the back.
    std::uint8_t tail() noexcept { return front_ < back_ ? data_[--back_] : 0; }

private:
    std::span<const std::uint8_t> data_;
    std::size_t front_ = 0, back_;
};

// Builds inputs (the seed corpus): steps in order, then the answers.
class InputWriter
{
public:
    InputWriter(std::uint8_t cfg, std::uint8_t peerLinks = 2, std::uint8_t peerConns = 255,
                std::uint8_t firstLinkId = 1)
        : steps_{cfg, peerLinks, peerConns, firstLinkId}
    {
    }
    InputWriter& step(Op op, std::vector<std::uint8_t> args = {}, std::uint8_t modifiers = 0)
    {
        steps_.push_back(static_cast<std::uint8_t>(modifiers | static_cast<std::uint8_t>(op)));
        steps_.insert(steps_.end(), args.begin(), args.end());
        return *this;
    }
    // The group's next requests get these answers (the rest: Proper).
    InputWriter& answers(std::vector<Answer> a)
    {
        for (Answer x : a)
            answers_.push_back(static_cast<std::uint8_t>(x));
        return *this;
    }
    // Steps, padding (read as Nop steps and Proper answers), answers reversed.
    std::vector<std::uint8_t> build(std::size_t padding = 16) const
    {
        std::vector<std::uint8_t> out = steps_;
        out.insert(out.end(), padding, 0);
        out.insert(out.end(), answers_.rbegin(), answers_.rend());
        return out;
    }

private:
    std::vector<std::uint8_t> steps_;
    std::vector<std::uint8_t> answers_;
};

} // namespace smc::fuzz
