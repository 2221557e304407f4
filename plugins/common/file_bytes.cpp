// A whole file read into memory.
#include "file_bytes.h"

#include <fstream>
#include <sstream>

namespace qflow {

Expected<std::string> read_file_bytes(const std::string& path) {
  std::ifstream in(path, std::ios::binary);
  if (!in) return io_error("cannot read '" + path + "'");
  std::ostringstream bytes;
  bytes << in.rdbuf();
  if (in.bad()) return io_error("cannot read '" + path + "'");
  return bytes.str();
}

}  // namespace qflow
