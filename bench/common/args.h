// SPDX-License-Identifier: MIT
// Args: the benchmarks' flag parser ("--name VALUE" flags, --help), strict about values.
#pragma once

#include <functional>
#include <map>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace smc::bench
{

// Each flag takes one value and writes it into a variable the program owns;
// the default is whatever the variable holds before parse(). A later flag of
// the same name wins. A bad value or an unknown flag prints what was wrong,
// then the usage, and exits 2; --help or -h prints the usage and exits 0.
//
// Example:
//     double seconds = 0.3;
//     Args args("[--seconds S]\n");
//     args.real("--seconds", seconds, 0, 3600);
//     args.parse(argc, argv);
class Args
{
public:
    // Printed after "usage: <argv[0]> "; may span several lines.
    explicit Args(std::string usage);

    // Any text.
    Args& text(std::string name, std::string& out);
    // One of `choices`.
    Args& choice(std::string name, std::string& out, std::vector<std::string> choices);
    // A number strictly between `above` and `below`.
    Args& real(std::string name, double& out, double above, double below);
    // A whole number from `min` to `max`.
    Args& whole(std::string name, unsigned& out, unsigned min, unsigned max);
    // Comma-separated whole numbers from `min` to `max`, at least one.
    Args& wholeList(std::string name, std::vector<unsigned>& out, unsigned min, unsigned max);
    // Anything else: `set` stores the value, or returns what is wrong with it.
    Args& custom(std::string name, std::function<std::optional<std::string>(std::string_view)> set);

    // Also names the program for die() and fail() (bench/common/die.h).
    void parse(int argc, char** argv) const;

private:
    using Setter = std::function<std::optional<std::string>(std::string_view)>;

    [[noreturn]] void usage(const char* argv0, int status) const;

    std::string usage_;
    std::map<std::string, Setter, std::less<>> flags_;
};

// Strict conversions (the whole text, no sign for unsigned), for custom flags.
std::optional<unsigned> parseWhole(std::string_view text);
std::optional<double> parseReal(std::string_view text);

} // namespace smc::bench
