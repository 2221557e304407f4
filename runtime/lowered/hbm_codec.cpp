// The lowered model inside an .hbm: the tensor table section, one segment section per lowered
// segment with its ops as the op stream, and the constants in the weights section.
// docs/hbm-format.md, "Op streams and the tensor table", specifies every byte.
#include "qflow/runtime/hbm_codec.h"

#include <algorithm>
#include <bit>
#include <cmath>
#include <limits>
#include <map>
#include <set>
#include <tuple>
#include <utility>

#include "hbm/byte_reader.h"
#include "hbm/byte_writer.h"
#include "qflow/runtime/hbm_reader.h"
#include "hbm/writer.h"
#include "qflow/runtime/executor.h"

namespace qflow::lowered {
namespace {

using hbm::ByteReader;
using hbm::ByteWriter;

constexpr uint64_t kConstantAlignment = 64;
constexpr uint8_t kFlagConstant = 1;
constexpr size_t kMaxTensorRank = hbm::kMaxRank;

// Names come from the file: control characters are shown as '?' so a message stays one line.
std::string one_line(std::string text) {
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return text;
}

Status fail(const std::string& message) { return invalid_input(one_line("hbm: " + message)); }

// Messages from lowered::validate may or may not carry the prefix.
Status with_prefix(const Status& s) {
  if (s.is_ok()) return s;
  return fail(s.message().rfind("hbm: ", 0) == 0 ? s.message().substr(5) : s.message());
}

uint64_t align_up(uint64_t v) { return (v + kConstantAlignment - 1) / kConstantAlignment * kConstantAlignment; }

bool fits_u32(size_t n) { return n <= std::numeric_limits<uint32_t>::max(); }

void f64(ByteWriter& w, double v) { w.u64(std::bit_cast<uint64_t>(v)); }
double f64(ByteReader& r) { return std::bit_cast<double>(r.u64()); }

// Where each constant's bytes sit in the weights section: in tensor order, each at the next
// multiple of 64 after the previous one's end.
struct WeightsLayout {
  std::vector<hbm::WeightRef> refs;  // per tensor; {0, 0} for non-constants
  uint64_t size = 0;
};

WeightsLayout layout_weights(const Model& model) {
  WeightsLayout layout;
  layout.refs.resize(model.tensors.size());
  uint64_t end = 0;
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const Tensor& t = model.tensors[i];
    if (!t.constant) continue;
    const uint64_t offset = t.data.empty() ? end : align_up(end);
    layout.refs[i] = {offset, t.data.size()};
    end = offset + t.data.size();
  }
  layout.size = end;
  return layout;
}

// The tensors crossing each segment's boundary and the constants each segment reads.
struct SegmentIo {
  std::vector<std::string> reads;
  std::vector<std::string> writes;
  std::vector<hbm::WeightRef> weights;
};

// Indices were checked before this runs (validate on encode, the decoder on decode).
std::vector<SegmentIo> segment_io(const Model& model, const WeightsLayout& layout) {
  const size_t n = model.tensors.size();
  std::vector<int64_t> producer(n, -1);  // segment index writing each tensor
  for (size_t s = 0; s < model.segments.size(); ++s) {
    for (const Op& op : model.segments[s].ops) {
      for (int32_t o : op.outputs) {
        if (o >= 0 && static_cast<size_t>(o) < n) producer[static_cast<size_t>(o)] = static_cast<int64_t>(s);
      }
    }
  }
  std::vector<std::set<size_t>> readers(n);
  for (size_t s = 0; s < model.segments.size(); ++s) {
    for (const Op& op : model.segments[s].ops) {
      for (int32_t i : op.inputs) {
        if (i >= 0 && static_cast<size_t>(i) < n) readers[static_cast<size_t>(i)].insert(s);
      }
    }
  }
  std::vector<bool> is_output(n, false);
  for (int32_t o : model.outputs) {
    if (o >= 0 && static_cast<size_t>(o) < n) is_output[static_cast<size_t>(o)] = true;
  }

  std::vector<SegmentIo> io(model.segments.size());
  for (size_t s = 0; s < model.segments.size(); ++s) {
    std::set<size_t> seen_read, seen_weight, seen_write;
    for (const Op& op : model.segments[s].ops) {
      for (int32_t i : op.inputs) {
        if (i < 0 || static_cast<size_t>(i) >= n) continue;
        const size_t t = static_cast<size_t>(i);
        if (model.tensors[t].constant) {
          if (seen_weight.insert(t).second) io[s].weights.push_back(layout.refs[t]);
        } else if (producer[t] != static_cast<int64_t>(s) && seen_read.insert(t).second) {
          io[s].reads.push_back(model.tensors[t].name);
        }
      }
      for (int32_t o : op.outputs) {
        if (o < 0 || static_cast<size_t>(o) >= n) continue;
        const size_t t = static_cast<size_t>(o);
        bool crosses = is_output[t];
        for (size_t reader : readers[t]) crosses = crosses || reader != s;
        if (crosses && seen_write.insert(t).second) io[s].writes.push_back(model.tensors[t].name);
      }
    }
  }
  return io;
}

// The quantized form an input takes on the device: every consumer is a `quantize` op and all
// of them produce the same type and quantization. The scale must survive the conversion to
// the descriptor's f32 and the zero point fit the type; otherwise the input is float only.
bool quantized_form(const Model& model, size_t input, hbm::DType& dtype, hbm::Quantization& quant) {
  const int32_t index = model.inputs[input];
  const Tensor* common = nullptr;
  for (const Segment& seg : model.segments) {
    for (const Op& op : seg.ops) {
      for (int32_t i : op.inputs) {
        if (i != index) continue;
        if (op.type != "quantize" || op.outputs.size() != 1 || op.outputs[0] < 0 ||
            static_cast<size_t>(op.outputs[0]) >= model.tensors.size()) {
          return false;
        }
        const Tensor& out = model.tensors[static_cast<size_t>(op.outputs[0])];
        if (!is_quantized(out.type)) return false;
        if (common && (common->type != out.type || !(common->quant == out.quant))) return false;
        common = &out;
      }
    }
  }
  if (!common) return false;
  const float scale = static_cast<float>(common->quant.scale);
  if (!std::isfinite(scale) || !(scale > 0.0f)) return false;
  const int32_t zp = common->quant.zero_point;
  int32_t low = 0, high = 0;
  switch (common->type) {
    case ElemType::i8: low = -128; high = 127; break;
    case ElemType::u8: low = 0; high = 255; break;
    case ElemType::i16: low = -32768; high = 32767; break;
    case ElemType::u16: low = 0; high = 65535; break;
    default: return false;
  }
  if (zp < low || zp > high) return false;
  dtype = static_cast<hbm::DType>(common->type);
  quant = {hbm::QuantKind::per_tensor, 0, {scale}, {zp}};
  return true;
}

hbm::TensorDesc describe(const Model& model, int32_t index) {
  const Tensor& t = model.tensors[static_cast<size_t>(index)];
  hbm::TensorDesc d;
  d.name = t.name;
  d.dtype = hbm::DType::float32;
  d.shape = t.shape;
  d.layout = t.shape.size() == 4 ? hbm::Layout::nchw : hbm::Layout::other;
  return d;
}

std::vector<hbm::TensorDesc> input_descs(const Model& model) {
  std::vector<hbm::TensorDesc> descs;
  for (size_t i = 0; i < model.inputs.size(); ++i) {
    hbm::TensorDesc d = describe(model, model.inputs[i]);
    hbm::DType dtype{};
    hbm::Quantization quant;
    if (model.tensors[static_cast<size_t>(model.inputs[i])].type == ElemType::u8) {
      // A uint8 frame: the layout its input_convert reads (nv12 is "other"), or NCHW when a
      // conv reads it directly.
      d.dtype = hbm::DType::uint8;
      for (const Segment& seg : model.segments)
        for (const Op& op : seg.ops)
          if (op.type == "input_convert" && !op.inputs.empty() && op.inputs[0] == model.inputs[i]) {
            std::string format, layout = "nhwc";
            for (const Attribute& a : op.attributes) {
              if (a.name == "format" && !a.strings.empty()) format = a.strings[0];
              if (a.name == "layout" && !a.strings.empty()) layout = a.strings[0];
            }
            if (format != "nv12") d.layout = layout == "nchw" ? hbm::Layout::nchw : hbm::Layout::nhwc;
          }
    } else if (quantized_form(model, i, dtype, quant)) {
      d.dtype = dtype;
      d.quant = std::move(quant);
    }
    descs.push_back(std::move(d));
  }
  return descs;
}

std::vector<hbm::TensorDesc> output_descs(const Model& model) {
  std::vector<hbm::TensorDesc> descs;
  for (int32_t o : model.outputs) descs.push_back(describe(model, o));
  return descs;
}

std::vector<uint8_t> encode_tensor_table(const Model& model, const WeightsLayout& layout) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(model.tensors.size()));
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const Tensor& t = model.tensors[i];
    w.string(t.name);
    w.u8(static_cast<uint8_t>(t.type));
    w.u8(t.constant ? kFlagConstant : 0);
    w.u32(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) w.i64(d);
    f64(w, t.quant.scale);
    w.i32(t.quant.zero_point);
    if (t.constant) {
      w.u64(layout.refs[i].offset);
      w.u64(layout.refs[i].size);
    }
  }
  for (const auto* list : {&model.inputs, &model.outputs}) {
    w.u32(static_cast<uint32_t>(list->size()));
    for (int32_t v : *list) w.u32(static_cast<uint32_t>(v));
  }
  return w.take();
}

