// The integer ops of the lowered model (BPU segments, and quantize / dequantize in both kinds):
// each builds the qflow::fx parameters from the op's attributes and tensors and calls the
// fixed-point reference, or the fast kernels (conv2d and matmul with weights packed at load time,
// eltwise, lut and pools) (docs/lowered-model.md).
#include <algorithm>
#include <climits>
#include <cmath>
#include <memory>

#include "lowered/op_common.h"
#include "lowered/table_fusion.h"

namespace qflow::lowered::detail {
namespace {

using I32 = std::span<const int32_t>;

fx::Multiplier pair_multiplier(const Op& op, std::string_view name) {
  const Attribute* a = find_attribute(op, name);
  fx::Multiplier m;
  if (a && a->ints.size() == 2) {
    m.mantissa = static_cast<int32_t>(a->ints[0]);
    m.shift = static_cast<int>(a->ints[1]);
  }
  return m;
}

std::vector<fx::Multiplier> multiplier_list(const Op& op) {
  const std::vector<int64_t> m = ints_or(op, "multiplier_mantissa", {});
  const std::vector<int64_t> s = ints_or(op, "multiplier_shift", {});
  std::vector<fx::Multiplier> out(std::min(m.size(), s.size()));
  for (size_t i = 0; i < out.size(); ++i) out[i] = fx::Multiplier{static_cast<int32_t>(m[i]), static_cast<int>(s[i])};
  return out;
}

fx::Clamp clamp_of(const Op& op) {
  const std::vector<int64_t> c = ints_or(op, "clamp", {});
  fx::Clamp r;
  if (c.size() == 2) {
    r.min = static_cast<int32_t>(std::clamp<int64_t>(c[0], INT32_MIN, INT32_MAX));
    r.max = static_cast<int32_t>(std::clamp<int64_t>(c[1], INT32_MIN, INT32_MAX));
  }
  return r;
}

fx::QType qtype(ElemType t) {
  fx::QType q = fx::QType::Int8;
  to_qtype(t, q);
  return q;
}

Status shape_mismatch(const Shape& produced, const Shape& declared) {
  return invalid_input("produces shape " + shape_string(produced) + " but its output tensor declares " +
                       shape_string(declared));
}

bool all_at_least(const std::vector<int64_t>& v, int64_t lo) {
  return std::all_of(v.begin(), v.end(), [lo](int64_t x) { return x >= lo; });
}

template <size_t N>
std::array<int64_t, N> to_array(const std::vector<int64_t>& v) {
  std::array<int64_t, N> a{};
  for (size_t i = 0; i < N && i < v.size(); ++i) a[i] = v[i];
  return a;
}

class IntegerOp {
 public:
  IntegerOp(const Model& model, const Op& op, const std::vector<const Value*>& ins, const std::vector<Value*>& outs,
            const PackedOp* packed)
      : m_(model), op_(op), ins_(ins), outs_(outs), packed_(packed) {}

  // Packs a conv2d's, conv_transpose2d's or matmul's constant weights for the fast kernels (add,
  // sub, mul, lut, the pools, quantize, concat and a matmul whose B is computed take only the
  // instruction set); null when the op has none, its weights are not constant or the fast
  // kernels refuse it (the reference then runs it and reports any error).
  std::shared_ptr<const PackedOp> pack(fx::fast::Isa isa) const {
    if (op_.type == "add" || op_.type == "sub" || op_.type == "mul" || op_.type == "lut" || op_.type == "max_pool" ||
        op_.type == "average_pool" || op_.type == "global_average_pool" ||
        op_.type == "quantize" || op_.type == "dequantize" || op_.type == "concat" || op_.type == "requantize" ||
        op_.type == "softmax" ||
        (op_.type == "matmul" && !has(1))) {  // the instruction set only (a run-time B is packed per run)
      auto packed = std::make_shared<PackedOp>();
      packed->isa = isa;
      return packed;
    }
    const bool bias_input = op_.inputs.size() > 2 && op_.inputs[2] >= 0;
    if (!has(1) || (bias_input && !has(2))) return nullptr;
    auto packed = std::make_shared<PackedOp>();
    packed->isa = isa;
    const I32 bias = has(2) ? I32(in(2).ints) : I32();
    if (op_.type == "conv2d") {
      fx::ConvTranspose2DParams p;
      Shape produced;
      if (!conv_params(false, p, produced) || produced != tout().shape) return nullptr;
      fx::fast::PackedConv2D k;
      if (!fx::fast::pack_conv2d(p, in(1).ints, bias, k).is_ok()) return nullptr;
      packed->conv = std::move(k);
      return packed;
    }
    if (op_.type == "conv_transpose2d") {
      fx::ConvTranspose2DParams p;
      Shape produced;
      if (!conv_params(true, p, produced) || produced != tout().shape) return nullptr;
      fx::fast::PackedConvTranspose2D k;
      if (!fx::fast::pack_conv_transpose2d(p, in(1).ints, bias, k).is_ok()) return nullptr;
      packed->conv_transpose = std::move(k);
      return packed;
    }
    if (op_.type == "matmul") {
      fx::MatMulParams p;
      Shape lead, produced;
      if (in(1).shape.size() != 2 || !matmul_params(p, lead, produced) || produced != tout().shape) return nullptr;
      fx::fast::PackedMatMul k;
      if (!fx::fast::pack_matmul(p, in(1).ints, bias, k).is_ok()) return nullptr;
      packed->matmul = std::move(k);
      return packed;
    }
    return nullptr;
  }

