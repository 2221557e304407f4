// DType properties and half-precision conversions.
#include "qflow/ir/dtype.h"

#include <bit>

#include <Eigen/Core>

namespace qflow {

std::size_t dtype_size(DType dtype) {
  switch (dtype) {
    case DType::Float32: case DType::Int32: case DType::UInt32: return 4;
    case DType::Float64: case DType::Int64: case DType::UInt64: return 8;
    case DType::Int16: case DType::UInt16: case DType::Float16: case DType::BFloat16: return 2;
    case DType::Int8: case DType::UInt8: case DType::Bool: return 1;
    case DType::Undefined: case DType::String: return 0;
  }
  return 0;
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::Float32: return "float";
    case DType::UInt8: return "uint8";
    case DType::Int8: return "int8";
    case DType::UInt16: return "uint16";
    case DType::Int16: return "int16";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::Bool: return "bool";
    case DType::Float16: return "float16";
    case DType::Float64: return "double";
    case DType::UInt32: return "uint32";
    case DType::UInt64: return "uint64";
    case DType::BFloat16: return "bfloat16";
    case DType::String: return "string";
    case DType::Undefined: return "undefined";
  }
  return "undefined";
}

DType dtype_from_onnx(int32_t onnx_type) {
  switch (onnx_type) {
    case 1: case 2: case 3: case 4: case 5: case 6: case 7: case 8: case 9: case 10: case 11: case 12: case 13: case 16:
      return static_cast<DType>(onnx_type);
    default:
      return DType::Undefined;
  }
}

bool is_float(DType dtype) {
  return dtype == DType::Float32 || dtype == DType::Float16 || dtype == DType::Float64 || dtype == DType::BFloat16;
}

bool is_integer(DType dtype) {
  switch (dtype) {
    case DType::Int8: case DType::UInt8: case DType::Int16: case DType::UInt16: case DType::Int32:
    case DType::UInt32: case DType::Int64: case DType::UInt64:
      return true;
    default:
      return false;
  }
}

// Eigen's half and bfloat16 round to nearest even, keep infinities and subnormals, and turn
// every NaN into the quiet NaN of its sign (float16 0x7E00, bfloat16 0x7FC0, ONNX's choice).
float half_to_float(uint16_t bits) { return static_cast<float>(std::bit_cast<Eigen::half>(bits)); }

uint16_t float_to_half(float value) { return std::bit_cast<uint16_t>(Eigen::half(value)); }

float bfloat16_to_float(uint16_t bits) { return static_cast<float>(std::bit_cast<Eigen::bfloat16>(bits)); }

uint16_t float_to_bfloat16(float value) { return std::bit_cast<uint16_t>(Eigen::bfloat16(value)); }

}  // namespace qflow