std::vector<uint8_t> encode_ops(const Segment& seg) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(seg.ops.size()));
  for (const Op& op : seg.ops) {
    w.string(op.type);
    w.string(op.name);
    for (const auto* list : {&op.inputs, &op.outputs}) {
      w.u32(static_cast<uint32_t>(list->size()));
      for (int32_t v : *list) w.i32(v);
    }
    w.u32(static_cast<uint32_t>(op.attributes.size()));
    for (const Attribute& a : op.attributes) {
      w.string(a.name);
      w.u32(static_cast<uint32_t>(a.ints.size()));
      for (int64_t v : a.ints) w.i64(v);
      w.u32(static_cast<uint32_t>(a.floats.size()));
      for (double v : a.floats) f64(w, v);
      w.u32(static_cast<uint32_t>(a.strings.size()));
      for (const std::string& s : a.strings) w.string(s);
    }
  }
  return w.take();
}

// Sizes the u32 counts and lengths of the encoding must hold.
Status check_sizes(const Model& model) {
  auto big = [](const std::string& what) { return fail(what + " has more than 2^32 - 1 entries or bytes"); };
  if (!fits_u32(model.tensors.size()) || !fits_u32(model.inputs.size()) || !fits_u32(model.outputs.size()))
    return big("the model");
  for (const Tensor& t : model.tensors) {
    if (!fits_u32(t.name.size())) return big("a tensor name");
    if (t.shape.size() > kMaxTensorRank)
      return fail("tensor '" + t.name + "' has rank " + std::to_string(t.shape.size()) + ", more than " +
                  std::to_string(kMaxTensorRank));
    if (!t.constant && !t.data.empty()) return fail("tensor '" + t.name + "' is not constant but carries data");
  }
  for (const Segment& seg : model.segments) {
    if (!fits_u32(seg.ops.size())) return big("segment " + std::to_string(seg.id));
    for (const Op& op : seg.ops) {
      if (!fits_u32(op.type.size()) || !fits_u32(op.name.size()) || !fits_u32(op.inputs.size()) ||
          !fits_u32(op.outputs.size()) || !fits_u32(op.attributes.size()))
        return big("op '" + op.name.substr(0, 64) + "'");
      for (const Attribute& a : op.attributes) {
        if (!fits_u32(a.name.size()) || !fits_u32(a.ints.size()) || !fits_u32(a.floats.size()) ||
            !fits_u32(a.strings.size()))
          return big("an attribute of op '" + op.name.substr(0, 64) + "'");
        for (const std::string& s : a.strings)
          if (!fits_u32(s.size())) return big("a string attribute");
      }
    }
  }
  return Status::ok();
}

