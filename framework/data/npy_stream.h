// NpyStream: one .npy file read row by row at file offsets, so a batch of any size streams
// through a fixed amount of memory.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>

#include "framework/data/npy.h"
#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Reads the header of `path` and checks that the file holds exactly the data the header
// declares (a short file is reported as truncated, naming the sizes).
Expected<NpyHeader> read_npy_header(const std::string& path);

// An open .npy file whose first axis indexes rows. Each instance owns its descriptor, so
// several threads read the same file through instances of their own.
class NpyStream {
 public:
  static Expected<NpyStream> open(const std::string& path);
  // Opens a file whose header was read before (by load-data) without parsing it again; the
  // file's size must still be exactly what `header` implies.
  static Expected<NpyStream> open_known(const std::string& path, const NpyHeader& header);
  NpyStream(NpyStream&& other) noexcept;
  NpyStream& operator=(NpyStream&& other) noexcept;
  NpyStream(const NpyStream&) = delete;
  NpyStream& operator=(const NpyStream&) = delete;
  ~NpyStream();

  const NpyHeader& header() const { return header_; }
  int64_t rows() const { return header_.shape.empty() ? 0 : header_.shape[0]; }
  Shape row_shape() const { return Shape(header_.shape.begin() + 1, header_.shape.end()); }
  std::size_t row_bytes() const { return row_bytes_; }

  // Row `row` as a tensor of the row shape (bool bytes normalised to 0/1).
  Expected<Tensor> read_row(int64_t row) const;

 private:
  NpyStream(std::string path, NpyHeader header, int fd);
  std::string path_;
  NpyHeader header_;
  std::size_t row_bytes_ = 0;
  int fd_ = -1;
};

}  // namespace qflow
