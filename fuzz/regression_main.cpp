// Replays files through a fuzz target with the normal compiler, for CTest:
//   qflow_fuzz_regression <target> <file or folder>...
// Folders are read recursively in name order; a missing folder is skipped (a target may have
// no committed crash inputs). A crash or an escaping exception fails the test, so does a run
// that found no input at all.
#include <algorithm>
#include <cstdio>
#include <exception>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <string>
#include <vector>

#include "fuzz/fuzz_targets.h"

namespace fs = std::filesystem;

namespace {

std::vector<fs::path> input_files(const fs::path& path) {
  std::vector<fs::path> files;
  std::error_code error;
  if (fs::is_regular_file(path, error)) {
    files.push_back(path);
  } else if (fs::is_directory(path, error)) {
    for (const fs::directory_entry& entry : fs::recursive_directory_iterator(path))
      if (entry.is_regular_file()) files.push_back(entry.path());
    std::sort(files.begin(), files.end());
  }
  return files;
}

}  // namespace

int main(int argc, char** argv) {
  if (argc < 3) {
    std::fprintf(stderr, "usage: qflow_fuzz_regression <target> <file or folder>...\n");
    return 2;
  }
  const qflow::fuzz::Target* target = qflow::fuzz::find_target(argv[1]);
  if (!target) {
    std::fprintf(stderr, "qflow_fuzz_regression: no target named '%s'\n", argv[1]);
    return 2;
  }
  size_t replayed = 0;
  for (int i = 2; i < argc; ++i) {
    for (const fs::path& file : input_files(argv[i])) {
      std::ifstream in(file, std::ios::binary);
      const std::string bytes((std::istreambuf_iterator<char>(in)), std::istreambuf_iterator<char>());
      if (!in.good() && !in.eof()) {
        std::fprintf(stderr, "qflow_fuzz_regression: cannot read %s\n", file.c_str());
        return 2;
      }
      // Printed first, so the log names the input when it crashes the process.
      std::printf("%s: %s (%zu bytes)\n", argv[1], file.c_str(), bytes.size());
      std::fflush(stdout);
      try {
        target->run(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
      } catch (const std::exception& e) {
        std::fprintf(stderr, "qflow_fuzz_regression: %s threw: %s\n", file.c_str(), e.what());
        return 1;
      }
      ++replayed;
    }
  }
  if (replayed == 0) {
    std::fprintf(stderr, "qflow_fuzz_regression: no input found for '%s'\n", argv[1]);
    return 1;
  }
  std::printf("%s: %zu inputs replayed\n", argv[1], replayed);
  return 0;
}