// --- decoding ---------------------------------------------------------------------------

void decode_tensor_table(ByteReader& r, Model& model, const std::vector<uint8_t>& weights) {
  const uint32_t n = r.count(22, "tensors");
  uint64_t end = 0;  // where the next constant may start
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    Tensor t;
    t.name = r.string();
    const uint8_t type = r.u8();
    const uint8_t flags = r.u8();
    const uint32_t rank = r.count(8, "dimensions");
    if (r.ok() && rank > kMaxTensorRank) {
      r.fail("tensor " + std::to_string(i) + " has rank " + std::to_string(rank) + ", more than " +
             std::to_string(kMaxTensorRank));
    }
    for (uint32_t d = 0; d < rank && r.ok(); ++d) t.shape.push_back(r.i64());
    t.quant.scale = f64(r);
    t.quant.zero_point = r.i32();
    if (!r.ok()) return;
    const std::string who = "tensor " + std::to_string(i) + " '" + t.name + "'";
    if (type < static_cast<uint8_t>(ElemType::f32) || type > static_cast<uint8_t>(ElemType::i64)) {
      r.fail(who + " has unknown element type " + std::to_string(type));
      return;
    }
    t.type = static_cast<ElemType>(type);
    if ((flags & ~kFlagConstant) != 0) {
      r.fail(who + " has unknown flags " + std::to_string(flags));
      return;
    }
    t.constant = (flags & kFlagConstant) != 0;
    if (t.constant) {
      const uint64_t offset = r.u64();
      const uint64_t size = r.u64();
      if (!r.ok()) return;
      const uint64_t expected = size == 0 ? end : align_up(end);
      if (offset > weights.size() || size > weights.size() - offset) {
        r.fail(who + " data (offset " + std::to_string(offset) + ", size " + std::to_string(size) +
               ") is outside the " + std::to_string(weights.size()) + "-byte weights section");
        return;
      }
      if (offset != expected) {
        r.fail(who + " data starts at weights offset " + std::to_string(offset) + ", expected " +
               std::to_string(expected) + " (constants follow each other, 64-byte aligned)");
        return;
      }
      for (uint64_t p = end; p < offset; ++p) {
        if (weights[p] != 0) {
          r.fail("weights byte " + std::to_string(p) + " is padding between constants but is not zero");
          return;
        }
      }
      t.data.assign(weights.begin() + static_cast<std::ptrdiff_t>(offset),
                    weights.begin() + static_cast<std::ptrdiff_t>(offset + size));
      end = offset + size;
    }
    model.tensors.push_back(std::move(t));
  }
  if (!r.ok()) return;
  if (end != weights.size()) {
    r.fail("the constants end at weights byte " + std::to_string(end) + " but the weights section has " +
           std::to_string(weights.size()) + " bytes");
    return;
  }
  for (auto* list : {&model.inputs, &model.outputs}) {
    const char* what = list == &model.inputs ? "model inputs" : "model outputs";
    const uint32_t count = r.count(4, what);
    for (uint32_t k = 0; k < count && r.ok(); ++k) {
      const uint32_t v = r.u32();
      if (r.ok() && v >= model.tensors.size()) {
        r.fail(std::string(what) + " entry " + std::to_string(k) + " is tensor " + std::to_string(v) + " of " +
               std::to_string(model.tensors.size()));
      }
      list->push_back(static_cast<int32_t>(v));
    }
  }
}