  Status run() {
    const Status s = dispatch();
    if (s.is_ok() && !outs_.empty() && outs_[0]) out().in_range = writes_in_range();
    return s;
  }

 private:
  // After a successful run: whether the output's ints lie inside its type's range. Ops whose
  // results are requantized, quantized or looked up (table entries are checked) clamp to the
  // type, as do the average pools and concat (rescaled or copied after checking their inputs);
  // max_pool checks its input and takes its type. Reshape, transpose, slice and resize copy
  // (or, bilinear, average) their input's values, so they keep its knowledge when the two
  // tensors have one type.
  bool writes_in_range() const {
    const std::string& t = op_.type;
    if (t == "conv2d" || t == "conv_transpose2d" || t == "matmul" || t == "add" || t == "sub" || t == "mul" ||
        t == "requantize" || t == "quantize" || t == "lut" || t == "max_pool" || t == "average_pool" ||
        t == "global_average_pool" || t == "concat" || t == "softmax" || t == "input_convert")
      return true;
    if (t == "reshape" || t == "transpose" || t == "slice" || t == "resize")
      return in(0).in_range && tin(0).type == tout().type;
    return false;
  }

  fx::MulParams mul_params() const {
    fx::MulParams p;
    p.a = qin(0);
    p.b = qin(1);
    p.output = qout();
    p.multiplier = pair_multiplier(op_, "multiplier");
    p.clamp = clamp_of(op_);
    return p;
  }

  fx::AddParams add_params() const {
    fx::AddParams p;
    p.a = qin(0);
    p.b = qin(1);
    p.output = qout();
    p.left_shift = static_cast<int>(int_or(op_, "left_shift", 20));
    p.a_multiplier = pair_multiplier(op_, "a_multiplier");
    p.b_multiplier = pair_multiplier(op_, "b_multiplier");
    p.output_multiplier = pair_multiplier(op_, "output_multiplier");
    p.subtract = op_.type == "sub";
    p.clamp = clamp_of(op_);
    return p;
  }

  Status dispatch() {
    const std::string& t = op_.type;
    if (t == "quantize") return quantize();
    if (t == "input_convert") return input_convert();
    if (t == "dequantize") return dequantize();
    if (t == "conv2d" || t == "conv_transpose2d") return conv(t == "conv_transpose2d");
    if (t == "matmul") return matmul();
    if (t == "add" || t == "sub" || t == "mul") return eltwise();
    if (t == "requantize") return requantize();
    if (t == "concat") return concat();
    if (t == "max_pool" || t == "average_pool") return pool(t == "max_pool");
    if (t == "global_average_pool") return global_pool();
    if (t == "resize") return resize();
    if (t == "lut") return lut();
    if (t == "softmax") return softmax();
    if (t == "layernorm") return layernorm();
    if (t == "reshape") {
      out().ints = in(0).ints;
      return Status::ok();
    }
    if (t == "transpose") return transpose();
    if (t == "slice") return slice();
    return invalid_input("unknown op type");
  }

