// The bytes the ranks of a distributed run send each other beyond observer states: doubles
// copied bit for bit (results must be identical on every rank), statuses, kind bytes.
#pragma once

#include <cstddef>
#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

#include "qflow/core/status.h"

namespace qflow {

class MessageWriter {
 public:
  void byte(char c) { bytes_.push_back(c); }
  void doubles(const double* values, std::size_t n) {
    bytes_.append(reinterpret_cast<const char*>(values), n * sizeof(double));
  }
  void status(const Status& status) {
    byte(static_cast<char>(status.code()));
    const uint64_t size = status.message().size();
    bytes_.append(reinterpret_cast<const char*>(&size), sizeof size);
    bytes_ += status.message();
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

// Reads what MessageWriter wrote; every read returns false when the message ends early.
// `bytes` must outlive the reader.
class MessageReader {
 public:
  explicit MessageReader(std::string_view bytes) : bytes_(bytes) {}
  bool byte(char& c) {
    if (bytes_.empty()) return false;
    c = bytes_[0];
    bytes_.remove_prefix(1);
    return true;
  }
  bool doubles(double* values, std::size_t n) {
    if (bytes_.size() < n * sizeof(double)) return false;
    std::memcpy(values, bytes_.data(), n * sizeof(double));
    bytes_.remove_prefix(n * sizeof(double));
    return true;
  }
  bool status(Status& status) {
    char code = 0;
    uint64_t size = 0;
    if (!byte(code) || bytes_.size() < sizeof size) return false;
    std::memcpy(&size, bytes_.data(), sizeof size);
    bytes_.remove_prefix(sizeof size);
    if (bytes_.size() < size) return false;
    status = Status(static_cast<StatusCode>(code), std::string(bytes_.substr(0, size)));
    bytes_.remove_prefix(size);
    return true;
  }
  bool done() const { return bytes_.empty(); }

 private:
  std::string_view bytes_;
};

}  // namespace qflow
