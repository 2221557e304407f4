// .npy parsing (a strict reader for the header's Python dict literal) and serialization.
#include "framework/data/npy.h"

#include <charconv>
#include <cstring>
#include <limits>
#include <optional>

#include <boost/endian/conversion.hpp>

#include "framework/core/file_io.h"

namespace qflow {

namespace {

constexpr std::string_view kMagic = "\x93NUMPY";
// Room for the longest header a reader accepts on top of the data limit.
constexpr int64_t kMaxHeaderBytes = int64_t{1} << 20;

struct NpyType {
  DType dtype;
  std::string_view descr;  // as written; one-byte types use '|'
};

constexpr NpyType kTypes[] = {
    {DType::Float32, "<f4"}, {DType::Float64, "<f8"}, {DType::Float16, "<f2"}, {DType::Int8, "|i1"},
    {DType::UInt8, "|u1"},   {DType::Int16, "<i2"},   {DType::UInt16, "<u2"},  {DType::Int32, "<i4"},
    {DType::UInt32, "<u4"},  {DType::Int64, "<i8"},   {DType::UInt64, "<u8"},  {DType::Bool, "|b1"},
};

struct Header {
  std::string descr;
  bool fortran_order = false;
  Shape shape;
};

// Parses the header: a dict literal with exactly the keys 'descr', 'fortran_order', 'shape'.
class HeaderParser {
 public:
  HeaderParser(std::string_view text, const std::string& source) : text_(text), source_(source) {}

  Expected<Header> parse() {
    Header header;
    bool seen_descr = false, seen_order = false, seen_shape = false;
    skip_space();
    if (!consume('{')) return fail("expected '{'");
    while (true) {
      skip_space();
      if (consume('}')) break;
      std::string key;
      QFLOW_RETURN_IF_ERROR(parse_string(key));
      skip_space();
      if (!consume(':')) return fail("expected ':' after '" + key + "'");
      skip_space();
      if (key == "descr") {
        QFLOW_RETURN_IF_ERROR(parse_string(header.descr));
        seen_descr = true;
      } else if (key == "fortran_order") {
        if (text_.substr(pos_, 4) == "True") {
          header.fortran_order = true;
          pos_ += 4;
        } else if (text_.substr(pos_, 5) == "False") {
          pos_ += 5;
        } else {
          return fail("'fortran_order' is neither True nor False");
        }
        seen_order = true;
      } else if (key == "shape") {
        QFLOW_RETURN_IF_ERROR(parse_shape(header.shape));
        seen_shape = true;
      } else {
        return fail("unexpected key '" + key + "'");
      }
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume('}')) break;
      return fail("expected ',' or '}'");
    }
    skip_space();
    if (pos_ != text_.size()) return fail("unexpected text after the dict");
    if (!seen_descr || !seen_order || !seen_shape)
      return fail("the header lacks one of 'descr', 'fortran_order', 'shape'");
    return header;
  }

 private:
  Status fail(const std::string& what) const {
    return invalid_input(source_ + ": malformed .npy header (" + what + " at offset " + std::to_string(pos_) + ")");
  }
  void skip_space() {
    while (pos_ < text_.size() && (text_[pos_] == ' ' || text_[pos_] == '\t' || text_[pos_] == '\n')) ++pos_;
  }
  bool consume(char c) {
    if (pos_ < text_.size() && text_[pos_] == c) {
      ++pos_;
      return true;
    }
    return false;
  }
  Status parse_string(std::string& out) {
    if (pos_ >= text_.size() || (text_[pos_] != '\'' && text_[pos_] != '"')) return fail("expected a quoted string");
    const char quote = text_[pos_++];
    const std::size_t end = text_.find(quote, pos_);
    if (end == std::string_view::npos) return fail("unterminated string");
    out = std::string(text_.substr(pos_, end - pos_));
    pos_ = end + 1;
    return Status::ok();
  }
  Status parse_shape(Shape& shape) {
    if (!consume('(')) return fail("expected '(' to start the shape");
    while (true) {
      skip_space();
      if (consume(')')) return Status::ok();
      int64_t dim = 0;
      const char* begin = text_.data() + pos_;
      const auto [ptr, ec] = std::from_chars(begin, text_.data() + text_.size(), dim);
      if (ec == std::errc::result_out_of_range) return fail("a dimension does not fit in 64 bits");
      if (ec != std::errc() || dim < 0) return fail("expected a non-negative dimension");
      pos_ += static_cast<std::size_t>(ptr - begin);
      // Python writes long integers with an 'L' suffix in old files.
      consume('L');
      shape.push_back(dim);
      skip_space();
      if (consume(',')) continue;
      skip_space();
      if (consume(')')) return Status::ok();
      return fail("expected ',' or ')' in the shape");
    }
  }