  const Tensor& tin(size_t i) const { return m_.tensors[static_cast<size_t>(op_.inputs[i])]; }
  const Tensor& tout() const { return m_.tensors[static_cast<size_t>(op_.outputs[0])]; }
  const Value& in(size_t i) const { return *ins_[i]; }
  bool has(size_t i) const { return i < ins_.size() && ins_[i] != nullptr; }
  Value& out() const { return *outs_[0]; }
  fx::QParams qin(size_t i) const { return qparams(tin(i)); }
  fx::QParams qout() const { return qparams(tout()); }

  Status quantize() {
    const fx::QParams q = qout();
    const std::vector<float>& x = in(0).floats;
    IntBuffer& y = out().ints;
    if (packed_) {
      const int64_t nan = fx::fast::quantize(q, packed_->isa, x, y);
      if (nan >= 0) return invalid_input("input element " + std::to_string(nan) + " is NaN");
      return Status::ok();
    }
    for (size_t i = 0; i < x.size(); ++i) {
      if (std::isnan(x[i])) return invalid_input("input element " + std::to_string(i) + " is NaN");
      y[i] = fx::quantize(static_cast<double>(x[i]), q);
    }
    return Status::ok();
  }

  // The attributes were checked by validate() (docs/lowered-model.md, "input_convert").
  Status input_convert() {
    fx::InputConvertParams p;
    if (!input_convert_params(m_, op_, p)) return invalid_input("bad input_convert attributes");
    return fx::input_convert(p, in(0).ints, in(1).ints, out().ints);
  }

  Status dequantize() {
    const fx::QParams q = qin(0);
    const IntBuffer& x = in(0).ints;
    std::vector<float>& y = out().floats;
    if (packed_) {
      fx::fast::dequantize(q, packed_->isa, x, y);
      return Status::ok();
    }
    for (size_t i = 0; i < x.size(); ++i) y[i] = static_cast<float>(fx::dequantize(x[i], q));
    return Status::ok();
  }

  // The parameters of a conv2d / conv_transpose2d from the declared tensors (a run's values have
  // those shapes) and the shape it produces.
  Status conv_params(bool transposed, fx::ConvTranspose2DParams& p, Shape& produced) const {
    const Shape& xs = tin(0).shape;
    const Shape& ws = tin(1).shape;
    p.group = int_or(op_, "group", 1);
    const std::vector<int64_t> strides = ints_or(op_, "strides", {1, 1});
    const std::vector<int64_t> pads = ints_or(op_, "pads", {0, 0, 0, 0});
    const std::vector<int64_t> dilations = ints_or(op_, "dilations", {1, 1});
    const std::vector<int64_t> output_padding = ints_or(op_, "output_padding", {0, 0});
    if (p.group < 1 || !all_at_least(strides, 1) || !all_at_least(dilations, 1) || !all_at_least(pads, 0) ||
        !all_at_least(output_padding, 0))
      return invalid_input("group, strides and dilations must be positive, pads and output_padding non-negative");
    p.batch = xs[0];
    p.in_channels = xs[1];
    p.in_h = xs[2];
    p.in_w = xs[3];
    p.kernel_h = ws[2];
    p.kernel_w = ws[3];
    p.strides = to_array<2>(strides);
    p.pads = to_array<4>(pads);
    p.dilations = to_array<2>(dilations);
    p.output_padding = to_array<2>(output_padding);
    p.input = qin(0);
    p.output = qout();
    p.weight_type = qtype(tin(1).type);
    p.multipliers = multiplier_list(op_);
    p.clamp = clamp_of(op_);
    if (!transposed) {
      p.out_channels = ws[0];
      if (ws[1] * p.group != p.in_channels)
        return invalid_input("weights " + shape_string(ws) + " do not match " + std::to_string(p.in_channels) +
                             " input channels in " + std::to_string(p.group) + " groups");
      produced = {p.batch, p.out_channels, fx::conv_out_h(p), fx::conv_out_w(p)};
    } else {
      p.out_channels = ws[1] * p.group;
      if (ws[0] != p.in_channels)
        return invalid_input("weights " + shape_string(ws) + " do not match " + std::to_string(p.in_channels) +
                             " input channels");
      produced = {p.batch, p.out_channels, fx::conv_transpose_out_h(p), fx::conv_transpose_out_w(p)};
    }
    return Status::ok();
  }

