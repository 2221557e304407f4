// File reading and atomic writing with errno-based messages.
#include "framework/core/file_io.h"

#include <cerrno>
#include <cctype>
#include <dirent.h>
#include <cstdio>
#include <algorithm>
#include <atomic>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace qflow {

namespace {
std::string os_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}

// The temp file being written, for remove_temp_in_flight. A write claims the slot by moving
// temp_state from 0 (free) to 1, copies the name, then publishes 2; a handler reads the name
// only at 2. A write that finds the slot taken is not tracked.
char temp_in_flight[4096];
std::atomic<int> temp_state{0};

struct TempInFlight {
  bool claimed = false;
  explicit TempInFlight(const std::string& tmp) {
    int free = 0;
    if (tmp.size() >= sizeof(temp_in_flight) || !temp_state.compare_exchange_strong(free, 1)) return;
    std::memcpy(temp_in_flight, tmp.c_str(), tmp.size() + 1);
    temp_state.store(2);
    claimed = true;
  }
  ~TempInFlight() {
    if (claimed) temp_state.store(0);
  }
};
}  // namespace

void remove_temp_in_flight() noexcept {
  if (temp_state.load() == 2) ::unlink(temp_in_flight);
}

namespace {

// Closes the descriptor on every return path.
struct FdCloser {
  int fd;
  ~FdCloser() { ::close(fd); }
};

// Reads `path`: the whole file (`whole`: a file over `max_bytes` is refused, a short read is
// an error) or its first `max_bytes` bytes (a file that shrank meanwhile gives what was there).
Expected<std::string> read_bytes(const std::string& path, int64_t max_bytes, bool whole) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? not_found(os_error("cannot open", path)) : io_error(os_error("cannot open", path));
  const FdCloser closer{fd};
  struct stat info {};
  if (::fstat(fd, &info) != 0) return io_error(os_error("cannot stat", path));
  if (S_ISDIR(info.st_mode)) return invalid_input("'" + path + "' is a directory, not a file");
  if (whole && info.st_size > max_bytes)
    return invalid_input("'" + path + "' is " + std::to_string(info.st_size) + " bytes, more than the limit of " +
                         std::to_string(max_bytes));
  std::string bytes(static_cast<std::size_t>(std::min<int64_t>(info.st_size, max_bytes)), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n < 0 || (n == 0 && whole)) return io_error(os_error("cannot read", path));
    if (n == 0) break;
    done += static_cast<std::size_t>(n);
  }
  bytes.resize(done);
  return bytes;
}

}  // namespace

Expected<std::string> read_file(const std::string& path, int64_t max_bytes) { return read_bytes(path, max_bytes, true); }

Expected<std::string> read_file_prefix(const std::string& path, int64_t max_bytes) {
  return read_bytes(path, max_bytes, false);
}

Status write_file_atomic(const std::string& path, std::string_view bytes, Durability durability) {
  const bool synced = durability == Durability::Synced;
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  const TempInFlight in_flight(tmp);
  const int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) return io_error(os_error("cannot write", path));
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::write(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = io_error(os_error("cannot write", path));
      ::close(fd);
      ::unlink(tmp.c_str());
      return s;
    }
    done += static_cast<std::size_t>(n);
  }
  if ((synced && ::fsync(fd) != 0) || ::close(fd) != 0) {
    Status s = io_error(os_error("cannot write", path));
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = io_error(os_error("cannot write", path));
    ::unlink(tmp.c_str());
    return s;
  }
  if (!synced) return Status::ok();
  // The rename itself is durable only once the folder is synced.
  const std::string::size_type slash = path.rfind('/');
  const std::string folder = slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir >= 0) {
    ::fsync(dir);
    ::close(dir);
  }
  return Status::ok();
}

Status sync_filesystem(const std::string& folder) {
  const int dir = ::open(folder.c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dir < 0) return io_error(os_error("cannot open", folder));
  const FdCloser closer{dir};
  if (::syncfs(dir) != 0) return io_error(os_error("cannot flush the files written to", folder));
  return Status::ok();
}

bool is_atomic_temp_name(std::string_view file_name) {
  const std::string_view::size_type at = file_name.rfind(".tmp.");
  if (at == std::string_view::npos || at == 0 || at + 5 == file_name.size()) return false;
  for (char c : file_name.substr(at + 5))
    if (!std::isdigit(static_cast<unsigned char>(c))) return false;
  return true;
}

int remove_stale_temp_files(const std::string& folder) {
  DIR* dir = ::opendir(folder.c_str());
  if (!dir) return 0;
  const std::string own = ".tmp." + std::to_string(::getpid());
  int removed = 0;
  while (const dirent* entry = ::readdir(dir)) {
    const std::string name = entry->d_name;
    if (!is_atomic_temp_name(name)) continue;
    if (name.size() >= own.size() && name.compare(name.size() - own.size(), own.size(), own) == 0) continue;
    if (::unlink((folder + "/" + name).c_str()) == 0) ++removed;
  }
  ::closedir(dir);
  return removed;
}

}  // namespace qflow
