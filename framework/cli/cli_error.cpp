// Error reporting for the qflow CLI.
#include "framework/cli/cli_error.h"

#include <iostream>

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
  std::cerr << "qflow: error: " << one_line(status.message()) << std::endl;
  return exit_code_for(status);
}

}  // namespace qflow::cli