// An op's input or output indices; -1 (absent) is read where `absent_allowed`, and validate()
// then decides whether that position may be absent.
void decode_indices(ByteReader& r, std::vector<int32_t>& out, size_t tensors, bool inputs, bool absent_allowed,
                    const std::string& who) {
  const uint32_t n = r.count(4, inputs ? "inputs" : "outputs");
  for (uint32_t k = 0; k < n && r.ok(); ++k) {
    const int32_t v = r.i32();
    if (!r.ok()) return;
    if ((v < 0 && !(absent_allowed && v == -1)) || (v >= 0 && static_cast<size_t>(v) >= tensors)) {
      r.fail(who + (inputs ? " input " : " output ") + std::to_string(k) + " is tensor " + std::to_string(v) +
             " (the model has " + std::to_string(tensors) + " tensors" +
             (absent_allowed ? std::string("; -1 marks an absent ") + (inputs ? "input)" : "output)") : ")"));
      return;
    }
    out.push_back(v);
  }
}

void decode_ops(ByteReader& r, Segment& seg, size_t tensors) {
  const uint32_t n = r.count(20, "ops");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    Op op;
    op.type = r.string();
    op.name = r.string();
    if (!r.ok()) return;
    const std::string who = "op " + std::to_string(i) + " (" + op.type.substr(0, 64) + ")";
    decode_indices(r, op.inputs, tensors, true, true, who);
    // CPU ops may lack optional ONNX outputs.
    decode_indices(r, op.outputs, tensors, false, op.type.starts_with("cpu."), who);
    const uint32_t attributes = r.count(16, "attributes");
    for (uint32_t k = 0; k < attributes && r.ok(); ++k) {
      Attribute a;
      a.name = r.string();
      const uint32_t ints = r.count(8, "ints");
      for (uint32_t j = 0; j < ints && r.ok(); ++j) a.ints.push_back(r.i64());
      const uint32_t floats = r.count(8, "floats");
      for (uint32_t j = 0; j < floats && r.ok(); ++j) a.floats.push_back(f64(r));
      const uint32_t strings = r.count(4, "strings");
      for (uint32_t j = 0; j < strings && r.ok(); ++j) a.strings.push_back(r.string());
      if (!r.ok()) return;
      if (a.name.empty()) {
        r.fail(who + " attribute " + std::to_string(k) + " has an empty name");
        return;
      }
      if (!op.attributes.empty() && a.name <= op.attributes.back().name) {
        r.fail(who + " attribute '" + a.name.substr(0, 64) + "' does not follow '" +
               op.attributes.back().name.substr(0, 64) + "' (names are sorted and unique)");
        return;
      }
      op.attributes.push_back(std::move(a));
    }
    seg.ops.push_back(std::move(op));
  }
}