  Status conv(bool transposed) {
    fx::ConvTranspose2DParams p;
    Shape produced;
    if (Status s = conv_params(transposed, p, produced); !s) return s;
    if (produced != out().shape) return shape_mismatch(produced, out().shape);
    if (packed_ && packed_->conv)
      return fx::fast::conv2d(*packed_->conv, packed_->isa, in(0).ints, out().ints, in(0).in_range);
    if (packed_ && packed_->conv_transpose)
      return fx::fast::conv_transpose2d(*packed_->conv_transpose, packed_->isa, in(0).ints, out().ints, in(0).in_range);
    const I32 bias = has(2) ? I32(in(2).ints) : I32();
    return transposed ? fx::conv_transpose2d(p, in(0).ints, in(1).ints, bias, out().ints)
                      : fx::conv2d(p, in(0).ints, in(1).ints, bias, out().ints);
  }

  // The parameters of one matmul of the batch from the declared tensors, the batch's leading
  // shape and the shape it produces.
  Status matmul_params(fx::MatMulParams& p, Shape& lead, Shape& produced) const {
    const Shape& as = tin(0).shape;
    const Shape& bs = tin(1).shape;
    const bool bt = int_or(op_, "b_transposed", 0) != 0;
    const size_t ar = as.size(), br = bs.size();
    p.m = as[ar - 2];
    p.k = as[ar - 1];
    const int64_t bk = bt ? bs[br - 1] : bs[br - 2];
    p.n = bt ? bs[br - 2] : bs[br - 1];
    if (bk != p.k) return invalid_input("a " + shape_string(as) + " and b " + shape_string(bs) + " differ in K");
    lead.assign(as.begin(), as.end() - 2);
    if (br != 2 && Shape(bs.begin(), bs.end() - 2) != lead)
      return invalid_input("b " + shape_string(bs) + " must be 2-D or have a's leading dimensions " + shape_string(as));
    produced = lead;
    produced.push_back(p.m);
    produced.push_back(p.n);
    p.b_transposed = bt;
    p.a = qin(0);
    p.output = qout();
    p.b_type = qtype(tin(1).type);
    p.b_zero_point = tin(1).quant.zero_point;
    p.multipliers = multiplier_list(op_);
    p.clamp = clamp_of(op_);
    return Status::ok();
  }

  Status matmul() {
    fx::MatMulParams p;
    Shape lead, produced;
    if (Status s = matmul_params(p, lead, produced); !s) return s;
    if (produced != out().shape) return shape_mismatch(produced, out().shape);
    const bool shared_b = in(1).shape.size() == 2;
    const I32 bias = has(2) ? I32(in(2).ints) : I32();
    const int64_t batches = element_count(lead);
    const auto a_size = static_cast<size_t>(p.m * p.k), b_size = static_cast<size_t>(p.k * p.n),
               y_size = static_cast<size_t>(p.m * p.n);
    const I32 a(in(0).ints), b(in(1).ints);
    std::span<int32_t> y(out().ints);
    // B computed at run time (attention's Q x K^T, P x V) is packed per run; what the fast
    // kernels refuse goes to the reference, for its message.
    thread_local fx::fast::PackedMatMul run_time_b;
    const bool pack_b = packed_ && !packed_->matmul && fx::fast::supports_matmul(p.a.type, p.a.zero_point, p.b_type, p.b_zero_point);
    bool b_packed = false;
    for (int64_t i = 0; i < batches; ++i) {
      const auto bi = static_cast<size_t>(i);
      const I32 ai = a.subspan(bi * a_size, a_size), b_i = b.subspan(shared_b ? 0 : bi * b_size, b_size);
      const std::span<int32_t> yi = y.subspan(bi * y_size, y_size);
      Status s;
      if (packed_ && packed_->matmul) {
        s = fx::fast::matmul(*packed_->matmul, packed_->isa, ai, yi, in(0).in_range);
      } else {
        if (pack_b && (i == 0 || !shared_b)) b_packed = fx::fast::pack_matmul(p, b_i, bias, run_time_b, false).is_ok();
        s = b_packed ? fx::fast::matmul(run_time_b, packed_->isa, ai, yi, in(0).in_range) : fx::matmul(p, ai, b_i, bias, yi);
      }
      if (!s.is_ok()) return s;
    }
    return Status::ok();
  }

