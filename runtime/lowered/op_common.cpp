// Helpers shared by the lowered-model validator, executor and kernels.
#include "lowered/op_common.h"

#include <algorithm>
#include <array>

namespace qflow::lowered::detail {

namespace {
std::string printable(const std::string& text, size_t limit) {
  std::string s = text.size() > limit ? text.substr(0, limit) + "..." : text;
  for (char& ch : s)
    if (static_cast<unsigned char>(ch) < 0x20 || ch == 0x7f) ch = '?';
  return s;
}
}  // namespace

std::string quoted_name(const std::string& name) {
  std::string s(1, '\'');
  s += printable(name, 200);
  s += '\'';
  return s;
}
std::string one_line(const std::string& message) { return printable(message, 2000); }

std::string op_label(const Op& op) { return printable(op.type, 200) + " " + quoted_name(op.name); }

std::string shape_string(const Shape& shape) {
  std::string s = "[";
  for (size_t i = 0; i < shape.size(); ++i) s += (i ? ", " : "") + std::to_string(shape[i]);
  return s + "]";
}

int64_t element_count(const Shape& shape) {
  for (const int64_t d : shape)
    if (d < 0) return -1;
  for (const int64_t d : shape)
    if (d == 0) return 0;
  int64_t n = 1;
  for (const int64_t d : shape) {
    if (n > (kMaxElements - 1) / d) return -1;
    n *= d;
  }
  return n;
}

const Attribute* find_attribute(const Op& op, std::string_view name) {
  for (const Attribute& a : op.attributes)
    if (a.name == name) return &a;
  return nullptr;
}

std::vector<int64_t> ints_or(const Op& op, std::string_view name, std::vector<int64_t> fallback) {
  const Attribute* a = find_attribute(op, name);
  return a ? a->ints : std::move(fallback);
}

int64_t int_or(const Op& op, std::string_view name, int64_t fallback) {
  const Attribute* a = find_attribute(op, name);
  return a && !a->ints.empty() ? a->ints[0] : fallback;
}

double float_or(const Op& op, std::string_view name, double fallback) {
  const Attribute* a = find_attribute(op, name);
  if (a && !a->floats.empty()) return a->floats[0];
  if (a && !a->ints.empty()) return static_cast<double>(a->ints[0]);
  return fallback;
}

std::string string_or(const Op& op, std::string_view name, std::string fallback) {
  const Attribute* a = find_attribute(op, name);
  return a && !a->strings.empty() ? a->strings[0] : std::move(fallback);
}

namespace {
constexpr std::array<std::string_view, 20> kIntegerOps = {
    "add",     "average_pool", "concat", "conv2d",  "conv_transpose2d", "dequantize", "global_average_pool",
    "layernorm", "lut",        "matmul", "max_pool", "mul",             "quantize",   "requantize",
    "reshape", "resize",       "slice",  "softmax", "sub",              "transpose"};
}  // namespace

bool is_integer_op(std::string_view type) {
  return std::find(kIntegerOps.begin(), kIntegerOps.end(), type) != kIntegerOps.end();
}

bool is_boundary_op(std::string_view type) { return type == "quantize" || type == "dequantize"; }

bool to_qtype(ElemType type, fx::QType& out) {
  switch (type) {
    case ElemType::i8: out = fx::QType::Int8; return true;
    case ElemType::u8: out = fx::QType::UInt8; return true;
    case ElemType::i16: out = fx::QType::Int16; return true;
    case ElemType::u16: out = fx::QType::UInt16; return true;
    default: return false;
  }
}

fx::QParams qparams(const Tensor& t) {
  fx::QParams p;
  p.scale = t.quant.scale;
  p.zero_point = t.quant.zero_point;
  to_qtype(t.type, p.type);
  return p;
}

bool broadcast_shape(const Shape& a, const Shape& b, Shape& out) {
  const size_t rank = std::max(a.size(), b.size());
  Shape r(rank);
  for (size_t i = 0; i < rank; ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    if (da != db && da != 1 && db != 1) return false;
    r[rank - 1 - i] = da == 1 ? db : da;
  }
  out = std::move(r);
  return true;
}

bool transpose_shape(const Shape& in, const std::vector<int64_t>& perm, Shape& out) {
  if (perm.size() != in.size()) return false;
  std::vector<char> seen(in.size(), 0);
  Shape r(in.size());
  for (size_t i = 0; i < perm.size(); ++i) {
    if (perm[i] < 0 || perm[i] >= static_cast<int64_t>(in.size()) || seen[static_cast<size_t>(perm[i])]) return false;
    seen[static_cast<size_t>(perm[i])] = 1;
    r[i] = in[static_cast<size_t>(perm[i])];
  }
  out = std::move(r);
  return true;
}

}  // namespace qflow::lowered::detail