std::string segment_label(size_t index, uint32_t id) {
  return "segment " + std::to_string(index) + " (id " + std::to_string(id) + ")";
}

}  // namespace

Expected<hbm::HbmFile> to_hbm(const Model& model, std::string_view toolchain_version) {
  if (Status s = check_sizes(model); !s) return s;
  if (Status s = validate(model); !s) return with_prefix(s);

  const WeightsLayout layout = layout_weights(model);
  hbm::HbmFile file;
  file.platform = model.platform;
  file.toolchain_version = std::string(toolchain_version);
  file.metadata.model_name = model.name;
  auto& props = file.metadata.properties;
  props["platform"] = model.platform;
  props["tensor_count"] = std::to_string(model.tensors.size());
  size_t ops = 0, bpu = 0, cpu = 0;
  std::map<std::string, size_t> histogram;
  for (const Segment& seg : model.segments) {
    (seg.kind == SegmentKind::bpu ? bpu : cpu) += 1;
    ops += seg.ops.size();
    for (const Op& op : seg.ops) ++histogram[op.type];
  }
  props["op_count"] = std::to_string(ops);
  props["bpu_segment_count"] = std::to_string(bpu);
  props["cpu_segment_count"] = std::to_string(cpu);
  for (const auto& [type, count] : histogram) props["op_count." + type] = std::to_string(count);

  file.inputs = input_descs(model);
  file.outputs = output_descs(model);
  file.tensor_table = encode_tensor_table(model, layout);

  const std::vector<SegmentIo> io = segment_io(model, layout);
  for (size_t s = 0; s < model.segments.size(); ++s) {
    const Segment& seg = model.segments[s];
    hbm::Segment out;
    out.id = seg.id;
    out.kind = seg.kind == SegmentKind::bpu ? hbm::SegmentKind::bpu : hbm::SegmentKind::cpu;
    out.reads = io[s].reads;
    out.writes = io[s].writes;
    out.weights = io[s].weights;
    out.op_stream = encode_ops(seg);
    file.segments.push_back(std::move(out));
  }
  file.weights.assign(layout.size, 0);
  for (size_t i = 0; i < model.tensors.size(); ++i) {
    const Tensor& t = model.tensors[i];
    if (t.constant && !t.data.empty()) {
      std::copy(t.data.begin(), t.data.end(), file.weights.begin() + static_cast<std::ptrdiff_t>(layout.refs[i].offset));
    }
  }
  if (Status s = hbm::validate(file); !s) return s;
  return file;
}