  Status eltwise() {
    Shape shape;
    if (!broadcast_shape(in(0).shape, in(1).shape, shape))
      return invalid_input("shapes " + shape_string(in(0).shape) + " and " + shape_string(in(1).shape) +
                           " do not broadcast");
    if (shape != out().shape) return shape_mismatch(shape, out().shape);
    if (packed_) {
      const bool commutes = op_.type != "sub";
      if (in(0).shape == shape && in(1).shape != shape && constant_runs(in(1).shape, shape) >= kMinRun)
        return eltwise_runs(0, shape);
      if (commutes && in(1).shape == shape && in(0).shape != shape && constant_runs(in(0).shape, shape) >= kMinRun)
        return eltwise_runs(1, shape);
    }
    // Broadcast operands are expanded into per-thread buffers (fully overwritten, so never cleared).
    thread_local std::vector<int32_t> ea, eb;
    I32 a(in(0).ints), b(in(1).ints);
    if (in(0).shape != shape) {
      ea.resize(out().ints.size());
      broadcast_to(in(0).ints.data(), in(0).shape, shape, ea.data());
      a = ea;
    }
    if (in(1).shape != shape) {
      eb.resize(out().ints.size());
      broadcast_to(in(1).ints.data(), in(1).shape, shape, eb.data());
      b = eb;
    }
    const bool both_in_range = in(0).in_range && in(1).in_range;  // broadcasting copies values
    if (op_.type == "mul")
      return packed_ ? fx::fast::mul(mul_params(), packed_->isa, a, b, out().ints, both_in_range)
                     : fx::mul(mul_params(), a, b, out().ints);
    return packed_ ? fx::fast::add(add_params(), packed_->isa, a, b, out().ints, both_in_range)
                   : fx::add(add_params(), a, b, out().ints);
  }

  // Outputs per run along which an operand of shape `small` broadcast to `shape` holds one
  // value: the product of the trailing axes where `small` is 1 (a per-channel scale or shift,
  // [1, C, 1, 1] against [1, C, H, W], has runs of H * W).
  static int64_t constant_runs(const Shape& small, const Shape& shape) {
    int64_t run = 1;
    for (size_t k = 0; k < shape.size(); ++k) {  // k: axes from the end
      if (k < small.size() && small[small.size() - 1 - k] != 1) break;
      run *= shape[shape.size() - 1 - k];
    }
    return run;
  }
  static constexpr int64_t kMinRun = 16;  // shorter runs: expanding costs less than a call per run

  // add / sub / mul with the operand other than `full` broadcast along runs of the output: each
  // run of the full operand meets a short buffer of the other's value instead of an expanded
  // copy of the whole output. The same per-element arithmetic, so the same values and errors.
  // For full == 1 (add, mul) the operands and their parameters trade places, which both ops
  // allow: (a - za) * (b - zb) and ra + rb commute.
  Status eltwise_runs(int full, const Shape& shape) {
    const Value& big = in(static_cast<size_t>(full));
    const Value& small = in(static_cast<size_t>(1 - full));
    const int64_t run = constant_runs(small.shape, shape);
    const int64_t runs = element_count(shape) / run;
    const size_t r = shape.size();
    Shape small_full(r, 1);  // small's shape right-aligned to the output's rank
    std::copy(small.shape.begin(), small.shape.end(), small_full.begin() + static_cast<std::ptrdiff_t>(r - small.shape.size()));
    size_t lead = r;  // the leading axes, those outside the runs (as constant_runs counts them)
    while (lead > 0 && small_full[lead - 1] == 1) --lead;
    thread_local std::vector<int32_t> value, buffer;
    value.resize(static_cast<size_t>(runs));
    broadcast_to(small.ints.data(), Shape(small_full.begin(), small_full.begin() + static_cast<std::ptrdiff_t>(lead)),
                 Shape(shape.begin(), shape.begin() + static_cast<std::ptrdiff_t>(lead)), value.data());
    buffer.resize(static_cast<size_t>(run));
    const bool both_in_range = in(0).in_range && in(1).in_range;
    fx::MulParams mp;
    fx::AddParams ap;
    if (op_.type == "mul") {
      mp = mul_params();
      if (full == 1) std::swap(mp.a, mp.b);
    } else {
      ap = add_params();
      if (full == 1) {
        std::swap(ap.a, ap.b);
        std::swap(ap.a_multiplier, ap.b_multiplier);
      }
    }
    const I32 x(big.ints);
    const std::span<int32_t> y(out().ints);
    for (int64_t k = 0; k < runs; ++k) {
      std::fill(buffer.begin(), buffer.end(), value[static_cast<size_t>(k)]);
      const auto at = static_cast<size_t>(k * run), n = static_cast<size_t>(run);
      const Status s = op_.type == "mul" ? fx::fast::mul(mp, packed_->isa, x.subspan(at, n), buffer, y.subspan(at, n), both_in_range)
                                         : fx::fast::add(ap, packed_->isa, x.subspan(at, n), buffer, y.subspan(at, n), both_in_range);
      if (!s.is_ok()) return s;
    }
    return Status::ok();
  }