  std::string_view text_;
  const std::string& source_;
  std::size_t pos_ = 0;
};

std::optional<DType> dtype_from_descr(std::string_view descr) {
  if (descr.size() != 3) return std::nullopt;
  for (const NpyType& t : kTypes) {
    if (descr.substr(1) != t.descr.substr(1)) continue;
    // '=' is native order, little-endian on every platform qflow builds for; one-byte
    // types carry no order, so writers use '|' or '<' interchangeably.
    const char order = descr[0];
    if (order == '<' || order == '=' || (order == '|' && dtype_size(t.dtype) == 1)) return t.dtype;
  }
  return std::nullopt;
}

std::string shape_literal(const Shape& shape) {
  std::string out = "(";
  for (std::size_t i = 0; i < shape.size(); ++i) out += (i ? ", " : "") + std::to_string(shape[i]);
  if (shape.size() == 1) out += ",";
  return out + ")";
}

}  // namespace

Expected<NpyHeader> parse_npy_header(std::string_view bytes, const std::string& source_name) {
  if (bytes.size() < 10 || bytes.substr(0, kMagic.size()) != kMagic)
    return invalid_input(source_name + ": not a .npy file (the magic string \\x93NUMPY is missing)");
  const int major = static_cast<unsigned char>(bytes[6]);
  const int minor = static_cast<unsigned char>(bytes[7]);
  if (major < 1 || major > 3 || minor != 0)
    return unsupported(source_name + ": .npy format version " + std::to_string(major) + "." + std::to_string(minor) +
                       " is not supported (1.0, 2.0 and 3.0 are)");
  const std::size_t length_width = major == 1 ? 2 : 4;
  if (bytes.size() < 8 + length_width) return invalid_input(source_name + ": the .npy header is truncated");
  const auto* length_bytes = reinterpret_cast<const unsigned char*>(bytes.data() + 8);
  const std::size_t header_length = major == 1 ? boost::endian::load_little_u16(length_bytes)
                                               : boost::endian::load_little_u32(length_bytes);
  const std::size_t header_start = 8 + length_width;
  if (header_length > static_cast<std::size_t>(kMaxHeaderBytes) || header_start + header_length > bytes.size())
    return invalid_input(source_name + ": the .npy header declares " + std::to_string(header_length) +
                         " bytes but the file holds " + std::to_string(bytes.size() - header_start) + " after it");

  HeaderParser parser(bytes.substr(header_start, header_length), source_name);
  QFLOW_ASSIGN_OR_RETURN(Header header, parser.parse());
  if (header.fortran_order)
    return unsupported(source_name + ": Fortran-order arrays are not supported; save a C-order array "
                       "(numpy.ascontiguousarray)");
  const std::optional<DType> dtype = dtype_from_descr(header.descr);
  if (!dtype)
    return unsupported(source_name + ": dtype '" + header.descr +
                       "' is not supported (little-endian float16/32/64, int8/16/32/64, uint8/16/32/64, bool)");

  const int64_t numel = shape_numel(header.shape);
  const int64_t element_size = static_cast<int64_t>(dtype_size(*dtype));
  if (numel < 0 || numel > std::numeric_limits<int64_t>::max() / element_size)
    return invalid_input(source_name + ": shape " + shape_literal(header.shape) + " overflows a 64-bit size");
  NpyHeader result;
  result.dtype = *dtype;
  result.shape = std::move(header.shape);
  result.data_offset = header_start + header_length;
  result.data_bytes = numel * element_size;
  return result;
}

std::string npy_shape_literal(const Shape& shape) { return shape_literal(shape); }

