// qflow_conformance: runs the ONNX backend test suites and checks them against expected-pass lists.
#include <algorithm>
#include <filesystem>
#include <fstream>
#include <cctype>
#include <iostream>
#include <map>
#include <set>
#include <string>
#include <thread>
#include <vector>

#include "conformance_runner.h"

namespace {

using qflow::conformance::Outcome;
using qflow::conformance::TestResult;

struct Options {
  std::string suite = "node";
  std::string root = "/usr/share/libonnx-testdata/data";
  std::string filter;
  bool verbose = false;
  std::string expected;
  std::string write_expected;
  int threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
};

const char* kUsage =
    "usage: qflow_conformance [--suite node|pytorch-converted|pytorch-operator|all] [--root DIR]\n"
    "                         [--filter SUBSTR] [--verbose] [--expected FILE] [--write-expected FILE]\n"
    "                         [--threads N]\n";

bool parse_args(int argc, char** argv, Options& options) {
  std::vector<std::string> args(argv + 1, argv + argc);
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    auto value = [&](std::string& out) {
      if (i + 1 >= args.size()) {
        std::cerr << "qflow_conformance: " << a << " needs a value\n" << kUsage;
        return false;
      }
      out = args[++i];
      return true;
    };
    if (a == "--suite") {
      if (!value(options.suite)) return false;
    } else if (a == "--root") {
      if (!value(options.root)) return false;
    } else if (a == "--filter") {
      if (!value(options.filter)) return false;
    } else if (a == "--expected") {
      if (!value(options.expected)) return false;
    } else if (a == "--write-expected") {
      if (!value(options.write_expected)) return false;
    } else if (a == "--threads") {
      std::string n;
      if (!value(n)) return false;
      try {
        options.threads = std::stoi(n);
      } catch (const std::exception&) {
        options.threads = 0;
      }
      if (options.threads < 1) {
        std::cerr << "qflow_conformance: --threads expects a positive number, got '" << n << "'\n";
        return false;
      }
    } else if (a == "--verbose") {
      options.verbose = true;
    } else if (a == "--help" || a == "-h") {
      std::cout << kUsage;
      std::exit(0);
    } else {
      std::cerr << "qflow_conformance: unknown argument '" << a << "'\n" << kUsage;
      return false;
    }
  }
  const std::set<std::string> suites = {"node", "pytorch-converted", "pytorch-operator", "all"};
  if (!suites.count(options.suite)) {
    std::cerr << "qflow_conformance: unknown suite '" << options.suite
              << "' (expected node, pytorch-converted, pytorch-operator or all)\n";
    return false;
  }
  return true;
}

}  // namespace

int main(int argc, char** argv) {
  Options options;
  if (!parse_args(argc, argv, options)) return 2;

  std::vector<std::string> suites;
  if (options.suite == "all") suites = {"node", "pytorch-converted", "pytorch-operator"};
  else suites = {options.suite};

  std::set<std::string> passed;
  std::map<std::string, std::string> reasons;
  for (const std::string& suite : suites) {
    const std::string dir = options.root + "/" + suite;
    if (!std::filesystem::is_directory(dir)) {
      std::cerr << "qflow_conformance: '" << dir << "' is not a directory\n";
      return 2;
    }
    const std::vector<TestResult> results = qflow::conformance::run_suite(dir, options.filter, options.threads);
    int n_passed = 0, n_failed = 0, n_skipped = 0;
    for (const TestResult& r : results) {
      switch (r.outcome) {
        case Outcome::Passed:
          ++n_passed;
          passed.insert(r.name);
          break;
        case Outcome::Failed:
          ++n_failed;
          std::cout << "FAIL " << r.name << ": " << r.reason << "\n";
          break;
        case Outcome::Skipped:
          ++n_skipped;
          if (options.verbose) std::cout << "SKIP " << r.name << ": " << r.reason << "\n";
          break;
      }
      if (r.outcome != Outcome::Passed) reasons[r.name] = r.reason;
    }
    std::cout << suite << ": " << n_passed << " passed, " << n_failed << " failed, " << n_skipped << " skipped\n";
  }

  if (!options.write_expected.empty()) {
    std::ofstream out(options.write_expected);
    for (const std::string& name : passed) out << name << "\n";
    if (!out) {
      std::cerr << "qflow_conformance: cannot write '" << options.write_expected << "'\n";
      return 2;
    }
  }
  if (!options.expected.empty()) {
    std::ifstream in(options.expected);
    if (!in) {
      std::cerr << "qflow_conformance: cannot read '" << options.expected << "'\n";
      return 2;
    }
    int regressions = 0;
    for (std::string line; std::getline(in, line);) {
      line.erase(std::remove_if(line.begin(), line.end(), [](unsigned char c) { return std::isspace(c); }),
                 line.end());
      if (line.empty() || line[0] == '#' || passed.count(line)) continue;
      auto it = reasons.find(line);
      std::cout << "REGRESSION " << line << " is expected to pass but "
                << (it == reasons.end() ? std::string("was not run") : "did not: " + it->second) << "\n";
      ++regressions;
    }
    if (regressions > 0) return 1;
  }
  return 0;
}
