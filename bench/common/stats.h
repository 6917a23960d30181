// SPDX-License-Identifier: MIT
// Summary statistics of benchmark samples: median and percentiles.
#pragma once

#include <vector>

namespace smc::bench
{

// The middle sample, or the mean of the two middle ones; NaN without samples.
double median(std::vector<double> samples);

// The sample at index floor(q * n) of the sorted samples, clamped to the last
// one (nearest rank, no interpolation): q = 1 gives the maximum. 0 without
// samples, so an empty table row still prints.
double percentile(std::vector<double> samples, double q);

} // namespace smc::bench
