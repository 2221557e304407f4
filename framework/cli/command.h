// The qflow subcommand table: each subcommand is a name, a summary and an entry point.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "qflow/core/status.h"

namespace qflow::cli {

// `args` are the words after the subcommand name. A command prints its own output and
// returns a Status; main turns failures into the one-line error and the exit code.
using CommandFunction = Status (*)(const std::vector<std::string>& args);

struct Command {
  std::string_view name;
  std::string_view summary;
  CommandFunction run;
};

// All subcommands, in the order `qflow --help` lists them.
std::span<const Command> commands();

Status run_inspect(const std::vector<std::string>& args);
Status run_infer(const std::vector<std::string>& args);
Status run_convert(const std::vector<std::string>& args);
Status run_check(const std::vector<std::string>& args);
Status run_perf(const std::vector<std::string>& args);
Status run_plugins(const std::vector<std::string>& args);
Status run_run(const std::vector<std::string>& args);
Status run_verify(const std::vector<std::string>& args);
Status run_compare(const std::vector<std::string>& args);
Status run_sensitivity(const std::vector<std::string>& args);
Status run_report(const std::vector<std::string>& args);
Status run_bench(const std::vector<std::string>& args);

// Shared by the subcommands: parses `args` against the options and positionals, turning
// Boost's exceptions into an InvalidInput status that names the subcommand. Returns
// true in `help` when --help was given (the caller then prints usage and stops).
struct ParsedCommandLine {
  boost::program_options::variables_map values;
  bool help = false;
};
Expected<ParsedCommandLine> parse_command_line(std::string_view command, const std::vector<std::string>& args,
                                               const boost::program_options::options_description& options,
                                               const boost::program_options::positional_options_description& positional);
// Prints "usage: qflow <usage>", the description and the options to stdout.
void print_command_help(std::string_view usage, std::string_view description,
                        const boost::program_options::options_description& options);

}  // namespace qflow::cli
