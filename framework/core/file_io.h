// Whole-file reads with a size bound, and atomic writes (temporary file + rename).
#pragma once

#include <cstdint>
#include <string>
#include <string_view>

#include "qflow/core/status.h"

namespace qflow {

// Reads the whole file; refuses files larger than max_bytes with a message naming the file.
Expected<std::string> read_file(const std::string& path, int64_t max_bytes = int64_t{1} << 34);
// Reads at most the first max_bytes of the file (all of it when shorter): headers that
// say how big the rest is are checked before the rest is read.
Expected<std::string> read_file_prefix(const std::string& path, int64_t max_bytes);
// Writes `bytes` to path.tmp.<pid> in the same folder and renames it over `path`, so readers
// (and a process killed at any point) see either the old file or the complete new one, never
// a partial one. Synced also fsyncs the file before the rename and the folder after it, so a
// machine that loses power keeps that guarantee. Deferred skips both: the caller makes a batch
// of writes durable at once with sync_filesystem (a pipeline does so before its manifest).
// A killed writer can leave its path.tmp.<pid> behind; remove_stale_temp_files cleans up.
enum class Durability { Synced, Deferred };
Status write_file_atomic(const std::string& path, std::string_view bytes, Durability durability = Durability::Synced);
// Flushes everything written to the filesystem that holds `folder` (syncfs): one flush for a
// batch of Deferred writes instead of two fsyncs per file.
Status sync_filesystem(const std::string& folder);
// Removes the temporary file a write_file_atomic of this process is writing, if any; safe
// in a signal handler (a process ended by a signal leaves no half-written file). One write
// at a time is tracked: another thread's concurrent write is left to remove_stale_temp_files.
void remove_temp_in_flight() noexcept;

// True for names write_file_atomic uses for its temporary files ("<name>.tmp.<digits>").
bool is_atomic_temp_name(std::string_view file_name);
// Removes the temporary files of atomic writes in `folder` left by other processes (a
// killed run); returns how many were removed. The folder's other files are not touched.
int remove_stale_temp_files(const std::string& folder);

}  // namespace qflow