Expected<Tensor> parse_npy(std::string_view bytes, const std::string& source_name, int64_t max_bytes) {
  QFLOW_ASSIGN_OR_RETURN(NpyHeader header, parse_npy_header(bytes, source_name));
  const DType dtype = header.dtype;
  const int64_t numel = shape_numel(header.shape);
  const int64_t needed = header.data_bytes;
  if (needed > max_bytes)
    return invalid_input(source_name + ": shape " + shape_literal(header.shape) + " needs " + std::to_string(needed) +
                         " bytes, more than the memory limit of " + std::to_string(max_bytes) + " bytes (--max-memory)");
  const std::size_t data_start = header.data_offset;
  const std::size_t available = bytes.size() - data_start;
  if (static_cast<uint64_t>(needed) != available)
    return invalid_input(source_name + ": shape " + shape_literal(header.shape) + " of " +
                         std::string(dtype_name(dtype)) + " needs " + std::to_string(needed) +
                         " bytes of data, the file holds " + std::to_string(available));

  QFLOW_ASSIGN_OR_RETURN(Tensor tensor, Tensor::make(dtype, header.shape, max_bytes));
  if (needed > 0) std::memcpy(tensor.raw_data(), bytes.data() + data_start, static_cast<std::size_t>(needed));
  if (dtype == DType::Bool) {
    // NumPy only writes 0/1, but normalise so kernels can rely on it.
    for (std::byte& b : std::span<std::byte>(tensor.raw_data(), static_cast<std::size_t>(numel)))
      b = b == std::byte{0} ? std::byte{0} : std::byte{1};
  }
  return tensor;
}

Expected<Tensor> read_npy_file(const std::string& path, int64_t max_bytes) {
  // The header first, so a file is refused by what it declares before it is read whole.
  {
    QFLOW_ASSIGN_OR_RETURN(std::string prefix, read_file_prefix(path, kNpyMaxPrefixBytes));
    QFLOW_ASSIGN_OR_RETURN(NpyHeader header, parse_npy_header(prefix, path));
    if (header.data_bytes > max_bytes)
      return invalid_input(path + ": shape " + shape_literal(header.shape) + " needs " + std::to_string(header.data_bytes) +
                           " bytes, more than the memory limit of " + std::to_string(max_bytes) + " bytes (--max-memory)");
  }
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path, max_bytes + kMaxHeaderBytes + 64));
  return parse_npy(bytes, path, max_bytes);
}

Expected<std::string> serialize_npy(const Tensor& tensor) {
  std::string_view descr;
  for (const NpyType& t : kTypes)
    if (t.dtype == tensor.dtype()) descr = t.descr;
  if (tensor.dtype() == DType::String)
    return unsupported("cannot write a string tensor as .npy: qflow reads and writes numeric .npy arrays only");
  if (descr.empty())
    return unsupported("cannot write a " + std::string(dtype_name(tensor.dtype())) + " tensor as .npy: NumPy has no such dtype");

  std::string dict = "{'descr': '" + std::string(descr) + "', 'fortran_order': False, 'shape': " +
                     shape_literal(tensor.shape()) + ", }";
  // NumPy pads the header with spaces and a newline so the data starts 64-byte aligned.
  const auto padded = [&](std::size_t prefix) {
    const std::size_t unpadded = prefix + dict.size() + 1;
    return dict + std::string((64 - unpadded % 64) % 64, ' ') + "\n";
  };
  std::string header = padded(10);
  int major = 1;
  if (header.size() > std::numeric_limits<uint16_t>::max()) {
    header = padded(12);
    major = 2;
  }
  std::string out(kMagic);
  out += static_cast<char>(major);
  out += '\0';
  unsigned char length[4];
  if (major == 1) boost::endian::store_little_u16(length, static_cast<uint16_t>(header.size()));
  else boost::endian::store_little_u32(length, static_cast<uint32_t>(header.size()));
  out.append(reinterpret_cast<const char*>(length), major == 1 ? 2 : 4);
  out += header;
  if (tensor.nbytes() > 0) out.append(reinterpret_cast<const char*>(tensor.raw_data()), tensor.nbytes());
  return out;
}

Status write_npy_file(const std::string& path, const Tensor& tensor) {
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, serialize_npy(tensor));
  return write_file_atomic(path, bytes);
}

}  // namespace qflow
