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
constexpr std::array<std::string_view, 21> kIntegerOps = {
    "add",     "average_pool", "concat", "conv2d",  "conv_transpose2d", "dequantize", "global_average_pool",
    "input_convert",
    "layernorm", "lut",        "matmul", "max_pool", "mul",             "quantize",   "requantize",
    "reshape", "resize",       "slice",  "softmax", "sub",              "transpose"};
}  // namespace

bool is_integer_op(std::string_view type) {
  return std::find(kIntegerOps.begin(), kIntegerOps.end(), type) != kIntegerOps.end();
}

bool is_boundary_op(std::string_view type) { return type == "quantize" || type == "dequantize"; }

bool input_convert_params(const Model& model, const Op& op, fx::InputConvertParams& p, std::string* error) {
  const auto fail = [&](const std::string& what) {
    if (error) *error = what;
    return false;
  };
  if (op.inputs.empty() || op.outputs.empty() || op.inputs[0] < 0 || op.outputs[0] < 0 ||
      static_cast<size_t>(op.inputs[0]) >= model.tensors.size() || static_cast<size_t>(op.outputs[0]) >= model.tensors.size())
    return fail("input_convert needs a frame and an output");
  const Tensor& x = model.tensors[static_cast<size_t>(op.inputs[0])];
  const Tensor& y = model.tensors[static_cast<size_t>(op.outputs[0])];
  const std::string format = string_or(op, "format", "");
  if (format == "gray") p.format = fx::PixelFormat::Gray;
  else if (format == "rgb") p.format = fx::PixelFormat::Rgb;
  else if (format == "bgr") p.format = fx::PixelFormat::Bgr;
  else if (format == "yuv444") p.format = fx::PixelFormat::Yuv444;
  else if (format == "nv12") p.format = fx::PixelFormat::Nv12;
  else return fail("format " + quoted_name(format) + " is not gray, rgb, bgr, yuv444 or nv12");
  const std::string layout = string_or(op, "layout", "nhwc");
  if (layout != "nhwc" && layout != "nchw") return fail("layout " + quoted_name(layout) + " is not nhwc or nchw");
  p.nhwc = layout == "nhwc";
  const int64_t convert = int_or(op, "yuv_to_rgb", 0);
  if (convert != 0 && convert != 1) return fail("yuv_to_rgb must be 0 or 1");
  p.yuv_to_rgb = convert == 1;
  if (p.yuv_to_rgb && p.format != fx::PixelFormat::Yuv444 && p.format != fx::PixelFormat::Nv12)
    return fail("yuv_to_rgb needs a yuv444 or nv12 frame");
  const Attribute* channels = find_attribute(op, "channels");
  if (!channels || channels->ints.empty() || channels->ints.size() > 4) return fail("attribute 'channels' needs 1 to 4 ints");
  const int64_t fc = fx::frame_channels(p.format);
  p.channels.clear();
  for (const int64_t c : channels->ints) {
    if (c < 0 || c >= fc) return fail("channel " + std::to_string(c) + " is not a channel of the frame");
    p.channels.push_back(static_cast<int32_t>(c));
  }
  if (x.type != ElemType::u8) return fail("the frame must be u8");
  if (!to_qtype(y.type, p.output.type) || y.type == ElemType::i16 || y.type == ElemType::u16)
    return fail("the output must be i8 or u8");
  p.output.scale = y.quant.scale;
  p.output.zero_point = y.quant.zero_point;
  if (y.shape.size() != 4 || y.shape[1] != static_cast<int64_t>(p.channels.size()))
    return fail("the output must be [N, " + std::to_string(p.channels.size()) + ", H, W], not " + shape_string(y.shape));
  p.batch = y.shape[0];
  p.height = y.shape[2];
  p.width = y.shape[3];
  Shape expected;
  if (p.format == fx::PixelFormat::Nv12) {
    if (p.height % 2 != 0 || p.width % 2 != 0) return fail("nv12 needs an even height and width");
    expected = {p.batch, p.height * 3 / 2, p.width};
  } else if (p.nhwc) {
    expected = {p.batch, p.height, p.width, fc};
  } else {
    expected = {p.batch, fc, p.height, p.width};
  }
  if (x.shape != expected)
    return fail("the frame has shape " + shape_string(x.shape) + ", expected " + shape_string(expected) + " for " + format +
                (p.format == fx::PixelFormat::Nv12 ? std::string() : " " + layout));
  return true;
}

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
