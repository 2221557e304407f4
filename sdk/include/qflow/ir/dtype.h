// DType: the element types a qflow Tensor can hold, with ONNX's numbering for interchange.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string_view>

namespace qflow {

// Values equal ONNX TensorProto.DataType so conversion is a cast; Undefined = 0.
enum class DType : int32_t {
  Undefined = 0,
  Float32 = 1,
  UInt8 = 2,
  Int8 = 3,
  UInt16 = 4,
  Int16 = 5,
  Int32 = 6,
  Int64 = 7,
  String = 8,  // elements kept beside the byte storage (Tensor::strings()); dtype_size 0
  Bool = 9,
  Float16 = 10,
  Float64 = 11,
  UInt32 = 12,
  UInt64 = 13,
  BFloat16 = 16,
};

// Bytes per element of the byte storage; 0 for Undefined and String.
std::size_t dtype_size(DType dtype);
// Lower-case name as ONNX spells it ("float", "int8", "float16", ...).
std::string_view dtype_name(DType dtype);
// Parses an ONNX TensorProto.DataType number; Undefined when qflow cannot hold it.
DType dtype_from_onnx(int32_t onnx_type);
bool is_float(DType dtype);    // Float32, Float16, Float64, BFloat16
bool is_integer(DType dtype);  // signed or unsigned integer types, not Bool

// Maps a C++ element type to its DType at compile time.
template <typename T> struct dtype_of;
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <> struct dtype_of<int8_t> { static constexpr DType value = DType::Int8; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int16_t> { static constexpr DType value = DType::Int16; };
template <> struct dtype_of<uint16_t> { static constexpr DType value = DType::UInt16; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<uint32_t> { static constexpr DType value = DType::UInt32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<uint64_t> { static constexpr DType value = DType::UInt64; };
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <typename T> inline constexpr DType dtype_of_v = dtype_of<T>::value;

// Half-precision conversions (IEEE binary16 and bfloat16), round to nearest even.
float half_to_float(uint16_t bits);
uint16_t float_to_half(float value);
float bfloat16_to_float(uint16_t bits);
uint16_t float_to_bfloat16(float value);

}  // namespace qflow
