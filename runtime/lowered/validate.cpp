// validate(): the checks on a lowered model that need no data (docs/lowered-model.md).
#include <algorithm>
#include <cmath>
#include <exception>
#include <new>
#include <optional>

#include "qflow/runtime/cpu_ops.h"
#include "qflow/runtime/executor.h"
#include "lowered/op_common.h"

namespace qflow::lowered {
namespace {

using detail::find_attribute;
using detail::op_label;

std::string tensor_label(const Model& m, int32_t index) {
  return "tensor " + detail::quoted_name(m.tensors[static_cast<size_t>(index)].name);
}

// Inputs that may be -1: the bias of conv2d, conv_transpose2d and matmul; for CPU ops every
// input but the first (ONNX optional inputs). CPU ops may also leave outputs absent (-1) where
// cpu_op_output_optional() allows it.
bool optional_input(const Op& op, size_t position) {
  if (op.type == "conv2d" || op.type == "conv_transpose2d" || op.type == "matmul") return position == 2;
  return op.type.starts_with("cpu.") && position > 0;
}

class OpChecker {
 public:
  OpChecker(const Model& model, const Op& op) : m_(model), op_(op) {}

  std::optional<std::string> check() {
    const std::string& t = op_.type;
    if (t == "quantize" || t == "dequantize") {
      if (auto e = counts(1, 1, 1)) return e;
      const bool q = t == "quantize";
      if (q && (in(0).type != ElemType::f32 || !is_quantized(out(0).type)))
        return fail("quantize takes an f32 tensor to a quantized (i8, u8, i16, u16) one");
      if (!q && (!is_quantized(in(0).type) || out(0).type != ElemType::f32))
        return fail("dequantize takes a quantized (i8, u8, i16, u16) tensor to an f32 one");
      return same_count(0);
    }
    if (t == "input_convert") {
      if (auto e = counts(2, 2, 1)) return e;
      if (auto e = table(1)) return e;
      fx::InputConvertParams p;
      std::string error;
      if (!detail::input_convert_params(m_, op_, p, &error)) return fail(error);
      if (detail::element_count(in(1).shape) != static_cast<int64_t>(p.channels.size()) * 256)
        return fail("table must have 256 entries per output channel");
      return std::nullopt;
    }
    if (t == "conv2d" || t == "conv_transpose2d") {
      if (auto e = counts(2, 3, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (auto e = weights(1, 4)) return e;
      if (auto e = bias(2)) return e;
      if (in(0).shape.size() != 4 || out(0).shape.size() != 4) return fail("x and y must be 4-D (NCHW)");
      if (auto e = ints("group", 1, false)) return e;
      if (auto e = ints("strides", 2, false)) return e;
      if (auto e = ints("pads", 4, false)) return e;
      if (auto e = ints("dilations", 2, false)) return e;
      if (t == "conv_transpose2d")
        if (auto e = ints("output_padding", 2, false)) return e;
      if (auto e = multipliers("multiplier")) return e;
      return clamp();
    }
    if (t == "matmul") {
      if (auto e = counts(2, 3, 1)) return e;
      if (auto e = quantized_io({0, 1})) return e;
      if (in(1).constant && in(1).type != ElemType::i8 && in(1).type != ElemType::i16)
        return fail("constant b must be i8 or i16");
      if (in(1).constant && in(1).quant.zero_point != 0) return fail("constant b (weights) must have zero point 0");
      if (auto e = bias(2)) return e;
      if (in(0).shape.size() < 2 || in(1).shape.size() < 2) return fail("a and b must have at least 2 dimensions");
      if (auto e = ints("b_transposed", 1, false)) return e;
      if (auto e = multipliers("multiplier")) return e;
      return clamp();
    }
    if (t == "add" || t == "sub") {
      if (auto e = counts(2, 2, 1)) return e;
      if (auto e = quantized_io({0, 1})) return e;
      if (auto e = ints("left_shift", 1, true)) return e;
      const int64_t ls = find_attribute(op_, "left_shift")->ints[0];
      if (ls < 0 || ls > 24) return fail("left_shift must be in [0, 24]");
      for (const char* name : {"a_multiplier", "b_multiplier", "output_multiplier"})
        if (auto e = pair_multiplier(name)) return e;
      return clamp();
    }
    if (t == "mul" || t == "requantize") {
      if (auto e = counts(t == "mul" ? 2 : 1, t == "mul" ? 2 : 1, 1)) return e;
      if (auto e = quantized_io(t == "mul" ? std::vector<size_t>{0, 1} : std::vector<size_t>{0})) return e;
      if (auto e = pair_multiplier("multiplier")) return e;
      if (t == "requantize")
        if (auto e = same_count(0)) return e;
      return clamp();
    }
    if (t == "concat") {
      if (op_.inputs.empty()) return fail("needs at least one input");
      if (auto e = counts(1, op_.inputs.size(), 1)) return e;
      std::vector<size_t> all(op_.inputs.size());
      for (size_t i = 0; i < all.size(); ++i) all[i] = i;
      if (auto e = quantized_io(all)) return e;
      if (auto e = ints("axis", 1, true)) return e;
      const int64_t axis = find_attribute(op_, "axis")->ints[0];
      if (axis < 0 || axis >= static_cast<int64_t>(out(0).shape.size()))
        return fail("axis " + std::to_string(axis) + " is outside the output's rank");
      return std::nullopt;
    }
    if (t == "max_pool" || t == "average_pool") {
      if (auto e = counts(1, 1, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (in(0).shape.size() != 4 || out(0).shape.size() != 4) return fail("x and y must be 4-D (NCHW)");
      if (auto e = ints("kernel", 2, true)) return e;
      if (auto e = ints("strides", 2, false)) return e;
      if (auto e = ints("pads", 4, false)) return e;
      if (auto e = ints("dilations", 2, false)) return e;
      return ints("count_include_pad", 1, false);
    }
    if (t == "global_average_pool") {
      if (auto e = counts(1, 1, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (in(0).shape.size() != 4 || out(0).shape.size() != 4) return fail("x and y must be 4-D (NCHW)");
      return std::nullopt;
    }
    if (t == "resize") {
      if (auto e = counts(1, 1, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (in(0).type != out(0).type || in(0).quant != out(0).quant) return fail("x and y must have the same type and quant");
      const Attribute* mode = find_attribute(op_, "mode");
      if (!mode || mode->strings.size() != 1) return fail("missing string attribute 'mode'");
      if (mode->strings[0] != "nearest" && mode->strings[0] != "linear")
        return fail("mode '" + mode->strings[0] + "' is not nearest or linear");
      const std::string cm = detail::string_or(op_, "coordinate_mode", "half_pixel");
      if (cm != "asymmetric" && cm != "half_pixel" && cm != "align_corners")
        return fail("unknown coordinate_mode '" + cm + "'");
      const std::string nm = detail::string_or(op_, "nearest_mode", "round_prefer_floor");
      if (nm != "round_prefer_floor" && nm != "round_prefer_ceil" && nm != "floor" && nm != "ceil")
        return fail("unknown nearest_mode '" + nm + "'");
      if (in(0).shape.size() != 4 || out(0).shape.size() != 4) return fail("x and y must be 4-D (NCHW)");
      return std::nullopt;
    }
    if (t == "lut") {
      if (auto e = counts(2, 2, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (auto e = table(1)) return e;
      if (auto e = ints("segment_bits", 1, false)) return e;
      return same_count(0);
    }
    if (t == "softmax") {
      if (auto e = counts(2, 2, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (auto e = table(1)) return e;
      if (static_cast<size_t>(detail::element_count(in(1).shape)) != static_cast<size_t>(fx::kSoftmaxEntries))
        return fail("exp_table must have " + std::to_string(fx::kSoftmaxEntries) + " entries");
      if (auto e = ints("segment_bits", 1, true)) return e;
      if (auto e = pair_multiplier("output_multiplier")) return e;
      return same_count(0);
    }
    if (t == "layernorm") {
      if (auto e = counts(3, 3, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (auto e = table(1)) return e;
      if (auto e = table(2)) return e;
      if (auto e = ints("epsilon", 1, true)) return e;
      if (auto e = pair_multiplier("output_multiplier")) return e;
      return same_count(0);
    }
    if (t == "reshape" || t == "transpose" || t == "slice") {
      if (auto e = counts(1, 1, 1)) return e;
      if (auto e = quantized_io({0})) return e;
      if (in(0).type != out(0).type || in(0).quant != out(0).quant) return fail("x and y must have the same type and quant");
      if (t == "reshape") return same_count(0);
      if (t == "transpose") {
        if (auto e = ints("perm", static_cast<int64_t>(in(0).shape.size()), true)) return e;
        return std::nullopt;
      }
      const Attribute* starts = find_attribute(op_, "starts");
      const Attribute* ends = find_attribute(op_, "ends");
      if (!starts) return fail("missing attribute 'starts'");
      if (!ends) return fail("missing attribute 'ends'");
      const auto n = static_cast<int64_t>(starts->ints.size());
      if (auto e = ints("ends", n, true)) return e;
      if (auto e = ints("axes", n, false)) return e;
      return ints("steps", n, false);
    }
    return fail("unknown op type");  // not reached: the caller checks the type first
  }

 private:
  const Tensor& in(size_t i) const { return m_.tensors[static_cast<size_t>(op_.inputs[i])]; }
  const Tensor& out(size_t i) const { return m_.tensors[static_cast<size_t>(op_.outputs[i])]; }
  std::optional<std::string> fail(const std::string& what) const { return op_label(op_) + ": " + what; }

  std::optional<std::string> counts(size_t min_in, size_t max_in, size_t outs) const {
    if (op_.inputs.size() < min_in || op_.inputs.size() > max_in)
      return fail("has " + std::to_string(op_.inputs.size()) + " inputs, expected " +
                  (min_in == max_in ? std::to_string(min_in) : std::to_string(min_in) + " to " + std::to_string(max_in)));
    if (op_.outputs.size() != outs)
      return fail("has " + std::to_string(op_.outputs.size()) + " outputs, expected " + std::to_string(outs));
    for (size_t i = 0; i < op_.inputs.size(); ++i)
      if (op_.inputs[i] < 0 && !optional_input(op_, i)) return fail("input " + std::to_string(i) + " is required");
    return std::nullopt;
  }

  std::optional<std::string> quantized_io(const std::vector<size_t>& inputs) const {
    for (const size_t i : inputs)
      if (!is_quantized(in(i).type)) return fail("input " + std::to_string(i) + " must be quantized (i8, u8, i16, u16)");
    if (!is_quantized(out(0).type)) return fail("the output must be quantized (i8, u8, i16, u16)");
    return std::nullopt;
  }

  std::optional<std::string> same_count(size_t input) const {
    if (detail::element_count(in(input).shape) != detail::element_count(out(0).shape))
      return fail("input shape " + detail::shape_string(in(input).shape) + " and output shape " +
                  detail::shape_string(out(0).shape) + " differ in element count");
    return std::nullopt;
  }

  std::optional<std::string> weights(size_t i, size_t rank) const {
    const Tensor& w = in(i);
    if (!w.constant || (w.type != ElemType::i8 && w.type != ElemType::i16)) return fail("weights must be a constant i8 or i16 tensor");
    if (w.shape.size() != rank) return fail("weights must have " + std::to_string(rank) + " dimensions");
    if (w.quant.zero_point != 0) return fail("weights must have zero point 0");
    return std::nullopt;
  }

  std::optional<std::string> bias(size_t i) const {
    if (op_.inputs.size() <= i || op_.inputs[i] < 0) return std::nullopt;
    const Tensor& b = in(i);
    if (!b.constant || b.type != ElemType::i32 || b.shape.size() != 1) return fail("bias must be a constant 1-D i32 tensor");
    return std::nullopt;
  }

  std::optional<std::string> table(size_t i) const {
    const Tensor& b = in(i);
    if (!b.constant || b.type != ElemType::i32) return fail("input " + std::to_string(i) + " must be a constant i32 tensor");
    return std::nullopt;
  }

  // An ints attribute of `length` values (any length >= 1 when length < 0).
  std::optional<std::string> ints(const char* name, int64_t length, bool required) const {
    const Attribute* a = find_attribute(op_, name);
    if (!a) return required ? fail(std::string("missing attribute '") + name + "'") : std::nullopt;
    if (length >= 0 ? static_cast<int64_t>(a->ints.size()) != length : a->ints.empty())
      return fail(std::string("attribute '") + name + "' has " + std::to_string(a->ints.size()) + " ints, expected " +
                  (length >= 0 ? std::to_string(length) : std::string("at least 1")));
    return std::nullopt;
  }

  std::optional<std::string> multiplier_value(const std::string& name, int64_t mantissa, int64_t shift) const {
    if (shift < fx::kMinShift || shift > fx::kMaxShift)
      return fail("multiplier '" + name + "' has shift " + std::to_string(shift) + " outside [" +
                  std::to_string(fx::kMinShift) + ", " + std::to_string(fx::kMaxShift) + "]");
    if (mantissa != 0 && (mantissa < (int64_t{1} << 30) || mantissa >= (int64_t{1} << 31)))
      return fail("multiplier '" + name + "' has mantissa " + std::to_string(mantissa) + " outside [2^30, 2^31) and not 0");
    return std::nullopt;
  }

  std::optional<std::string> pair_multiplier(const char* name) const {
    if (auto e = ints(name, 2, true)) return e;
    const Attribute* a = find_attribute(op_, name);
    return multiplier_value(name, a->ints[0], a->ints[1]);
  }

  std::optional<std::string> multipliers(const std::string& base) const {
    const std::string mn = base + "_mantissa", sn = base + "_shift";
    if (auto e = ints(mn.c_str(), -1, true)) return e;
    if (auto e = ints(sn.c_str(), -1, true)) return e;
    const Attribute* m = find_attribute(op_, mn);
    const Attribute* s = find_attribute(op_, sn);
    if (m->ints.size() != s->ints.size()) return fail("'" + mn + "' and '" + sn + "' differ in length");
    for (size_t i = 0; i < m->ints.size(); ++i)
      if (auto e = multiplier_value(base + "[" + std::to_string(i) + "]", m->ints[i], s->ints[i])) return e;
    return std::nullopt;
  }

  std::optional<std::string> clamp() const {
    const Attribute* a = find_attribute(op_, "clamp");
    if (!a) return std::nullopt;  // the output type's range
    if (a->ints.size() != 2) return fail("attribute 'clamp' must have 2 ints");
    fx::QType qt;
    detail::to_qtype(out(0).type, qt);
    const fx::Range r = fx::range_of(qt);
    if (a->ints[0] > a->ints[1] || a->ints[0] < r.min || a->ints[1] > r.max)
      return fail("clamp [" + std::to_string(a->ints[0]) + ", " + std::to_string(a->ints[1]) +
                  "] is empty or outside the output type's range");
    return std::nullopt;
  }

  const Model& m_;
  const Op& op_;
};

std::optional<std::string> check_tensor(const Tensor& t) {
  const std::string label = "tensor " + detail::quoted_name(t.name);
  const int64_t n = detail::element_count(t.shape);
  if (n < 0) return label + ": shape " + detail::shape_string(t.shape) + " has a negative dimension or 2^40 elements or more";
  const size_t esize = element_size(t.type);
  if (esize == 0) return label + ": unknown element type";
  if (is_quantized(t.type)) {
    fx::QType qt;
    detail::to_qtype(t.type, qt);
    const fx::Range r = fx::range_of(qt);
    if (!std::isfinite(t.quant.scale) || !(t.quant.scale > 0.0)) return label + ": scale must be positive and finite";
    if (t.quant.zero_point < r.min || t.quant.zero_point > r.max) return label + ": zero point outside its type";
  }
  if (t.constant && t.data.size() != static_cast<uint64_t>(n) * esize)
    return label + ": constant data has " + std::to_string(t.data.size()) + " bytes, expected " +
           std::to_string(static_cast<uint64_t>(n) * esize);
  return std::nullopt;
}

std::optional<std::string> validate_model(const Model& model) {
  const auto count = static_cast<int64_t>(model.tensors.size());
  if (count > INT32_MAX) return "too many tensors";
  for (const Tensor& t : model.tensors)
    if (auto e = check_tensor(t)) return e;

  std::vector<char> written(model.tensors.size(), 0);
  for (const int32_t i : model.inputs) {
    if (i < 0 || i >= count) return "model input index " + std::to_string(i) + " is out of range";
    const Tensor& t = model.tensors[static_cast<size_t>(i)];
    // u8: a frame an input_convert op reads (docs/input-types.md).
    if ((t.type != ElemType::f32 && t.type != ElemType::u8) || t.constant)
      return "model input " + tensor_label(model, i) + " must be a non-constant f32 or u8 tensor";
    if (written[static_cast<size_t>(i)]) return "model input " + tensor_label(model, i) + " is listed twice";
    written[static_cast<size_t>(i)] = 1;
  }
  for (const int32_t i : model.outputs) {
    if (i < 0 || i >= count) return "model output index " + std::to_string(i) + " is out of range";
    const Tensor& t = model.tensors[static_cast<size_t>(i)];
    if (t.type != ElemType::f32 || t.constant) return "model output " + tensor_label(model, i) + " must be a non-constant f32 tensor";
  }

  for (const Segment& seg : model.segments) {
    for (const Op& op : seg.ops) {
      const std::string label = op_label(op);
      const bool cpu = op.type.starts_with("cpu.");
      if (cpu) {
        if (!cpu_op_supported(std::string_view(op.type).substr(4))) return "unknown op type: " + label;
        if (seg.kind != SegmentKind::cpu)
          return label + ": a CPU op in BPU segment " + std::to_string(seg.id);
      } else if (detail::is_integer_op(op.type)) {
        if (seg.kind != SegmentKind::bpu && !detail::is_boundary_op(op.type))
          return label + ": an integer op in CPU segment " + std::to_string(seg.id);
      } else {
        return "unknown op type: " + label;
      }
      if (std::none_of(op.outputs.begin(), op.outputs.end(), [](int32_t i) { return i != -1; }))
        return label + ": has no outputs";
      for (size_t k = 0; k < op.inputs.size(); ++k) {
        const int32_t i = op.inputs[k];
        if (i == -1 && optional_input(op, k)) continue;
        if (i < 0 || i >= count) return label + ": input index " + std::to_string(i) + " is out of range";
        const Tensor& t = model.tensors[static_cast<size_t>(i)];
        if (!t.constant && !written[static_cast<size_t>(i)])
          return label + ": reads " + tensor_label(model, i) + " before it is written";
      }
      for (size_t k = 0; k < op.outputs.size(); ++k) {
        const int32_t i = op.outputs[k];
        // An absent optional ONNX output.
        if (i == -1 && cpu && cpu_op_output_optional(std::string_view(op.type).substr(4), k)) continue;
        if (i < 0 || i >= count) return label + ": output index " + std::to_string(i) + " is out of range";
        const Tensor& t = model.tensors[static_cast<size_t>(i)];
        if (t.constant) return label + ": writes the constant " + tensor_label(model, i);
        if (written[static_cast<size_t>(i)]) return label + ": " + tensor_label(model, i) + " is written twice";
        written[static_cast<size_t>(i)] = 1;
      }
      if (cpu) {
        for (const int32_t i : op.inputs)
          if (i >= 0) {
            const ElemType ty = model.tensors[static_cast<size_t>(i)].type;
            if (ty != ElemType::f32 && ty != ElemType::i64)
              return label + ": CPU ops take f32 or i64 tensors, not " + tensor_label(model, i);
          }
        for (const int32_t i : op.outputs) {
          if (i < 0) continue;
          const ElemType ty = model.tensors[static_cast<size_t>(i)].type;
          if (ty != ElemType::f32 && ty != ElemType::i64)
            return label + ": CPU ops write f32 or i64 tensors, not " + tensor_label(model, i);
        }
      } else {
        OpChecker checker(model, op);
        if (auto e = checker.check()) return e;
      }
    }
  }
  for (const int32_t i : model.outputs)
    if (!written[static_cast<size_t>(i)]) return "model output " + tensor_label(model, i) + " is never written";
  return std::nullopt;
}

}  // namespace

Status validate(const Model& model) {
  try {
    if (auto e = validate_model(model))
      return invalid_input(detail::one_line("lowered model " + detail::quoted_name(model.name) + ": " + *e));
    return Status::ok();
  } catch (const std::bad_alloc&) {
    return invalid_input("lowered model: out of memory while validating");
  } catch (const std::exception& e) {
    return invalid_input(std::string("lowered model: ") + e.what());
  }
}

}  // namespace qflow::lowered
