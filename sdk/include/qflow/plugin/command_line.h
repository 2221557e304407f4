// The qflow CLI's command-line conventions, for built-in subcommands and plugin commands alike
// (qflow/plugin/command.h): Boost.ProgramOptions without abbreviated options, errors worded
// "<command>: <what> (see 'qflow <command> --help')", and the usage page. Header-only, so only
// a command that includes it needs Boost.ProgramOptions.
#pragma once

#include <iostream>
#include <string>
#include <string_view>
#include <vector>

#include <boost/program_options.hpp>

#include "qflow/core/status.h"

namespace qflow {

// Returns `help` when --help was given (the caller then prints usage and stops).
struct ParsedCommandLine {
  boost::program_options::variables_map values;
  bool help = false;
};

inline Expected<ParsedCommandLine> parse_command_line(
    std::string_view command, const std::vector<std::string>& args,
    const boost::program_options::options_description& options,
    const boost::program_options::positional_options_description& positional) {
  namespace po = boost::program_options;
  ParsedCommandLine parsed;
  try {
    po::store(po::command_line_parser(args)
                  .options(options)
                  .positional(positional)
                  .style(po::command_line_style::default_style & ~po::command_line_style::allow_guessing)
                  .run(),
              parsed.values);
    if (parsed.values.count("help")) {
      parsed.help = true;
      return parsed;
    }
    po::notify(parsed.values);
  } catch (const po::error& e) {
    return invalid_input(std::string(command) + ": " + e.what() + " (see 'qflow " + std::string(command) +
                         " --help')");
  }
  return parsed;
}

// Prints "usage: qflow <usage>", the description and the options to stdout.
inline void print_command_help(std::string_view usage, std::string_view description,
                               const boost::program_options::options_description& options) {
  std::cout << "usage: qflow " << usage << "\n\n" << description << "\n\n" << options;
}

}  // namespace qflow