  Status requantize() {
    if (in(0).shape != out().shape) return shape_mismatch(in(0).shape, out().shape);
    const fx::Multiplier m = pair_multiplier(op_, "multiplier");
    const fx::Range r = fx::range_of(qtype(tout().type));
    const fx::Clamp c = clamp_of(op_);
    const int32_t lo = std::max(r.min, c.min), hi = std::min(r.max, c.max);
    const int32_t zx = tin(0).quant.zero_point, zy = tout().quant.zero_point;
    const IntBuffer& x = in(0).ints;
    IntBuffer& y = out().ints;
    // With x in its type's range, x - zx fits int32 and the fast requantize (exact for int32
    // accumulators) gives the reference's values; the reference handles anything else.
    if (packed_ && (in(0).in_range || fx::check_range(x, qtype(tin(0).type), "").is_ok())) {
      for (size_t i = 0; i < x.size(); ++i) y[i] = x[i] - zx;
      fx::fast::requantize_row(packed_->isa, y.data(), static_cast<int64_t>(y.size()), m, zy, lo, hi, y.data(), 1);
      return Status::ok();
    }
    for (size_t i = 0; i < x.size(); ++i) y[i] = fx::requantize(int64_t{x[i]} - zx, m, zy, lo, hi);
    return Status::ok();
  }

  Status concat() {
    const auto axis = static_cast<size_t>(int_or(op_, "axis", 0));
    const Shape& ys = out().shape;
    Shape produced;
    std::vector<fx::ConcatInput> inputs;
    for (size_t i = 0; i < ins_.size(); ++i) {
      const Shape& s = in(i).shape;
      if (s.size() != ys.size()) return invalid_input("input " + std::to_string(i) + " has rank " + std::to_string(s.size()));
      if (i == 0) produced = s;
      else {
        for (size_t d = 0; d < s.size(); ++d)
          if (d != axis && s[d] != produced[d])
            return invalid_input("input shapes " + shape_string(produced) + " and " + shape_string(s) +
                                 " differ outside the axis");
        produced[axis] += s[axis];
      }
      inputs.push_back(fx::ConcatInput{in(i).ints, s[axis], qin(i)});
    }
    if (produced != ys) return shape_mismatch(produced, ys);
    if (out().ints.empty()) return Status::ok();
    const int64_t outer = element_count(Shape(ys.begin(), ys.begin() + static_cast<std::ptrdiff_t>(axis)));
    const int64_t inner = element_count(Shape(ys.begin() + static_cast<std::ptrdiff_t>(axis) + 1, ys.end()));
    return packed_ ? fx::fast::concat(inputs, outer, inner, qout(), packed_->isa, out().ints)
                   : fx::concat(inputs, outer, inner, qout(), out().ints);
  }

  Status pool(bool max) {
    const Shape& xs = in(0).shape;
    fx::Pool2DParams p;
    const std::vector<int64_t> kernel = ints_or(op_, "kernel", {1, 1});
    const std::vector<int64_t> strides = ints_or(op_, "strides", {1, 1});
    const std::vector<int64_t> pads = ints_or(op_, "pads", {0, 0, 0, 0});
    const std::vector<int64_t> dilations = ints_or(op_, "dilations", {1, 1});
    if (!all_at_least(kernel, 1) || !all_at_least(strides, 1) || !all_at_least(dilations, 1) || !all_at_least(pads, 0))
      return invalid_input("kernel, strides and dilations must be positive, pads non-negative");
    p.batch = xs[0];
    p.channels = xs[1];
    p.in_h = xs[2];
    p.in_w = xs[3];
    p.kernel_h = kernel[0];
    p.kernel_w = kernel[1];
    p.strides = to_array<2>(strides);
    p.pads = to_array<4>(pads);
    p.dilations = to_array<2>(dilations);
    p.count_include_pad = int_or(op_, "count_include_pad", 0) != 0;
    p.input = qin(0);
    p.output = qout();
    const Shape produced{p.batch, p.channels, fx::pool_out_h(p), fx::pool_out_w(p)};
    if (produced != out().shape) return shape_mismatch(produced, out().shape);
    if (packed_)
      return max ? fx::fast::max_pool(p, packed_->isa, in(0).ints, out().ints, in(0).in_range)
                 : fx::fast::average_pool(p, packed_->isa, in(0).ints, out().ints, in(0).in_range);
    return max ? fx::max_pool(p, in(0).ints, out().ints) : fx::average_pool(p, in(0).ints, out().ints);
  }

