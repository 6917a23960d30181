// SPDX-License-Identifier: MIT
// median() and percentile() of benchmark samples.
#include "bench/common/stats.h"

#include <algorithm>
#include <cmath>
#include <cstddef>

namespace smc::bench
{

double median(std::vector<double> samples)
{
    const std::size_t n = samples.size();
    if (n == 0)
        return NAN;
    std::sort(samples.begin(), samples.end());
    return n % 2 ? samples[n / 2] : (samples[n / 2 - 1] + samples[n / 2]) / 2;
}

double percentile(std::vector<double> samples, double q)
{
    if (samples.empty())
        return 0;
    std::sort(samples.begin(), samples.end());
    const auto rank = static_cast<std::size_t>(q * static_cast<double>(samples.size()));
    return samples[std::min(samples.size() - 1, rank)];
}

} // namespace smc::bench
