// File reading and atomic writing with errno-based messages.
#include "framework/core/file_io.h"

#include <cerrno>
#include <cstdio>
#include <cstring>
#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

namespace qflow {

namespace {
std::string os_error(const std::string& what, const std::string& path) {
  return what + " '" + path + "': " + std::strerror(errno);
}
}  // namespace

Expected<std::string> read_file(const std::string& path, int64_t max_bytes) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return errno == ENOENT ? not_found(os_error("cannot open", path)) : io_error(os_error("cannot open", path));
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    Status s = io_error(os_error("cannot stat", path));
    ::close(fd);
    return s;
  }
  if (S_ISDIR(info.st_mode)) {
    ::close(fd);
    return invalid_input("'" + path + "' is a directory, not a file");
  }
  if (info.st_size > max_bytes) {
    ::close(fd);
    return invalid_input("'" + path + "' is " + std::to_string(info.st_size) + " bytes, more than the limit of " +
                         std::to_string(max_bytes));
  }
  std::string bytes(static_cast<std::size_t>(info.st_size), '\0');
  std::size_t done = 0;
  while (done < bytes.size()) {
    const ssize_t n = ::read(fd, bytes.data() + done, bytes.size() - done);
    if (n < 0 && errno == EINTR) continue;
    if (n <= 0) {
      Status s = io_error(os_error("cannot read", path));
      ::close(fd);
      return s;
    }
    done += static_cast<std::size_t>(n);
  }
  ::close(fd);
  return bytes;
}

Status write_file_atomic(const std::string& path, std::string_view bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
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
  if (::fsync(fd) != 0 || ::close(fd) != 0) {
    Status s = io_error(os_error("cannot write", path));
    ::unlink(tmp.c_str());
    return s;
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    Status s = io_error(os_error("cannot write", path));
    ::unlink(tmp.c_str());
    return s;
  }
  return Status::ok();
}

}  // namespace qflow
