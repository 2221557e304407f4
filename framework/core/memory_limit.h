// The process-wide memory limit for data whose size comes from a file or a run (--max-memory).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "qflow/core/status.h"

namespace qflow {

// Physical memory of the machine (sysconf), or 0 when it cannot be read.
int64_t physical_memory_bytes();
// Half of the physical memory; 16 GiB when the physical memory is unknown.
int64_t default_memory_limit();
// The limit in force: set_memory_limit's value, else default_memory_limit().
int64_t memory_limit();
void set_memory_limit(int64_t bytes);

// "1048576", "512K", "64M", "2G", "1T" (binary multiples, case-insensitive, optional "B"/"iB").
Expected<int64_t> parse_byte_size(std::string_view text);

// Refuses a size above memory_limit() before anything is allocated:
// "<what> needs N bytes, more than the memory limit of M bytes (--max-memory)".
Status check_memory(int64_t bytes, const std::string& what);

// Resident set size of this process from /proc/self/statm, or 0 when it cannot be read.
int64_t resident_bytes();

// Hands the free pages of the heap back to the system (glibc's malloc_trim; elsewhere nothing).
// Memory a thread frees stays in its malloc arena, where another thread's allocations cannot
// use it: called between the stages of a run, it took the shipped PTQ pipeline on PP-OCRv4
// det (50 pages at 640x640) from a 2128 MB to a 1548 MB peak.
void release_free_memory();

}  // namespace qflow
