// SPDX-License-Identifier: MIT
// Args: flag registration, strict value conversion, the error and usage output.
#include "bench/common/args.h"

#include <algorithm>
#include <charconv>
#include <cstdio>
#include <cstdlib>
#include <utility>

#include "bench/common/die.h"

namespace smc::bench
{

namespace
{

// Appended piece by piece: "'" + std::string(text) trips gcc 12's -Wrestrict at -O3.
std::string quoted(std::string_view text)
{
    std::string q(1, '\'');
    q.append(text);
    q.push_back('\'');
    return q;
}

std::string formatReal(double v)
{
    char buf[32];
    std::snprintf(buf, sizeof buf, "%g", v);
    return buf;
}

} // namespace

std::optional<unsigned> parseWhole(std::string_view text)
{
    unsigned v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end || text.empty())
        return std::nullopt;
    return v;
}

std::optional<double> parseReal(std::string_view text)
{
    double v = 0;
    const char* end = text.data() + text.size();
    auto [ptr, ec] = std::from_chars(text.data(), end, v);
    if (ec != std::errc() || ptr != end || text.empty())
        return std::nullopt;
    return v;
}

Args::Args(std::string usage) : usage_(std::move(usage)) {}

Args& Args::text(std::string name, std::string& out)
{
    return custom(std::move(name), [&out](std::string_view v) -> std::optional<std::string> {
        out = v;
        return std::nullopt;
    });
}

Args& Args::choice(std::string name, std::string& out, std::vector<std::string> choices)
{
    return custom(
        std::move(name),
        [&out, choices = std::move(choices)](std::string_view v) -> std::optional<std::string> {
            std::string want; // "a, b or c"
            for (std::size_t i = 0; i < choices.size(); ++i) {
                if (v == choices[i]) {
                    out = choices[i];
                    return std::nullopt;
                }
                want += i == 0 ? "" : i + 1 < choices.size() ? ", " : " or ";
                want += choices[i];
            }
            return "want " + want + ", got " + quoted(v);
        });
}

Args& Args::real(std::string name, double& out, double above, double below)
{
    return custom(std::move(name),
                  [&out, above, below](std::string_view v) -> std::optional<std::string> {
                      const std::optional<double> x = parseReal(v);
                      if (!x || !(*x > above && *x < below))
                          return "want a number above " + formatReal(above) + " and below " +
                                 formatReal(below) + ", got " + quoted(v);
                      out = *x;
                      return std::nullopt;
                  });
}

Args& Args::whole(std::string name, unsigned& out, unsigned min, unsigned max)
{
    return custom(std::move(name),
                  [&out, min, max](std::string_view v) -> std::optional<std::string> {
                      const std::optional<unsigned> x = parseWhole(v);
                      if (!x || *x < min || *x > max)
                          return "want a whole number from " + std::to_string(min) + " to " +
                                 std::to_string(max) + ", got " + quoted(v);
                      out = *x;
                      return std::nullopt;
                  });
}

Args& Args::wholeList(std::string name, std::vector<unsigned>& out, unsigned min, unsigned max)
{
    return custom(
        std::move(name), [&out, min, max](std::string_view v) -> std::optional<std::string> {
            std::vector<unsigned> list;
            for (std::size_t pos = 0; pos <= v.size();) {
                const std::size_t comma = std::min(v.find(',', pos), v.size());
                const std::optional<unsigned> x = parseWhole(v.substr(pos, comma - pos));
                if (!x || *x < min || *x > max)
                    return "want comma-separated whole numbers from " + std::to_string(min) +
                           " to " + std::to_string(max) + ", got " + quoted(v);
                list.push_back(*x);
                pos = comma + 1;
            }
            out = std::move(list); // only a fully valid list replaces the default
            return std::nullopt;
        });
}

Args& Args::custom(std::string name, Setter set)
{
    flags_[std::move(name)] = std::move(set);
    return *this;
}

void Args::parse(int argc, char** argv) const
{
    setProgramName(argv[0]);
    for (int i = 1; i < argc; ++i) {
        const std::string_view arg = argv[i];
        if (arg == "--help" || arg == "-h")
            usage(argv[0], 0);
        auto flag = flags_.find(arg);
        if (flag == flags_.end()) {
            std::fprintf(stderr, "%s: unknown flag %s\n", programName(), quoted(arg).c_str());
            usage(argv[0], 2);
        }
        if (i + 1 >= argc) {
            std::fprintf(stderr, "%s: %s needs a value\n", programName(), argv[i]);
            usage(argv[0], 2);
        }
        if (std::optional<std::string> bad = flag->second(argv[++i])) {
            std::fprintf(stderr, "%s: %s: %s\n", programName(), argv[i - 1], bad->c_str());
            usage(argv[0], 2);
        }
    }
}

void Args::usage(const char* argv0, int status) const
{
    std::fprintf(status ? stderr : stdout, "usage: %s %s", argv0, usage_.c_str());
    std::exit(status);
}

} // namespace smc::bench
