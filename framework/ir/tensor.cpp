// Tensor storage, checked construction and dtype conversion.
#include "qflow/ir/tensor.h"

#include <algorithm>
#include <charconv>
#include <cmath>
#include <cstring>
#include <limits>
#include <new>
#include <type_traits>

#include "framework/core/memory_limit.h"

namespace qflow {

int64_t shape_numel(const Shape& shape) {
  int64_t n = 1;
  for (int64_t d : shape) {
    if (d < 0) return -1;
    if (d != 0 && n > std::numeric_limits<int64_t>::max() / d) return -1;
    n *= d;
  }
  return n;
}

std::string shape_to_string(const Shape& shape) {
  std::string out = "[";
  for (std::size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += std::to_string(shape[i]);
  }
  return out + "]";
}

namespace {
std::shared_ptr<std::byte[]> allocate(std::size_t bytes, bool zero) {
  // At least one byte so data() is never null; 64-byte alignment for vector loads.
  const std::size_t size = bytes == 0 ? 64 : (bytes + 63) / 64 * 64;
  auto* raw = static_cast<std::byte*>(::operator new[](size, std::align_val_t{64}));
  if (zero) std::memset(raw, 0, size);
  return std::shared_ptr<std::byte[]>(raw, [](std::byte* p) { ::operator delete[](p, std::align_val_t{64}); });
}
}  // namespace

Tensor::Tensor(DType dtype, Shape shape) : Tensor(dtype, std::move(shape), true) {}

Tensor::Tensor(DType dtype, Shape shape, bool zero) : dtype_(dtype), shape_(std::move(shape)) {
  numel_ = shape_numel(shape_);
  if (numel_ < 0) numel_ = 0;
  data_ = allocate(nbytes(), zero);
  if (dtype_ == DType::String) strings_ = std::make_shared<std::vector<std::string>>(static_cast<std::size_t>(numel_));
}

Tensor Tensor::from_strings(Shape shape, std::vector<std::string> values) {
  Tensor tensor(DType::String, std::move(shape));
  values.resize(static_cast<std::size_t>(tensor.numel_));
  *tensor.strings_ = std::move(values);
  return tensor;
}

Expected<Tensor> Tensor::make(DType dtype, Shape shape, int64_t max_bytes) {
  return checked(dtype, std::move(shape), max_bytes, true);
}

Expected<Tensor> Tensor::make_uninitialized(DType dtype, Shape shape, int64_t max_bytes) {
  return checked(dtype, std::move(shape), max_bytes, false);
}

Expected<Tensor> Tensor::checked(DType dtype, Shape shape, int64_t max_bytes, bool zero) {
  if (dtype == DType::Undefined) return invalid_input("tensor element type is undefined");
  for (int64_t d : shape) {
    if (d < 0) return invalid_input("tensor shape " + shape_to_string(shape) + " has a negative dimension");
  }
  const int64_t n = shape_numel(shape);
  const int64_t size = static_cast<int64_t>(dtype_size(dtype));
  if (n < 0 || (n > 0 && size > 0 && n > std::numeric_limits<int64_t>::max() / size)) {
    return invalid_input("tensor shape " + shape_to_string(shape) + " overflows 64-bit element count");
  }
  // The process-wide --max-memory bounds every checked allocation, so sizes computed at run
  // time (kernel outputs, arena buffers) are refused before allocating, like sizes from files.
  const int64_t limit = memory_limit();
  if (n * size > limit && limit <= max_bytes) {
    return invalid_input("tensor shape " + shape_to_string(shape) + " of " + std::string(dtype_name(dtype)) +
                         " needs " + std::to_string(n * size) + " bytes, more than the memory limit of " +
                         std::to_string(limit) + " bytes (--max-memory)");
  }
  if (n * size > max_bytes) {
    return invalid_input("tensor shape " + shape_to_string(shape) + " needs " + std::to_string(n * size) +
                         " bytes, more than the limit of " + std::to_string(max_bytes));
  }
  return Tensor(dtype, std::move(shape), zero);
}

Tensor Tensor::reshaped(Shape shape) const {
  Tensor out = *this;
  out.shape_ = std::move(shape);
  return out;
}

Tensor Tensor::clone() const {
  Tensor out(dtype_, shape_);
  if (nbytes()) std::memcpy(out.raw_data(), raw_data(), nbytes());
  if (strings_) *out.strings_ = *strings_;
  return out;
}

namespace {
// "NaN", "INF", "+INF", "-INF" (any case) and decimal or scientific numbers; NaN otherwise.
template <typename F>
F parse_number(const std::string& text) {
  std::string_view v = text;
  while (!v.empty() && (v.front() == ' ' || v.front() == '\t')) v.remove_prefix(1);
  while (!v.empty() && (v.back() == ' ' || v.back() == '\t')) v.remove_suffix(1);
  if (!v.empty() && v.front() == '+') v.remove_prefix(1);
  F value = std::numeric_limits<F>::quiet_NaN();
  const auto [end, ec] = std::from_chars(v.data(), v.data() + v.size(), value);
  if (ec != std::errc() || end != v.data() + v.size()) return std::numeric_limits<F>::quiet_NaN();
  return value;
}

double text_to_double(const std::string& text) { return parse_number<double>(text); }

// Shortest text that reads back to the same value, as NumPy prints float32 and float64.
template <typename F>
std::string number_text(F value) {
  char buffer[64];
  const auto [end, ec] = std::to_chars(buffer, buffer + sizeof buffer, value);
  return ec == std::errc() ? std::string(buffer, end) : std::string();
}

// Reads element i of any dtype as double (float16/bfloat16 widened exactly).
double load_as_double(const Tensor& t, int64_t i) {
  const std::byte* p = t.raw_data();
  switch (t.dtype()) {
    case DType::Float32: return reinterpret_cast<const float*>(p)[i];
    case DType::Float64: return reinterpret_cast<const double*>(p)[i];
    case DType::Float16: return half_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::BFloat16: return bfloat16_to_float(reinterpret_cast<const uint16_t*>(p)[i]);
    case DType::Int8: return reinterpret_cast<const int8_t*>(p)[i];
    case DType::UInt8: return reinterpret_cast<const uint8_t*>(p)[i];
    case DType::Int16: return reinterpret_cast<const int16_t*>(p)[i];
    case DType::UInt16: return reinterpret_cast<const uint16_t*>(p)[i];
    case DType::Int32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::UInt32: return reinterpret_cast<const uint32_t*>(p)[i];
    case DType::Int64: return static_cast<double>(reinterpret_cast<const int64_t*>(p)[i]);
    case DType::UInt64: return static_cast<double>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::Bool: return reinterpret_cast<const uint8_t*>(p)[i] ? 1.0 : 0.0;
    case DType::String: return text_to_double(t.strings()[static_cast<std::size_t>(i)]);
    case DType::Undefined: return 0.0;
  }
  return 0.0;
}

int64_t load_as_int64(const Tensor& t, int64_t i) {
  const std::byte* p = t.raw_data();
  switch (t.dtype()) {
    case DType::Int64: return reinterpret_cast<const int64_t*>(p)[i];
    case DType::UInt64: return static_cast<int64_t>(reinterpret_cast<const uint64_t*>(p)[i]);
    case DType::Int32: return reinterpret_cast<const int32_t*>(p)[i];
    case DType::UInt32: return reinterpret_cast<const uint32_t*>(p)[i];
    default: {
      const double v = load_as_double(t, i);
      if (std::isnan(v)) return 0;
      if (v >= 9.2233720368547758e18) return std::numeric_limits<int64_t>::max();
      if (v <= -9.2233720368547758e18) return std::numeric_limits<int64_t>::min();
      return static_cast<int64_t>(v);
    }
  }
}

// Float -> integer as a C cast would, but defined for out-of-range and NaN values
// (saturating, NaN -> 0), which is what ONNX Runtime does on x86 for the common cases.
template <typename T>
T float_to_int(double v) {
  if (std::isnan(v)) return T{0};
  const double lo = static_cast<double>(std::numeric_limits<T>::lowest());
  const double hi = static_cast<double>(std::numeric_limits<T>::max());
  if (v <= lo) return std::numeric_limits<T>::lowest();
  if (v >= hi) return std::numeric_limits<T>::max();
  return static_cast<T>(v);
}

// A plain element loop from source type S: for a float destination and these sources the
// value converts exactly or rounds once, as through double.
template <typename T, typename S>
void store_direct(Tensor& out, const Tensor& in) {
  const S* src = in.data<S>();
  T* dst = out.data<T>();
  for (int64_t i = 0; i < in.numel(); ++i) dst[i] = static_cast<T>(src[i]);
}

template <typename T>
void store_from(Tensor& out, const Tensor& in) {
  if constexpr (std::is_floating_point_v<T>) {
    switch (in.dtype()) {
      case DType::Float16: {
        const uint16_t* src = in.data<uint16_t>();
        for (int64_t i = 0; i < in.numel(); ++i) out.data<T>()[i] = static_cast<T>(half_to_float(src[i]));
        return;
      }
      case DType::BFloat16: {
        const uint16_t* src = in.data<uint16_t>();
        for (int64_t i = 0; i < in.numel(); ++i) out.data<T>()[i] = static_cast<T>(bfloat16_to_float(src[i]));
        return;
      }
      case DType::Float32: return store_direct<T, float>(out, in);
      case DType::Float64: return store_direct<T, double>(out, in);
      case DType::Int32: return store_direct<T, int32_t>(out, in);
      case DType::Int16: return store_direct<T, int16_t>(out, in);
      case DType::Int8: return store_direct<T, int8_t>(out, in);
      case DType::UInt8: return store_direct<T, uint8_t>(out, in);
      default: break;
    }
  }
  T* dst = out.data<T>();
  const int64_t n = in.numel();
  const bool src_integer = is_integer(in.dtype()) || in.dtype() == DType::Bool;
  for (int64_t i = 0; i < n; ++i) {
    if constexpr (std::is_same_v<T, bool>) {
      dst[i] = load_as_double(in, i) != 0.0;
    } else if constexpr (std::is_floating_point_v<T>) {
      if (in.dtype() == DType::Int64 || in.dtype() == DType::UInt64)
        dst[i] = static_cast<T>(load_as_int64(in, i));
      else
        dst[i] = static_cast<T>(load_as_double(in, i));
    } else if (src_integer) {
      // Integer narrowing wraps (two's complement), as in ONNX Runtime.
      dst[i] = static_cast<T>(load_as_int64(in, i));
    } else {
      dst[i] = float_to_int<T>(load_as_double(in, i));
    }
  }
}
}  // namespace

Tensor Tensor::cast(DType to) const {
  if (to == dtype_) return clone();
  if (to == DType::String) {
    Tensor out(DType::String, shape_);
    std::vector<std::string>& text = *out.strings_;
    for (int64_t i = 0; i < numel_; ++i) {
      std::string& t = text[static_cast<std::size_t>(i)];
      switch (dtype_) {
        case DType::Float32: t = number_text(data<float>()[i]); break;
        case DType::Float16: case DType::BFloat16: t = number_text(static_cast<float>(load_as_double(*this, i))); break;
        case DType::Int64: t = std::to_string(data<int64_t>()[i]); break;
        case DType::UInt64: t = std::to_string(data<uint64_t>()[i]); break;
        default:
          t = is_integer(dtype_) || dtype_ == DType::Bool ? std::to_string(load_as_int64(*this, i))
                                                          : number_text(load_as_double(*this, i));
      }
    }
    return out;
  }
  if (dtype_ == DType::String && to == DType::Float32) {
    Tensor out(DType::Float32, shape_);
    for (int64_t i = 0; i < numel_; ++i) out.data<float>()[i] = parse_number<float>(strings()[static_cast<std::size_t>(i)]);
    return out;
  }
  // Every branch writes every element, so no zero fill where the checked allocation takes it
  // (not for an undefined type, or beyond --max-memory, which the plain constructor ignores).
  Expected<Tensor> raw = make_uninitialized(to, shape_, std::numeric_limits<int64_t>::max());
  Tensor out = raw ? std::move(raw).value() : Tensor(to, shape_);
  switch (to) {
    case DType::Float32: store_from<float>(out, *this); break;
    case DType::Float64: store_from<double>(out, *this); break;
    case DType::Int8: store_from<int8_t>(out, *this); break;
    case DType::UInt8: store_from<uint8_t>(out, *this); break;
    case DType::Int16: store_from<int16_t>(out, *this); break;
    case DType::UInt16: store_from<uint16_t>(out, *this); break;
    case DType::Int32: store_from<int32_t>(out, *this); break;
    case DType::UInt32: store_from<uint32_t>(out, *this); break;
    case DType::Int64: store_from<int64_t>(out, *this); break;
    case DType::UInt64: store_from<uint64_t>(out, *this); break;
    case DType::Bool: store_from<bool>(out, *this); break;
    case DType::Float16: {
      uint16_t* dst = out.data<uint16_t>();
      if (dtype_ == DType::Float32)
        for (int64_t i = 0; i < numel_; ++i) dst[i] = float_to_half(data<float>()[i]);
      else
        for (int64_t i = 0; i < numel_; ++i) dst[i] = float_to_half(static_cast<float>(load_as_double(*this, i)));
      break;
    }
    case DType::BFloat16: {
      uint16_t* dst = out.data<uint16_t>();
      if (dtype_ == DType::Float32)
        for (int64_t i = 0; i < numel_; ++i) dst[i] = float_to_bfloat16(data<float>()[i]);
      else
        for (int64_t i = 0; i < numel_; ++i) dst[i] = float_to_bfloat16(static_cast<float>(load_as_double(*this, i)));
      break;
    }
    case DType::String: case DType::Undefined: break;
  }
  return out;
}

std::vector<double> Tensor::to_doubles() const {
  std::vector<double> out(static_cast<std::size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[static_cast<std::size_t>(i)] = load_as_double(*this, i);
  return out;
}

std::vector<int64_t> Tensor::to_int64s() const {
  std::vector<int64_t> out(static_cast<std::size_t>(numel_));
  for (int64_t i = 0; i < numel_; ++i) out[static_cast<std::size_t>(i)] = load_as_int64(*this, i);
  return out;
}

bool Tensor::bitwise_equal(const Tensor& other) const {
  if (dtype_ != other.dtype_ || shape_ != other.shape_) return false;
  if (dtype_ == DType::String) return std::equal(strings().begin(), strings().end(), other.strings().begin());
  return nbytes() == 0 || std::memcmp(raw_data(), other.raw_data(), nbytes()) == 0;
}

}  // namespace qflow
