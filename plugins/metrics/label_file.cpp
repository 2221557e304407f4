// .npy label reading: the header's dict is parsed just enough for integer vectors (the plugin
// sees only the SDK, not the framework's npy reader).
#include "label_file.h"

#include <cstring>
#include <fstream>
#include <iterator>

namespace qflow {

namespace {

constexpr std::size_t kMaxLabelBytes = std::size_t{1} << 30;

// The quoted value of `key` in the header dict ("'descr': '<i8'" -> "<i8"), or "" when absent.
std::string quoted_field(const std::string& header, const std::string& key) {
  const std::size_t at = header.find("'" + key + "'");
  if (at == std::string::npos) return "";
  const std::size_t open = header.find('\'', header.find(':', at) + 1);
  if (open == std::string::npos) return "";
  const std::size_t close = header.find('\'', open + 1);
  return close == std::string::npos ? "" : header.substr(open + 1, close - open - 1);
}

// The text between the parentheses of 'shape' without spaces ("200," or "200,1"); "?" when absent.
std::string shape_text(const std::string& header) {
  const std::size_t at = header.find("'shape'");
  if (at == std::string::npos) return "?";
  const std::size_t open = header.find('(', at);
  const std::size_t close = header.find(')', open);
  if (open == std::string::npos || close == std::string::npos) return "?";
  std::string text;
  for (char c : header.substr(open + 1, close - open - 1))
    if (c != ' ') text += c;
  return text;
}

template <typename T>
std::vector<int64_t> widen(const char* data, std::size_t count) {
  std::vector<int64_t> out(count);
  for (std::size_t i = 0; i < count; ++i) {
    T value;
    std::memcpy(&value, data + i * sizeof(T), sizeof(T));
    out[i] = static_cast<int64_t>(value);
  }
  return out;
}

}  // namespace

Expected<std::vector<int64_t>> read_label_file(const std::string& path) {
  const std::string head = "labels '" + path + "'";
  if (path.empty()) return invalid_input("labels: no file given (option 'labels')");
  std::ifstream in(path, std::ios::binary);
  if (!in) return not_found(head + ": cannot open the file");
  std::string bytes;
  in.seekg(0, std::ios::end);
  const std::streamoff size = in.tellg();
  if (size < 0 || static_cast<std::size_t>(size) > kMaxLabelBytes)
    return invalid_input(head + ": larger than 1 GiB or unreadable");
  in.seekg(0);
  bytes.assign(std::istreambuf_iterator<char>(in), std::istreambuf_iterator<char>());
  if (bytes.size() < 10 || bytes.compare(0, 6, "\x93NUMPY") != 0) return invalid_input(head + ": not a .npy file");
  const auto major = static_cast<unsigned char>(bytes[6]);
  std::size_t header_length = 0, header_start = 0;
  if (major == 1) {
    header_length = static_cast<unsigned char>(bytes[8]) | static_cast<std::size_t>(static_cast<unsigned char>(bytes[9])) << 8;
    header_start = 10;
  } else if (major == 2 || major == 3) {
    if (bytes.size() < 12) return invalid_input(head + ": truncated .npy header");
    for (int i = 3; i >= 0; --i) header_length = header_length << 8 | static_cast<unsigned char>(bytes[8 + i]);
    header_start = 12;
  } else {
    return invalid_input(head + ": unsupported .npy version " + std::to_string(major));
  }
  if (bytes.size() < header_start + header_length) return invalid_input(head + ": truncated .npy header");
  const std::string header = bytes.substr(header_start, header_length);
  if (header.find("'fortran_order': True") != std::string::npos)
    return invalid_input(head + ": Fortran-order arrays are not supported");
  const std::string descr = quoted_field(header, "descr");
  const bool little = descr.size() == 3 && (descr[0] == '<' || descr[0] == '|');
  const char kind = descr.size() == 3 ? descr[1] : '?';
  const std::size_t width = descr.size() == 3 ? static_cast<std::size_t>(descr[2] - '0') : 0;
  if (!little || (kind != 'i' && kind != 'u') || (width != 1 && width != 2 && width != 4 && width != 8))
    return invalid_input(head + ": dtype '" + descr + "' is not a little-endian integer type (write labels as int64)");
  const std::string shape = shape_text(header);
  std::size_t count = 0;
  const std::size_t comma = shape.find(',');
  const std::string first = shape.substr(0, comma);
  const std::string rest = comma == std::string::npos ? "" : shape.substr(comma + 1);
  const bool digits = !first.empty() && first.find_first_not_of("0123456789") == std::string::npos;
  if (!digits || (!rest.empty() && rest != "1" && rest != "1,"))
    return invalid_input(head + ": shape (" + shape + ") is not [N] or [N, 1] (one label per sample)");
  count = std::stoull(first);
  const std::size_t body = header_start + header_length;
  if (bytes.size() - body < count * width)
    return invalid_input(head + ": truncated: " + std::to_string(count) + " labels need " +
                         std::to_string(count * width) + " bytes, the file holds " + std::to_string(bytes.size() - body));
  const char* data = bytes.data() + body;
  switch (width) {
    case 1: return kind == 'i' ? widen<int8_t>(data, count) : widen<uint8_t>(data, count);
    case 2: return kind == 'i' ? widen<int16_t>(data, count) : widen<uint16_t>(data, count);
    case 4: return kind == 'i' ? widen<int32_t>(data, count) : widen<uint32_t>(data, count);
    default: return kind == 'i' ? widen<int64_t>(data, count) : widen<uint64_t>(data, count);
  }
}

}  // namespace qflow
