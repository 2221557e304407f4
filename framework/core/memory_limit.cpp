// Memory limit: sysconf for the default, an atomic for the value set by --max-memory.
#include "framework/core/memory_limit.h"

#include <atomic>
#include <cctype>
#include <cstdio>
#include <limits>
#include <unistd.h>
#if defined(__GLIBC__)
#include <malloc.h>
#endif

namespace qflow {

namespace {
std::atomic<int64_t> g_limit{0};  // 0: not set, use the default
}  // namespace

int64_t physical_memory_bytes() {
  const long pages = ::sysconf(_SC_PHYS_PAGES);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  if (pages <= 0 || page <= 0) return 0;
  if (pages > std::numeric_limits<int64_t>::max() / page) return std::numeric_limits<int64_t>::max();
  return static_cast<int64_t>(pages) * page;
}

int64_t default_memory_limit() {
  const int64_t physical = physical_memory_bytes();
  return physical > 0 ? physical / 2 : int64_t{1} << 34;
}

int64_t memory_limit() {
  const int64_t set = g_limit.load(std::memory_order_relaxed);
  return set > 0 ? set : default_memory_limit();
}

void set_memory_limit(int64_t bytes) { g_limit.store(bytes, std::memory_order_relaxed); }

Expected<int64_t> parse_byte_size(std::string_view text) {
  // Built by append: GCC 12 misreports "'" + std::string(...) as an overlapping memcpy (-Wrestrict).
  std::string quoted = "'";
  quoted.append(text).append("'");
  std::size_t i = 0;
  int64_t value = 0;
  for (; i < text.size() && std::isdigit(static_cast<unsigned char>(text[i])); ++i) {
    const int digit = text[i] - '0';
    if (value > (std::numeric_limits<int64_t>::max() - digit) / 10)
      return invalid_input("size " + quoted + " is too large");
    value = value * 10 + digit;
  }
  if (i == 0) return invalid_input("size " + quoted + " is not a number of bytes (examples: 1048576, 512K, 64M, 2G)");
  std::string suffix;
  for (; i < text.size(); ++i) suffix += static_cast<char>(std::toupper(static_cast<unsigned char>(text[i])));
  if (suffix.size() > 1 && (suffix.substr(1) == "B" || suffix.substr(1) == "IB")) suffix.resize(1);
  int shift = 0;
  if (suffix.empty() || suffix == "B") shift = 0;
  else if (suffix == "K") shift = 10;
  else if (suffix == "M") shift = 20;
  else if (suffix == "G") shift = 30;
  else if (suffix == "T") shift = 40;
  else return invalid_input("size " + quoted + " has an unknown unit (use K, M, G or T)");
  if (value > (std::numeric_limits<int64_t>::max() >> shift)) return invalid_input("size " + quoted + " is too large");
  value <<= shift;
  if (value <= 0) return invalid_input("size " + quoted + " must be positive");
  return value;
}

Status check_memory(int64_t bytes, const std::string& what) {
  const int64_t limit = memory_limit();
  if (bytes <= limit) return Status::ok();
  return invalid_input(what + " needs " + std::to_string(bytes) + " bytes, more than the memory limit of " +
                       std::to_string(limit) + " bytes (--max-memory)");
}

int64_t resident_bytes() {
  std::FILE* f = std::fopen("/proc/self/statm", "r");
  if (!f) return 0;
  long long size = 0, resident = 0;
  const int read = std::fscanf(f, "%lld %lld", &size, &resident);
  std::fclose(f);
  const long page = ::sysconf(_SC_PAGE_SIZE);
  return read == 2 && page > 0 ? static_cast<int64_t>(resident) * page : 0;
}

void release_free_memory() {
#if defined(__GLIBC__)
  malloc_trim(0);
#endif
}

}  // namespace qflow