Expected<Model> from_hbm(const hbm::HbmFile& file) {
  if (file.tensor_table.empty()) {
    return fail("the file has no tensors section (it does not hold a lowered model)");
  }
  Model model;
  model.name = file.metadata.model_name;
  model.platform = file.platform;
  {
    ByteReader r(file.tensor_table);
    decode_tensor_table(r, model, file.weights);
    if (r.ok() && r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " bytes left over after the encoded data");
    if (!r.ok()) return fail("tensors section: " + r.error());
  }
  for (size_t s = 0; s < file.segments.size(); ++s) {
    const hbm::Segment& in = file.segments[s];
    Segment seg;
    seg.id = in.id;
    seg.kind = in.kind == hbm::SegmentKind::bpu ? SegmentKind::bpu : SegmentKind::cpu;
    ByteReader r(in.op_stream);
    decode_ops(r, seg, model.tensors.size());
    if (r.ok() && r.remaining() != 0) r.fail(std::to_string(r.remaining()) + " bytes left over after the encoded ops");
    if (!r.ok()) return fail(segment_label(s, in.id) + " op stream: " + r.error());
    model.segments.push_back(std::move(seg));
  }
  if (Status s = validate(model); !s) return with_prefix(s);

  // What the writer derives from the model must be what the file says.
  const WeightsLayout layout = layout_weights(model);
  const std::vector<SegmentIo> io = segment_io(model, layout);
  for (size_t s = 0; s < file.segments.size(); ++s) {
    const hbm::Segment& in = file.segments[s];
    const std::string who = segment_label(s, in.id);
    if (in.reads != io[s].reads) return fail(who + " reads list does not match the tensors its ops read");
    if (in.writes != io[s].writes) return fail(who + " writes list does not match the tensors its ops write");
    if (in.weights != io[s].weights) return fail(who + " weight references do not match the constants its ops read");
  }
  const std::vector<hbm::TensorDesc> inputs = input_descs(model);
  const std::vector<hbm::TensorDesc> outputs = output_descs(model);
  for (const auto& [descs, expected, role] :
       {std::tuple{&file.inputs, &inputs, "input"}, std::tuple{&file.outputs, &outputs, "output"}}) {
    if (descs->size() != expected->size()) {
      return fail(std::string(role) + "s section lists " + std::to_string(descs->size()) + " tensors, the model has " +
                  std::to_string(expected->size()));
    }
    for (size_t i = 0; i < descs->size(); ++i) {
      if (!((*descs)[i] == (*expected)[i])) {
        return fail(std::string(role) + " " + std::to_string(i) + " '" + (*descs)[i].name.substr(0, 64) +
                    "' does not match its tensor in the tensors section");
      }
    }
  }
  return model;
}

Expected<std::vector<uint8_t>> encode_hbm(const Model& model, std::string_view toolchain_version) {
  Expected<hbm::HbmFile> file = to_hbm(model, toolchain_version);
  if (!file) return file.status();
  return hbm::write(*file);
}

Expected<Model> decode_hbm(std::span<const uint8_t> bytes, std::span<const std::string_view> supported_platforms) {
  Expected<hbm::HbmFile> file = hbm::parse(bytes, supported_platforms);
  if (!file) return invalid_input(one_line(file.status().message()));
  return from_hbm(*file);
}

}  // namespace qflow::lowered
