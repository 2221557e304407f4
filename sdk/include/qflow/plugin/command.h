// Command: a subcommand of the qflow CLI contributed by a plugin. `qflow NAME ARGS...` runs the
// command component named NAME when no built-in subcommand has that name; its summary is its
// line in `qflow --help` (docs/writing-a-plugin.md).
#pragma once

#include <string>
#include <vector>

#include "qflow/core/status.h"

namespace qflow {

class Command {
 public:
  virtual ~Command() = default;
  // `args` are the words after the subcommand. The command prints its own output; an error it
  // returns is printed as "qflow: error: <message>" with exit status 2, as a built-in
  // command's is.
  virtual Status run(const std::vector<std::string>& args) const = 0;
};

}  // namespace qflow
