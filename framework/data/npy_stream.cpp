// NpyStream: header check against the file size, then positional reads (pread) of single rows.
#include "framework/data/npy_stream.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <algorithm>
#include <cstring>
#include <limits>
#include <string>
#include <utility>

#include <boost/endian/conversion.hpp>

namespace qflow {

namespace {

std::string errno_text() { return std::strerror(errno); }

// Reads exactly `size` bytes at `offset`, retrying short reads; returns how many arrived.
Expected<std::size_t> read_at(int fd, std::byte* out, std::size_t size, int64_t offset, const std::string& path) {
  std::size_t done = 0;
  while (done < size) {
    const ssize_t got = ::pread(fd, out + done, size - done, static_cast<off_t>(offset + static_cast<int64_t>(done)));
    if (got < 0) {
      if (errno == EINTR) continue;
      return io_error("cannot read '" + path + "': " + errno_text());
    }
    if (got == 0) break;
    done += static_cast<std::size_t>(got);
  }
  return done;
}

// Opens `path` and checks its header against the file's size.
Expected<std::pair<int, NpyHeader>> open_checked(const std::string& path) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open '" + path + "': " + errno_text());
  auto fail = [fd](Status status) -> Expected<std::pair<int, NpyHeader>> {
    ::close(fd);
    return status;
  };
  struct stat info {};
  if (::fstat(fd, &info) != 0) return fail(io_error("cannot stat '" + path + "': " + errno_text()));
  if (!S_ISREG(info.st_mode)) return fail(invalid_input(path + ": not a regular file"));
  const int64_t file_size = static_cast<int64_t>(info.st_size);
  // The fixed part first (magic, version, header length), then exactly the header, so that
  // opening a file per sample range costs two small reads whatever the file's size.
  std::string prefix(static_cast<std::size_t>(std::min<int64_t>(file_size, 12)), '\0');
  Expected<std::size_t> got = read_at(fd, reinterpret_cast<std::byte*>(prefix.data()), prefix.size(), 0, path);
  if (!got) return fail(got.status());
  prefix.resize(*got);
  if (prefix.size() >= 10) {
    const bool wide = static_cast<unsigned char>(prefix[6]) >= 2;
    const std::size_t start = wide ? 12 : 10;
    const auto* length_bytes = reinterpret_cast<const unsigned char*>(prefix.data() + 8);
    std::size_t length = 0;  // a wide header cut short is refused by parse_npy_header below
    if (!wide) length = boost::endian::load_little_u16(length_bytes);
    else if (prefix.size() >= 12) length = boost::endian::load_little_u32(length_bytes);
    const auto wanted = static_cast<int64_t>(std::min(start + length, kNpyMaxPrefixBytes));
    prefix.resize(static_cast<std::size_t>(std::min(file_size, wanted)));
    got = read_at(fd, reinterpret_cast<std::byte*>(prefix.data()), prefix.size(), 0, path);
    if (!got) return fail(got.status());
    prefix.resize(*got);
  }
  Expected<NpyHeader> header = parse_npy_header(prefix, path);
  if (!header) return fail(header.status());
  const int64_t available = file_size - static_cast<int64_t>(header->data_offset);
  if (header->data_bytes != available)
    return fail(invalid_input(path + ": shape " + npy_shape_literal(header->shape) + " of " +
                              std::string(dtype_name(header->dtype)) + " needs " + std::to_string(header->data_bytes) +
                              " bytes of data, the file holds " + std::to_string(available)));
  if (header->shape.empty())
    return fail(invalid_input(path + ": a scalar holds no samples (the first axis indexes samples)"));
  return std::make_pair(fd, std::move(*header));
}

}  // namespace

Expected<NpyHeader> read_npy_header(const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(auto opened, open_checked(path));
  ::close(opened.first);
  return std::move(opened.second);
}

NpyStream::NpyStream(std::string path, NpyHeader header, int fd)
    : path_(std::move(path)), header_(std::move(header)), fd_(fd) {
  // data_bytes did not overflow, so neither does one row of it.
  const int64_t rows = header_.shape[0];
  row_bytes_ = rows > 0 ? static_cast<std::size_t>(header_.data_bytes / rows)
                        : static_cast<std::size_t>(shape_numel(row_shape())) * dtype_size(header_.dtype);
}

NpyStream::NpyStream(NpyStream&& other) noexcept
    : path_(std::move(other.path_)), header_(std::move(other.header_)), row_bytes_(other.row_bytes_), fd_(other.fd_) {
  other.fd_ = -1;
}

NpyStream& NpyStream::operator=(NpyStream&& other) noexcept {
  if (this != &other) {
    if (fd_ >= 0) ::close(fd_);
    path_ = std::move(other.path_);
    header_ = std::move(other.header_);
    row_bytes_ = other.row_bytes_;
    fd_ = std::exchange(other.fd_, -1);
  }
  return *this;
}

NpyStream::~NpyStream() {
  if (fd_ >= 0) ::close(fd_);
}

Expected<NpyStream> NpyStream::open(const std::string& path) {
  QFLOW_ASSIGN_OR_RETURN(auto opened, open_checked(path));
  return NpyStream(path, std::move(opened.second), opened.first);
}

Expected<NpyStream> NpyStream::open_known(const std::string& path, const NpyHeader& header) {
  const int fd = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
  if (fd < 0) return io_error("cannot open '" + path + "': " + errno_text());
  struct stat info {};
  if (::fstat(fd, &info) != 0) {
    const std::string reason = errno_text();
    ::close(fd);
    return io_error("cannot stat '" + path + "': " + reason);
  }
  const int64_t expected = static_cast<int64_t>(header.data_offset) + header.data_bytes;
  if (static_cast<int64_t>(info.st_size) != expected || header.shape.empty()) {
    ::close(fd);
    return invalid_input(path + ": the file changed since load-data read it (" + std::to_string(info.st_size) +
                         " bytes, expected " + std::to_string(expected) + ")");
  }
  return NpyStream(path, header, fd);
}

Expected<Tensor> NpyStream::read_row(int64_t row) const {
  if (row < 0 || row >= rows())
    return internal_error(path_ + ": row " + std::to_string(row) + " is outside [0, " + std::to_string(rows()) + ")");
  QFLOW_ASSIGN_OR_RETURN(Tensor tensor, Tensor::make(header_.dtype, row_shape()));
  const int64_t offset = static_cast<int64_t>(header_.data_offset) + row * static_cast<int64_t>(row_bytes_);
  QFLOW_ASSIGN_OR_RETURN(std::size_t got, read_at(fd_, tensor.raw_data(), row_bytes_, offset, path_));
  if (got != row_bytes_)
    return io_error(path_ + ": truncated at row " + std::to_string(row) + " (the file shrank after load-data read it)");
  if (header_.dtype == DType::Bool)
    for (std::byte& b : std::span<std::byte>(tensor.raw_data(), row_bytes_)) b = b == std::byte{0} ? std::byte{0} : std::byte{1};
  return tensor;
}

}  // namespace qflow
