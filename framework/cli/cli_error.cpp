// Error reporting for the qflow CLI.
#include "framework/cli/cli_error.h"

#include <chrono>
#include <iostream>
#include <thread>

#include "framework/distributed/world.h"

namespace qflow::cli {

int exit_code_for(const Status& status) {
  switch (status.code()) {
    case StatusCode::Ok: return kExitOk;
    case StatusCode::Internal: return kExitInternal;
    case StatusCode::InvalidInput:
    case StatusCode::Unsupported:
    case StatusCode::NotFound:
    case StatusCode::IoError: return kExitBadInput;
  }
  return kExitInternal;
}

std::string one_line(const std::string& message) {
  std::string out;
  bool pending_space = false;
  for (char c : message) {
    if (c == '\n' || c == '\r') {
      pending_space = !out.empty();
      continue;
    }
    if (pending_space) {
      if (out.back() != ' ') out += ' ';
      pending_space = false;
      if (c == ' ') continue;
    }
    out += c;
  }
  while (!out.empty() && out.back() == ' ') out.pop_back();
  return out;
}

int report_error(const Status& status) {
  const World& world = World::get();
  if (world.distributed()) {
    world.note_error_reported();
    // The ranks mostly meet the same failure (the exchanges share it): rank 0 reports it and
    // ends the job, which ends this rank before it repeats the line. A failure of this rank
    // alone is still reported, a moment later.
    if (!world.is_root()) std::this_thread::sleep_for(std::chrono::seconds(2));
  }
  std::cerr << "qflow: error: " << one_line(status.message()) << std::endl;
  return exit_code_for(status);
}

}  // namespace qflow::cli