  Status global_pool() {
    const Shape& xs = in(0).shape;
    const Shape produced{xs[0], xs[1], 1, 1};
    if (produced != out().shape) return shape_mismatch(produced, out().shape);
    if (packed_)
      return fx::fast::global_average_pool(xs[0], xs[1], xs[2], xs[3], qin(0), qout(), packed_->isa, in(0).ints,
                                           out().ints, in(0).in_range);
    return fx::global_average_pool(xs[0], xs[1], xs[2], xs[3], qin(0), qout(), in(0).ints, out().ints);
  }

  Status resize() {
    const Shape& xs = in(0).shape;
    const Shape& ys = out().shape;
    if (xs[0] != ys[0] || xs[1] != ys[1])
      return invalid_input("resizes only H and W: " + shape_string(xs) + " to " + shape_string(ys));
    fx::ResizeParams p;
    p.batch = xs[0];
    p.channels = xs[1];
    p.in_h = xs[2];
    p.in_w = xs[3];
    p.out_h = ys[2];
    p.out_w = ys[3];
    const std::string cm = string_or(op_, "coordinate_mode", "half_pixel");
    p.coordinate_mode = cm == "asymmetric"      ? fx::CoordinateMode::Asymmetric
                        : cm == "align_corners" ? fx::CoordinateMode::AlignCorners
                                                : fx::CoordinateMode::HalfPixel;
    const std::string nm = string_or(op_, "nearest_mode", "round_prefer_floor");
    p.nearest_mode = nm == "round_prefer_ceil" ? fx::NearestMode::RoundPreferCeil
                     : nm == "floor"           ? fx::NearestMode::Floor
                     : nm == "ceil"            ? fx::NearestMode::Ceil
                                               : fx::NearestMode::RoundPreferFloor;
    p.type = qtype(tin(0).type);
    return string_or(op_, "mode", "nearest") == "linear" ? fx::resize_bilinear(p, in(0).ints, out().ints)
                                                        : fx::resize_nearest(p, in(0).ints, out().ints);
  }

  Status lut() {
    if (in(0).shape != out().shape) return shape_mismatch(in(0).shape, out().shape);
    fx::Lut l;
    l.input = qin(0);
    l.output = qout();
    l.segment_bits = static_cast<int>(int_or(op_, "segment_bits", 0));
    if (!fx::is_16bit(l.input.type)) l.segment_bits = 0;
    else if (l.segment_bits != 7 && l.segment_bits != 8)
      return invalid_input("segment_bits must be 7 or 8 for a 16-bit input");
    l.entries.assign(in(1).ints.begin(), in(1).ints.end());
    const fx::Range r = fx::range_of(l.output.type);
    for (const int32_t e : l.entries)
      if (e < r.min || e > r.max) return invalid_input("table entry " + std::to_string(e) + " is outside the output type");
    return packed_ ? fx::fast::apply_lut(l, packed_->isa, in(0).ints, out().ints, in(0).in_range)
                   : fx::apply_lut(l, in(0).ints, out().ints);
  }

  Status softmax() {
    if (in(0).shape != out().shape) return shape_mismatch(in(0).shape, out().shape);
    fx::SoftmaxParams p;
    p.input = qin(0);
    p.output = qout();
    p.segment_bits = static_cast<int>(std::clamp<int64_t>(int_or(op_, "segment_bits", 0), -1, 64));
    p.exp_table.assign(in(1).ints.begin(), in(1).ints.end());
    p.output_multiplier = pair_multiplier(op_, "output_multiplier");
    const int64_t row = in(0).shape.empty() ? 1 : in(0).shape.back();
    if (out().ints.empty()) return Status::ok();
    return packed_ ? fx::fast::softmax(p, packed_->isa, row, in(0).ints, out().ints, in(0).in_range)
                   : fx::softmax(p, row, in(0).ints, out().ints);
  }

