// SPDX-License-Identifier: MIT
// DmbAttachment and DmbDetacher: a peer's mapping of a DMB, and its way back to the device.
#include "smc/ism/ism_device.h"

#include <utility>

namespace smc
{

void DmbDetacher::detach(DmbToken token) noexcept
{
    MutexLocker lock(mutex_);
    if (device_ != nullptr)
        device_->detachDmb(token);
}

void DmbDetacher::cut() noexcept
{
    MutexLocker lock(mutex_);
    device_ = nullptr;
}

DmbAttachment& DmbAttachment::operator=(DmbAttachment&& other) noexcept
{
    if (this != &other) {
        detach();
        detacher_ = std::move(other.detacher_);
        token_ = std::exchange(other.token_, 0);
        memory_ = std::move(other.memory_);
        size_ = std::exchange(other.size_, 0);
    }
    return *this;
}

void DmbAttachment::detach() noexcept
{
    if (detacher_ != nullptr)
        detacher_->detach(token_);
    detacher_.reset();
    token_ = 0;
    memory_.reset();
    size_ = 0;
}

} // namespace smc
