// SPDX-License-Identifier: MIT
// IsmDevice: the operations SMC-D needs from an ISM device (Linux smcd_ops / dibs_dev_ops).
#pragma once

#include <cstddef>
#include <cstdint>
#include <functional>
#include <memory>
#include <span>

#include "base/mutex.h"
#include "base/result.h"
#include "smc/ism/ism_errors.h"

namespace smc
{

// An ISM device GID: 8 bytes plus the 8-byte extension emulated devices use.
struct IsmGid {
    std::uint64_t gid = 0;
    std::uint64_t gidExt = 0;
    friend bool operator==(const IsmGid&, const IsmGid&) = default;
};

using DmbToken = std::uint64_t;

struct DmbInfo {
    DmbToken token = 0;
    std::uint32_t index = 0; // the DMB's slot on the device (Linux sba_idx)
    std::byte* data = nullptr;
    std::size_t size = 0;
};

class IsmDevice;

// The way back from attachments to their device. The device shares one with
// every attachment it hands out and cuts it first thing in its destructor, so
// an attachment that outlives its device detaches from nothing instead of
// calling into a destroyed object.
class DmbDetacher
{
public:
    explicit DmbDetacher(IsmDevice& device) noexcept : device_(&device) {}

    // Tells the device, if it still exists, that `token` was detached.
    // Blocks while the device is being destroyed (until cut() returns).
    void detach(DmbToken token) noexcept;
    // For the device's destructor: waits for detaches in progress; after it,
    // detach() calls nothing.
    void cut() noexcept;

private:
    Mutex mutex_;
    IsmDevice* device_ SMC_GUARDED_BY(mutex_);
};

// A peer's no-copy view of a DMB (Linux attach_dmb): the same memory, kept
// alive until this object is destroyed (detach) even if its owner
// unregisters the DMB meanwhile, and even if the device is destroyed first:
// the attachment holds a reference to the memory it maps and reaches its
// device only through a DmbDetacher the device cuts when it goes. Move-only;
// one attachment is not to be used by two threads at once.
class DmbAttachment
{
public:
    DmbAttachment() = default;
    DmbAttachment(std::shared_ptr<DmbDetacher> detacher, DmbToken token,
                  std::shared_ptr<std::byte> memory, std::size_t size) noexcept
        : detacher_(std::move(detacher)), token_(token), memory_(std::move(memory)), size_(size)
    {
    }
    DmbAttachment(DmbAttachment&& other) noexcept { *this = std::move(other); }
    DmbAttachment& operator=(DmbAttachment&& other) noexcept;
    ~DmbAttachment() { detach(); }

    // Valid until detach(), whatever happened to the DMB or the device.
    std::byte* data() const noexcept { return memory_.get(); }
    std::size_t size() const noexcept { return size_; }
    DmbToken token() const noexcept { return token_; }
    explicit operator bool() const noexcept { return memory_ != nullptr; }

    // Drops the mapping (and tells the device, if it is still there). Does
    // not block, except for the device's own short lock.
    void detach() noexcept;

private:
    std::shared_ptr<DmbDetacher> detacher_;
    DmbToken token_ = 0;
    std::shared_ptr<std::byte> memory_;
    std::size_t size_ = 0;
};

// Lifetimes: the device must outlive every call on it, every running signal
// handler, and every IsmRegistrar (so every SMC-D pool) that uses it;
// destroying it meanwhile is undefined. A DmbAttachment may outlive it (see
// above). DmbInfo::data points into the caller's own memory.
//
// Signal handlers: the IrqHandler runs on the thread that called moveData()
// or signal(), before that call returns, and under no device lock. It may
// call any function of the device, including unregisterDmb() of the DMB it
// was raised for (which then returns at once; the DMB's slot is freed when
// the signalling call returns), registerDmb(), attachDmb() and moveData()
// or signal() (bounding any recursion is the handler's business). It must
// not destroy the device, and must not throw (the data path is noexcept).
class IsmDevice
{
public:
    // Called on the writer's thread when a DMB is signalled (Linux handle_irq).
    using IrqHandler = std::function<void(std::uint32_t dmbIndex, DmbToken token)>;

    virtual ~IsmDevice() = default;

    virtual IsmGid localGid() const noexcept = 0;
    virtual std::uint16_t chid() const noexcept = 0;
    // Empty when the peer GID is reachable through this device.
    virtual Result<void> queryRemoteGid(const IsmGid& peer) const noexcept = 0;

    // Make `memory` (size bytes, kept alive by the device while registered,
    // attached or written) a DMB; returns its token. Errors: invalid_argument
    // (no memory or size 0), IsmErrc::DmbLimitReached. Takes the device's
    // short lock; never waits for the data path.
    virtual Result<DmbInfo> registerDmb(std::shared_ptr<std::byte> memory, std::size_t size) = 0;
    // The token dies at once: no later moveData, signal or attach finds it.
    // Does not wait for writes (and their handlers) already under way: they
    // finish into memory the device keeps alive (an owner that reuses its
    // memory right away may still see such a late write), and the last of
    // them frees the slot. Attached peers keep the memory until they detach.
    // Errors: IsmErrc::UnknownToken. Safe from a signal handler, its own
    // DMB's too.
    virtual Result<void> unregisterDmb(DmbToken token) = 0;
    virtual bool supportsNoCopy() const noexcept = 0;
    // Errors: IsmErrc::UnknownToken. Takes the device's short lock.
    virtual Result<DmbAttachment> attachDmb(DmbToken token) = 0;
    // What DmbAttachment::detach() reports; callers use the attachment.
    virtual void detachDmb(DmbToken token) noexcept = 0;

    // Write `data` into the DMB at `offset`; with `signal`, raise its
    // interrupt (the handler runs before this returns). Errors:
    // IsmErrc::UnknownToken, IsmErrc::OutOfBounds. Takes no device-wide lock.
    virtual Result<void> moveData(DmbToken token, std::size_t offset,
                                  std::span<const std::byte> data, bool signal) noexcept = 0;
    // moveData() of nothing, with the signal.
    virtual Result<void> signal(DmbToken token) noexcept = 0;
};

} // namespace smc