  Status layernorm() {
    if (in(0).shape != out().shape) return shape_mismatch(in(0).shape, out().shape);
    fx::LayerNormParams p;
    p.input = qin(0);
    p.output = qout();
    p.row = in(0).shape.empty() ? 1 : in(0).shape.back();
    p.gamma.assign(in(1).ints.begin(), in(1).ints.end());
    p.beta.assign(in(2).ints.begin(), in(2).ints.end());
    for (const int32_t g : p.gamma)
      if (g < -32768 || g > 32767) return invalid_input("gamma value " + std::to_string(g) + " is outside int16");
    p.epsilon = int_or(op_, "epsilon", 0);
    if (p.epsilon < 0 || p.epsilon > (int64_t{1} << 60)) return invalid_input("epsilon must be in [0, 2^60]");
    p.output_multiplier = pair_multiplier(op_, "output_multiplier");
    if (out().ints.empty()) return Status::ok();
    return fx::layernorm(p, in(0).ints, out().ints);
  }

  Status transpose() {
    const std::vector<int64_t> perm = ints_or(op_, "perm", {});
    Shape produced;
    if (!transpose_shape(in(0).shape, perm, produced)) return invalid_input("perm is not a permutation of the input's axes");
    if (produced != out().shape) return shape_mismatch(produced, out().shape);
    detail::transpose(in(0).ints.data(), in(0).shape, perm, out().ints.data());
    return Status::ok();
  }

  Status slice() {
    const Shape& xs = in(0).shape;
    const std::vector<int64_t> starts = ints_or(op_, "starts", {}), ends = ints_or(op_, "ends", {});
    std::vector<int64_t> axes = ints_or(op_, "axes", {}), steps = ints_or(op_, "steps", {});
    if (axes.empty())
      for (size_t i = 0; i < starts.size(); ++i) axes.push_back(static_cast<int64_t>(i));
    if (steps.empty()) steps.assign(starts.size(), 1);
    Shape produced = xs;
    std::vector<int64_t> begin(xs.size(), 0), step(xs.size(), 1);
    std::vector<char> seen(xs.size(), 0);
    for (size_t i = 0; i < starts.size(); ++i) {
      const int64_t a = axes[i];
      if (a < 0 || a >= static_cast<int64_t>(xs.size()) || seen[static_cast<size_t>(a)])
        return invalid_input("axis " + std::to_string(a) + " is out of range or repeated");
      const auto ax = static_cast<size_t>(a);
      seen[ax] = 1;
      if (steps[i] < 1) return invalid_input("steps must be positive (got " + std::to_string(steps[i]) + ")");
      const int64_t s = std::clamp<int64_t>(starts[i], 0, xs[ax]), e = std::clamp<int64_t>(ends[i], 0, xs[ax]);
      begin[ax] = s;
      step[ax] = steps[i];
      produced[ax] = e > s ? (e - s + steps[i] - 1) / steps[i] : 0;
    }
    if (produced != out().shape) return shape_mismatch(produced, out().shape);
    const std::vector<int64_t> in_strides = strides_of(xs);
    int64_t base = 0;
    std::vector<int64_t> strides(xs.size());
    for (size_t i = 0; i < xs.size(); ++i) {
      base += begin[i] * in_strides[i];
      strides[i] = step[i] * in_strides[i];
    }
    strided_gather(in(0).ints.data(), base, strides, produced, out().ints.data());
    return Status::ok();
  }

  const Model& m_;
  const Op& op_;
  const std::vector<const Value*>& ins_;
  const std::vector<Value*>& outs_;
  const PackedOp* packed_;
};

}  // namespace

Status run_integer_op(const Model& model, const Op& op, const std::vector<const Value*>& ins,
                      const std::vector<Value*>& outs, const PackedOp* packed) {
  return IntegerOp(model, op, ins, outs, packed).run();
}

bool run_reference_on(const Model& model, const Op& op, const std::vector<const Value*>& ins, Value& out) {
  const std::vector<Value*> outs{&out};
  return IntegerOp(model, op, ins, outs, nullptr).run().is_ok();
}

std::shared_ptr<const PackedOp> pack_integer_op(const Model& model, const Op& op,
                                                const std::vector<const Value*>& constants, fx::fast::Isa isa) {
  const std::vector<Value*> no_outputs;
  return IntegerOp(model, op, constants, no_outputs, nullptr).pack(isa);
}

}  // namespace qflow::lowered::detail
