// How the qflow CLI reports failures: one line on stderr and an exit code by status class.
#pragma once

#include <string>

#include "qflow/core/status.h"

namespace qflow::cli {

// Exit codes: 0 success, 2 bad input or command line (InvalidInput, Unsupported, NotFound,
// IoError), 3 an internal error (a bug in qflow).
constexpr int kExitOk = 0;
constexpr int kExitBadInput = 2;
constexpr int kExitInternal = 3;

int exit_code_for(const Status& status);
// Folds a possibly multi-line message (libonnx's checker writes several lines) into one.
std::string one_line(const std::string& message);
// Prints "qflow: error: <message>" on stderr and returns the exit code for the status.
int report_error(const Status& status);

}  // namespace qflow::cli
