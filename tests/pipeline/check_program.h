// What the pipeline check programs (check_*_bits.cpp) share: failures counted and printed,
// files read whole, commands run with their output in a log.
#pragma once

#include <sys/wait.h>

#include <cstdlib>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>

namespace qflow::check {

inline int failures = 0;

inline void fail(const std::string& what) {
  std::cout << "FAIL: " << what << "\n";
  ++failures;
}

inline std::string read(const std::string& path) {
  std::ifstream in(path);
  std::stringstream text;
  text << in.rdbuf();
  return text.str();
}

// Runs a command in `dir` with its output in `log`; returns its exit status.
inline int run(const std::string& dir, const std::string& command, const std::string& log) {
  const int status = std::system(("cd '" + dir + "' && " + command + " >'" + log + "' 2>&1").c_str());
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

}  // namespace qflow::check
