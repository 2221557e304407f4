// Tensor: a dtype, a static shape and contiguous row-major storage shared between copies.
#pragma once

#include <cstddef>
#include <cstdint>
#include <memory>
#include <span>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/dtype.h"

namespace qflow {

using Shape = std::vector<int64_t>;

// Number of elements of a shape; nullopt-like -1 when a dimension is negative or the
// product overflows int64 (callers treat -1 as "refuse").
int64_t shape_numel(const Shape& shape);
std::string shape_to_string(const Shape& shape);  // "[1, 3, 224, 224]"

// Copies share storage (cheap, like a handle); clone() makes an independent copy.
// Storage is 64-byte aligned so kernels may use aligned vector loads.
class Tensor {
 public:
  Tensor() = default;
  // Zero-filled tensor. Precondition: the shape is valid (see make()).
  Tensor(DType dtype, Shape shape);

  // Checked constructor for sizes that come from files or users: refuses negative
  // dimensions, overflow and element counts above `max_bytes`.
  static Expected<Tensor> make(DType dtype, Shape shape, int64_t max_bytes = kDefaultMaxBytes);
  // As make(), but the contents are unspecified: for buffers the writer fills completely.
  static Expected<Tensor> make_uninitialized(DType dtype, Shape shape, int64_t max_bytes = kDefaultMaxBytes);
  // Tensor holding a copy of `values` with the given shape (sizes must agree).
  template <typename T>
  static Tensor from_vector(Shape shape, const std::vector<T>& values);
  template <typename T>
  static Tensor scalar(T value) { return from_vector<T>({}, {value}); }
  // A String tensor holding `values` (sizes must agree).
  static Tensor from_strings(Shape shape, std::vector<std::string> values);

  static constexpr int64_t kDefaultMaxBytes = int64_t{1} << 34;  // 16 GiB

  DType dtype() const { return dtype_; }
  const Shape& shape() const { return shape_; }
  int64_t rank() const { return static_cast<int64_t>(shape_.size()); }
  int64_t dim(int64_t axis) const { return shape_[static_cast<std::size_t>(axis)]; }
  int64_t numel() const { return numel_; }
  std::size_t nbytes() const { return static_cast<std::size_t>(numel_) * dtype_size(dtype_); }
  bool empty() const { return dtype_ == DType::Undefined; }
  // Number of tensors sharing this storage (0 for an empty tensor).
  long use_count() const { return data_.use_count(); }

  std::byte* raw_data() { return data_.get(); }
  const std::byte* raw_data() const { return data_.get(); }

  // Typed views; the element type must match dtype() (Float16/BFloat16 read as uint16_t).
  template <typename T> T* data();
  template <typename T> const T* data() const;
  template <typename T> std::span<T> span() { return {data<T>(), static_cast<std::size_t>(numel_)}; }
  template <typename T> std::span<const T> span() const { return {data<T>(), static_cast<std::size_t>(numel_)}; }

  // The elements of a String tensor (empty for other dtypes). They live beside the byte
  // storage, which is empty for strings, so code that moves bytes never touches them.
  std::span<std::string> strings() { return strings_ ? std::span<std::string>(*strings_) : std::span<std::string>(); }
  std::span<const std::string> strings() const {
    return strings_ ? std::span<const std::string>(*strings_) : std::span<const std::string>();
  }

  // Same storage, new shape with the same element count.
  Tensor reshaped(Shape shape) const;
  Tensor clone() const;
  // Element-wise conversion to another dtype (ONNX Cast semantics). Numbers become their
  // shortest round-trip text; text becomes numbers as written ("NaN", "INF", "+INF", "-INF"
  // in any case included), text that is no number giving NaN (0 for integers).
  Tensor cast(DType to) const;
  // Values as doubles / int64 regardless of dtype; for small tensors (shapes, scalars).
  std::vector<double> to_doubles() const;
  std::vector<int64_t> to_int64s() const;

  // Same dtype, shape and bytes.
  bool bitwise_equal(const Tensor& other) const;

 private:
  DType dtype_ = DType::Undefined;
  Shape shape_;
  int64_t numel_ = 0;
  std::shared_ptr<std::byte[]> data_;
  std::shared_ptr<std::vector<std::string>> strings_;  // String tensors only

  static Expected<Tensor> checked(DType dtype, Shape shape, int64_t max_bytes, bool zero);
  Tensor(DType dtype, Shape shape, bool zero);
};

template <typename T>
T* Tensor::data() {
  return reinterpret_cast<T*>(data_.get());
}
template <typename T>
const T* Tensor::data() const {
  return reinterpret_cast<const T*>(data_.get());
}

template <typename T>
Tensor Tensor::from_vector(Shape shape, const std::vector<T>& values) {
  DType dtype = dtype_of_v<T>;
  Tensor tensor(dtype, std::move(shape));
  T* out = tensor.data<T>();
  for (std::size_t i = 0; i < values.size() && static_cast<int64_t>(i) < tensor.numel(); ++i) out[i] = values[i];
  return tensor;
}

}  // namespace qflow
