// The qflow subcommand table: each subcommand is a name, a summary and an entry point.
#pragma once

#include <span>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "qflow/plugin/command_line.h"

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

// Shared by the subcommands (and plugin commands): qflow/plugin/command_line.h.
using qflow::parse_command_line;
using qflow::ParsedCommandLine;
using qflow::print_command_help;

}  // namespace qflow::cli
