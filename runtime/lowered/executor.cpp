// Executor: decodes the constants and packs the weights of the fast kernels once, then runs the
// segments' ops in order on freshly allocated values (docs/lowered-model.md). run() keeps no
// state between calls (the fast kernels' scratch is per thread).
#include "qflow/runtime/executor.h"

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <exception>
#include <new>

#include "lowered/op_common.h"
#include "lowered/table_fusion.h"
#include "qflow/runtime/isa_cap.h"

namespace qflow::lowered {
namespace {

using detail::element_count;

// Allocates the storage a value of `type` and `shape` needs, zero-filled unless `overwritten`
// (an integer op writes every element of its output, so clearing a reused buffer first would
// only cost a pass over memory).
void allocate(Value& v, ElemType type, const detail::Shape& shape, bool overwritten = false) {
  v.type = type;
  v.shape = shape;
  const auto n = static_cast<size_t>(element_count(shape));
  if (type == ElemType::f32 && overwritten) v.floats.resize(n);  // dequantize's output
  else if (type == ElemType::f32) v.floats.assign(n, 0.0f);
  else if (type == ElemType::i64) v.longs.assign(n, 0);
  else if (overwritten) v.ints.resize(n);
  else v.ints.assign(n, 0);
}

template <typename T>
T load(const uint8_t* p) {
  using U = std::conditional_t<sizeof(T) == 1, uint8_t,
                               std::conditional_t<sizeof(T) == 2, uint16_t, std::conditional_t<sizeof(T) == 4, uint32_t, uint64_t>>>;
  U u = 0;
  for (size_t b = 0; b < sizeof(T); ++b) u = static_cast<U>(u | (static_cast<U>(p[b]) << (8 * b)));
  T t;
  std::memcpy(&t, &u, sizeof(T));
  return t;
}

Value decode_constant(const Tensor& t) {
  Value v;
  allocate(v, t.type, t.shape);
  const uint8_t* d = t.data.data();
  const size_t n = static_cast<size_t>(element_count(t.shape));
  for (size_t i = 0; i < n; ++i) switch (t.type) {
      case ElemType::f32: v.floats[i] = load<float>(d + 4 * i); break;
      case ElemType::i64: v.longs[i] = load<int64_t>(d + 8 * i); break;
      case ElemType::i8: v.ints[i] = load<int8_t>(d + i); break;
      case ElemType::u8: v.ints[i] = load<uint8_t>(d + i); break;
      case ElemType::i16: v.ints[i] = load<int16_t>(d + 2 * i); break;
      case ElemType::u16: v.ints[i] = load<uint16_t>(d + 2 * i); break;
      case ElemType::i32: v.ints[i] = load<int32_t>(d + 4 * i); break;
    }
  return v;
}

// The kernels `requested` names (or QFLOW_RT_KERNELS names, for automatic), checked against the CPU.
// Automatic selection also honours the instruction-set cap (QFLOW_ISA, qflow/runtime/isa_cap.h):
// the best kernels under it, and QFLOW_RT_KERNELS may not name kernels above it. An explicit
// `requested` set is an exact request and ignores the cap.
Status choose_kernels(Kernels requested, bool& reference, fx::fast::Isa& isa) {
  using fx::fast::Isa;
  reference = false;
  isa = fx::fast::best_isa();
  const bool automatic = requested == Kernels::automatic;
  std::string env_name;
  if (automatic) {
    if (Status s = isa::cap_status(); !s) return s;
    const char* env = std::getenv("QFLOW_RT_KERNELS");
    env_name = env ? env : "";
    const std::string& name = env_name;
    if (name.empty() || name == "fast") return Status::ok();
    if (name == "reference") requested = Kernels::reference;
    else if (name == "portable") requested = Kernels::portable;
    else if (name == "avx2") requested = Kernels::avx2;
    else if (name == "avxvnni") requested = Kernels::avxvnni;
    else if (name == "avx512vnni") requested = Kernels::avx512vnni;
    else
      return invalid_input("QFLOW_RT_KERNELS=" + detail::quoted_name(name) +
                           ": expected reference, fast, portable, avx2, avxvnni or avx512vnni");
  }
  switch (requested) {
    case Kernels::automatic: break;
    case Kernels::reference: reference = true; return Status::ok();
    case Kernels::portable: isa = Isa::Portable; break;
    case Kernels::avx2: isa = Isa::Avx2; break;
    case Kernels::avxvnni: isa = Isa::AvxVnni; break;
    case Kernels::avx512vnni: isa = Isa::Avx512Vnni; break;
  }
  if (!fx::fast::isa_supported(isa))
    return invalid_input(std::string("kernels ") + fx::fast::isa_name(isa) + ": this CPU lacks the instruction set");
  if (automatic && !fx::fast::isa_allowed(isa))
    return invalid_input("QFLOW_RT_KERNELS=" + env_name + ": above the instruction-set cap " +
                         isa::level_name(isa::cap()) + " (QFLOW_ISA or --isa)");
  return Status::ok();
}

}  // namespace

Expected<Executor> Executor::create(Model model, Kernels kernels) {
  try {
    if (Status s = validate(model); !s) return s;
    bool reference = false;
    fx::fast::Isa isa = fx::fast::Isa::Portable;
    if (Status s = choose_kernels(kernels, reference, isa); !s) return s;
    Executor ex(std::move(model));
    ex.kernels_ = reference ? "reference" : fx::fast::isa_name(isa);
    const Model& m = ex.model_;
    ex.constants_.resize(m.tensors.size());
    for (size_t i = 0; i < m.tensors.size(); ++i)
      if (m.tensors[i].constant) {
        Value& c = ex.constants_[i];
        c = decode_constant(m.tensors[i]);
        // Constants never change: their range is scanned once here instead of by every run.
        fx::QType q;
        if (detail::to_qtype(c.type, q)) {
          const fx::Range r = fx::range_of(q);
          c.in_range = std::all_of(c.ints.begin(), c.ints.end(), [&](int32_t v) { return v >= r.min && v <= r.max; });
        }
      }
    // Weights are packed once here, never per run.
    std::vector<const Value*> constants;
    for (const Segment& seg : m.segments)
      for (const Op& op : seg.ops) {
        std::shared_ptr<const detail::PackedOp> packed;
        if (!reference && detail::is_integer_op(op.type)) {
          constants.assign(op.inputs.size(), nullptr);
          for (size_t i = 0; i < op.inputs.size(); ++i)
            if (op.inputs[i] >= 0 && m.tensors[static_cast<size_t>(op.inputs[i])].constant)
              constants[i] = &ex.constants_[static_cast<size_t>(op.inputs[i])];
          packed = detail::pack_integer_op(m, op, constants, isa);
        }
        ex.packed_.push_back(std::move(packed));
      }
    if (!reference)
      ex.fused_ =
          std::make_shared<const std::vector<detail::FusedOp>>(detail::fuse_elementwise_tables(m, ex.constants_, isa));
    // Each intermediate tensor is released after the op that reads it last (or writes it,
    // when nothing reads it); model outputs are kept. A fused op reads its root only, a
    // skipped one nothing.
    std::vector<int64_t> last(m.tensors.size(), -1);
    int64_t index = 0;
    for (const Segment& seg : m.segments)
      for (const Op& op : seg.ops) {
        for (const int32_t t : ex.inputs_of(static_cast<size_t>(index), op))
          if (t >= 0) last[static_cast<size_t>(t)] = index;
        for (const int32_t t : ex.outputs_of(static_cast<size_t>(index), op))
          if (t >= 0) last[static_cast<size_t>(t)] = index;
        ++index;
      }
    for (const int32_t t : m.outputs) last[static_cast<size_t>(t)] = -1;
    ex.release_.assign(static_cast<size_t>(index), {});
    for (size_t t = 0; t < m.tensors.size(); ++t)
      if (last[t] >= 0 && !m.tensors[t].constant) ex.release_[static_cast<size_t>(last[t])].push_back(static_cast<int32_t>(t));
    // Tensors whose lifetimes do not overlap share a buffer: a run takes an op output's storage
    // from its thread's buffers and gives it back at the release, so repeated runs reuse memory.
    ex.buffer_.assign(m.tensors.size(), -1);
    std::vector<int32_t> free_buffers;
    index = 0;
    for (const Segment& seg : m.segments)
      for (const Op& op : seg.ops) {
        for (const int32_t t : ex.outputs_of(static_cast<size_t>(index), op)) {
          if (t < 0 || ex.buffer_[static_cast<size_t>(t)] >= 0) continue;
          if (free_buffers.empty()) free_buffers.push_back(ex.buffers_++);
          ex.buffer_[static_cast<size_t>(t)] = free_buffers.back();
          free_buffers.pop_back();
        }
        for (const int32_t t : ex.release_[static_cast<size_t>(index)])
          if (ex.buffer_[static_cast<size_t>(t)] >= 0) free_buffers.push_back(ex.buffer_[static_cast<size_t>(t)]);
        ++index;
      }
    // Raw outputs: the dequantize op writing each output, read before its input is released.
    ex.raw_op_.assign(m.outputs.size(), -1);
    index = 0;
    for (const Segment& seg : m.segments)
      for (const Op& op : seg.ops) {
        if (op.type == "dequantize" && op.inputs.size() == 1 && op.inputs[0] >= 0 && op.outputs.size() == 1 &&
            is_quantized(m.tensors[static_cast<size_t>(op.inputs[0])].type))
          for (size_t k = 0; k < m.outputs.size(); ++k)
            if (m.outputs[k] == op.outputs[0]) ex.raw_op_[k] = index;
        ++index;
      }
    return ex;
  } catch (const std::bad_alloc&) {
    return invalid_input("lowered model: out of memory while preparing the executor");
  } catch (const std::exception& e) {
    return invalid_input(std::string("lowered model: ") + e.what());
  }
}

std::vector<int32_t> Executor::inputs_of(size_t index, const Op& op) const {
  if (fused_ && (*fused_)[index].kind != detail::FusedOp::Kind::AsWritten)
    return (*fused_)[index].kind == detail::FusedOp::Kind::Table ? std::vector<int32_t>{(*fused_)[index].root}
                                                                  : std::vector<int32_t>{};
  return op.inputs;
}

std::vector<int32_t> Executor::outputs_of(size_t index, const Op& op) const {
  if (fused_ && (*fused_)[index].kind == detail::FusedOp::Kind::Skipped) return {};
  return op.outputs;
}

bool Executor::quantized_input(size_t index, ElemType& type, Quant& quant) const {
  if (index >= model_.inputs.size()) return false;
  const int32_t t = model_.inputs[index];
  for (const int32_t o : model_.outputs)
    if (o == t) return false;
  if (model_.tensors[static_cast<size_t>(t)].type == ElemType::u8) {  // a uint8 frame, given as is
    type = ElemType::u8;
    quant = model_.tensors[static_cast<size_t>(t)].quant;
    return true;
  }
  bool found = false;
  for (const Segment& seg : model_.segments)
    for (const Op& op : seg.ops)
      for (const int32_t i : op.inputs) {
        if (i != t) continue;
        if (op.type != "quantize") return false;
        const Tensor& y = model_.tensors[static_cast<size_t>(op.outputs[0])];
        if (found && (y.type != type || y.quant != quant)) return false;
        type = y.type;
        quant = y.quant;
        found = true;
      }
  return found;
}

bool Executor::raw_output(size_t index, ElemType& type, Quant& quant) const {
  if (index >= raw_op_.size() || raw_op_[index] < 0) return false;
  int64_t k = 0;
  for (const Segment& seg : model_.segments)
    for (const Op& op : seg.ops)
      if (k++ == raw_op_[index]) {
        const Tensor& x = model_.tensors[static_cast<size_t>(op.inputs[0])];
        type = x.type;
        quant = x.quant;
        return true;
      }
  return false;
}

// The caller's values, read once: execute copies each into storage it keeps between runs.
struct Executor::Input {
  ElemType type = ElemType::f32;
  std::span<const float> floats;
  std::span<const int32_t> ints;
};

Status Executor::run(const std::vector<std::span<const float>>& inputs, std::vector<std::vector<float>>& outputs) const {
  try {
    std::vector<Input> views(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i) views[i].floats = inputs[i];
    return execute(views, outputs, RunOptions{}, nullptr);
  } catch (const std::bad_alloc&) {
    return invalid_input("lowered model " + detail::quoted_name(model_.name) + ": out of memory");
  } catch (const std::exception& e) {
    return invalid_input(detail::one_line("lowered model " + detail::quoted_name(model_.name) + ": " + e.what()));
  }
}

Status Executor::run_values(const std::vector<Value>& inputs, std::vector<std::vector<float>>& outputs) const {
  return run_values(inputs, outputs, RunOptions{}, nullptr);
}

Status Executor::run_values(const std::vector<Value>& inputs, std::vector<std::vector<float>>& outputs,
                            const RunOptions& options, std::vector<Value>* raw) const {
  try {
    if (!options.raw.empty() && (options.raw.size() != model_.outputs.size() || !raw))
      return invalid_input("lowered model " + detail::quoted_name(model_.name) + ": raw outputs requested for " +
                           std::to_string(options.raw.size()) + " outputs, the model has " +
                           std::to_string(model_.outputs.size()));
    std::vector<Input> views(inputs.size());
    for (size_t i = 0; i < inputs.size(); ++i)
      views[i] = Input{inputs[i].type, inputs[i].floats, std::span<const int32_t>(inputs[i].ints.data(), inputs[i].ints.size())};
    return execute(views, outputs, options, raw);
  } catch (const std::bad_alloc&) {
    return invalid_input("lowered model " + detail::quoted_name(model_.name) + ": out of memory");
  } catch (const std::exception& e) {
    return invalid_input(detail::one_line("lowered model " + detail::quoted_name(model_.name) + ": " + e.what()));
  }
}

Status Executor::execute(const std::vector<Input>& inputs, std::vector<std::vector<float>>& outputs,
                         const RunOptions& options, std::vector<Value>* raw) const {
  const Model& m = model_;
  const std::string prefix = "lowered model " + detail::quoted_name(m.name) + ": ";
  if (inputs.size() != m.inputs.size())
    return invalid_input(prefix + "expected " + std::to_string(m.inputs.size()) + " inputs, got " +
                         std::to_string(inputs.size()));
  std::vector<Value> values(m.tensors.size());
  // The storage of the thread's previous runs (of any executor), or of the caller's scratch:
  // swapped in and out, never copied. Past the op outputs' buffers, one per input, which the
  // inputs are copied into: fresh storage for a large input on every run costs a page fault
  // per 4 KiB (a 640x640 page: 1200 faults, about 15% of the run).
  thread_local std::vector<Value> thread_buffers;
  std::vector<Value>& buffers = options.scratch ? options.scratch->buffers : thread_buffers;
  if (buffers.size() < static_cast<size_t>(buffers_) + inputs.size())
    buffers.resize(static_cast<size_t>(buffers_) + inputs.size());
  const auto swap_buffer = [&](size_t t) {
    if (buffer_[t] < 0) return;
    Value& b = buffers[static_cast<size_t>(buffer_[t])];
    values[t].ints.swap(b.ints);
    values[t].floats.swap(b.floats);
    values[t].longs.swap(b.longs);
  };
  std::vector<const Value*> slot(m.tensors.size(), nullptr);
  for (size_t i = 0; i < m.tensors.size(); ++i)
    if (m.tensors[i].constant) slot[i] = &constants_[i];

  // Ops skipped because their quantized result was given as an input.
  std::vector<char> skip(release_.size(), 0);
  for (size_t k = 0; k < inputs.size(); ++k) {
    const auto t = static_cast<size_t>(m.inputs[k]);
    const Tensor& tensor = m.tensors[t];
    const Input& v = inputs[k];
    Value& copy = buffers[static_cast<size_t>(buffers_) + k];
    const auto n = static_cast<size_t>(element_count(tensor.shape));
    const std::string label = "input " + std::to_string(k) + " (" + detail::quoted_name(tensor.name) + ")";
    if (tensor.type == ElemType::u8) {  // a uint8 frame (input_convert reads it)
      Value& frame = copy;
      frame.type = ElemType::u8;
      frame.shape = tensor.shape;
      if (v.type == ElemType::f32) {
        if (v.floats.size() != n)
          return invalid_input(prefix + label + " has " + std::to_string(v.floats.size()) + " values, expected " +
                               std::to_string(n) + " for shape " + detail::shape_string(tensor.shape));
        frame.ints.resize(n);
        for (size_t i = 0; i < n; ++i) {
          const float x = v.floats[i];
          if (!(x >= 0.0f && x <= 255.0f) || x != static_cast<float>(static_cast<int32_t>(x)))
            return invalid_input(prefix + label + " is a uint8 frame: element " + std::to_string(i) + " is " +
                                 std::to_string(x) + ", not an integer in [0, 255]");
          frame.ints[i] = static_cast<int32_t>(x);
        }
      } else if (v.type == ElemType::u8) {
        if (v.ints.size() != n)
          return invalid_input(prefix + label + " has " + std::to_string(v.ints.size()) + " values, expected " +
                               std::to_string(n) + " for shape " + detail::shape_string(tensor.shape));
        for (const int32_t x : v.ints)
          if (x < 0 || x > 255) return invalid_input(prefix + label + " holds " + std::to_string(x) + ", outside u8");
        frame.ints.assign(v.ints.begin(), v.ints.end());
      } else {
        return invalid_input(prefix + label + " is a uint8 frame and cannot be given as " + type_name(v.type));
      }
      frame.in_range = true;  // checked just above
      slot[t] = &frame;
      continue;
    }
    if (v.type == ElemType::f32) {
      if (v.floats.size() != n)
        return invalid_input(prefix + label + " has " + std::to_string(v.floats.size()) + " values, expected " +
                             std::to_string(n) + " for shape " + detail::shape_string(tensor.shape));
      copy.type = ElemType::f32;
      copy.shape = tensor.shape;
      copy.in_range = false;  // only the executor's own ops vouch for a range
      copy.floats.assign(v.floats.begin(), v.floats.end());
      slot[t] = &copy;
      continue;
    }
    ElemType qt;
    Quant q;
    if (!quantized_input(k, qt, q) || qt != v.type)
      return invalid_input(prefix + label + " cannot be given as " + type_name(v.type) +
                           (quantized_input(k, qt, q) ? std::string(" (it takes ") + type_name(qt) + ")" : std::string()));
    if (v.ints.size() != n)
      return invalid_input(prefix + label + " has " + std::to_string(v.ints.size()) + " values, expected " +
                           std::to_string(n) + " for shape " + detail::shape_string(tensor.shape));
    fx::QType fq;
    detail::to_qtype(qt, fq);
    const fx::Range r = fx::range_of(fq);
    for (const int32_t x : v.ints)
      if (x < r.min || x > r.max)
        return invalid_input(prefix + label + " holds " + std::to_string(x) + ", outside " + type_name(qt));
    size_t index = 0;
    for (const Segment& seg : m.segments)
      for (const Op& op : seg.ops) {
        if (!op.inputs.empty() && op.inputs[0] == static_cast<int32_t>(t)) {
          const auto y = static_cast<size_t>(op.outputs[0]);
          swap_buffer(y);  // the storage its op would have written
          values[y].type = qt;
          values[y].shape = m.tensors[y].shape;
          values[y].ints.assign(v.ints.begin(), v.ints.end());
          values[y].in_range = true;  // checked just above
          slot[y] = &values[y];
          skip[index] = 1;
        }
        ++index;
      }
  }

  const bool want_raw = !options.raw.empty();
  if (want_raw) {  // resized, not reassigned: a context's raw buffers keep their storage between runs
    raw->resize(m.outputs.size());
    for (size_t k = 0; k < m.outputs.size(); ++k)
      if (!options.raw[k]) (*raw)[k] = Value{};
  }
  using Clock = std::chrono::steady_clock;
  if (options.segment_seconds) options.segment_seconds->resize(m.segments.size(), 0.0);
  if (options.op_seconds) options.op_seconds->resize(release_.size(), 0.0);
  size_t index = 0;
  std::vector<const Value*> ins;
  std::vector<Value*> outs;
  for (size_t segment = 0; segment < m.segments.size(); ++segment) {
    const Segment& seg = m.segments[segment];
    const Clock::time_point segment_start = options.segment_seconds ? Clock::now() : Clock::time_point{};
    for (const Op& op : seg.ops) {
      const Clock::time_point op_start = options.op_seconds ? Clock::now() : Clock::time_point{};
      const detail::FusedOp* fused = fused_ ? &(*fused_)[index] : nullptr;
      if (!skip[index] && fused && fused->kind == detail::FusedOp::Kind::Table) {
        const auto root = static_cast<size_t>(fused->root), y = static_cast<size_t>(op.outputs[0]);
        const Value* x = slot[root];
        if (!x) return invalid_input(prefix + detail::op_label(op) + ": its input was not computed");
        swap_buffer(y);
        allocate(values[y], m.tensors[y].type, m.tensors[y].shape, true);
        const Status s = fx::fast::apply_lut(fused->table, fused->isa, x->ints, values[y].ints, x->in_range);
        if (!s.is_ok()) return invalid_input(detail::one_line(prefix + detail::op_label(op) + ": " + s.message()));
        values[y].in_range = true;  // table entries come from the reference, clamped to the type
        slot[y] = &values[y];
      } else if (!skip[index] && !(fused && fused->kind == detail::FusedOp::Kind::Skipped)) {
        ins.assign(op.inputs.size(), nullptr);
        for (size_t i = 0; i < op.inputs.size(); ++i)
          if (op.inputs[i] >= 0) ins[i] = slot[static_cast<size_t>(op.inputs[i])];
        outs.assign(op.outputs.size(), nullptr);
        const bool integer = detail::is_integer_op(op.type);
        for (size_t i = 0; i < op.outputs.size(); ++i) {
          if (op.outputs[i] < 0) continue;  // an absent optional output of a CPU op
          const auto y = static_cast<size_t>(op.outputs[i]);
          swap_buffer(y);
          allocate(values[y], m.tensors[y].type, m.tensors[y].shape, integer);
          outs[i] = &values[y];
          slot[y] = &values[y];
        }
        const Status s = integer ? detail::run_integer_op(m, op, ins, outs, packed_[index].get())
                                                        : detail::run_cpu_op(m, op, ins, outs);
        if (!s) return invalid_input(detail::one_line(prefix + detail::op_label(op) + ": " + s.message()));
      }
      if (want_raw)
        for (size_t k = 0; k < m.outputs.size(); ++k)
          if (options.raw[k] && raw_op_[k] == static_cast<int64_t>(index)) {
            const Value* x = slot[static_cast<size_t>(op.inputs[0])];
            if (!x) return invalid_input(prefix + "the raw form of output " + std::to_string(k) + " was not computed");
            (*raw)[k].type = x->type;
            (*raw)[k].shape = m.tensors[static_cast<size_t>(op.inputs[0])].shape;
            (*raw)[k].ints = x->ints;
          }
      for (const int32_t t : release_[index]) {
        swap_buffer(static_cast<size_t>(t));
        values[static_cast<size_t>(t)] = Value{};
        slot[static_cast<size_t>(t)] = nullptr;
      }
      if (options.op_seconds)
        (*options.op_seconds)[index] += std::chrono::duration<double>(Clock::now() - op_start).count();
      ++index;
    }
    if (options.segment_seconds)
      (*options.segment_seconds)[segment] += std::chrono::duration<double>(Clock::now() - segment_start).count();
  }

  // Copied into the caller's vectors, whose storage a caller running the model again keeps:
  // fresh storage for a large output every run costs a page fault per 4 KiB.
  outputs.resize(m.outputs.size());
  for (size_t k = 0; k < m.outputs.size(); ++k) {
    const Value* v = slot[static_cast<size_t>(m.outputs[k])];
    if (!v) return invalid_input(prefix + "output " + std::to_string(k) + " was not computed");
    outputs[k].assign(v->floats.begin(), v->floats.end());
  }
  for (const int32_t t : m.outputs)
    if (slot[static_cast<size_t>(t)]) {  // once per tensor, even when listed twice
      swap_buffer(static_cast<size_t>(t));
      slot[static_cast<size_t>(t)] = nullptr;
    }
  return Status::ok();
}

}  // namespace qflow::lowered
