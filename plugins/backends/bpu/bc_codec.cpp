// `.bc` files: the lowered model as protobuf (quantized_model.proto).
#include "bc_codec.h"

#include <google/protobuf/io/coded_stream.h>
#include <google/protobuf/io/zero_copy_stream_impl_lite.h>

#include <exception>
#include <limits>
#include <new>

#include "plugins/backends/bpu/quantized_model.pb.h"
#include "qflow/runtime/executor.h"

namespace qflow {
namespace {

constexpr uint32_t kFormatVersion = 1;
constexpr int kMaxRank = 32;

// Names come from the file: control characters are shown as '?' so a message stays one line.
Status bad(const std::string& message) {
  std::string text = "bc: " + message;
  for (char& c : text) {
    if (static_cast<unsigned char>(c) < 0x20 || c == 0x7f) c = '?';
  }
  return invalid_input(std::move(text));
}

template <typename Repeated>
std::vector<int64_t> to_vector64(const Repeated& r) {
  return std::vector<int64_t>(r.begin(), r.end());
}

void to_proto(const lowered::Model& m, bc::Model& out) {
  out.set_format_version(kFormatVersion);
  out.set_name(m.name);
  out.set_platform(m.platform);
  for (const lowered::Tensor& t : m.tensors) {
    bc::Tensor* p = out.add_tensors();
    p->set_name(t.name);
    p->set_type(static_cast<uint32_t>(t.type));
    for (int64_t d : t.shape) p->add_shape(d);
    p->set_scale(t.quant.scale);
    p->set_zero_point(t.quant.zero_point);
    p->set_constant(t.constant);
    p->set_data(std::string(t.data.begin(), t.data.end()));
  }
  for (int32_t i : m.inputs) out.add_inputs(i);
  for (int32_t o : m.outputs) out.add_outputs(o);
  for (const lowered::Segment& s : m.segments) {
    bc::Segment* ps = out.add_segments();
    ps->set_id(s.id);
    ps->set_kind(static_cast<uint32_t>(s.kind));
    for (const lowered::Op& op : s.ops) {
      bc::Op* po = ps->add_ops();
      po->set_type(op.type);
      po->set_name(op.name);
      for (int32_t i : op.inputs) po->add_inputs(i);
      for (int32_t o : op.outputs) po->add_outputs(o);
      for (const lowered::Attribute& a : op.attributes) {
        bc::Attribute* pa = po->add_attributes();
        pa->set_name(a.name);
        for (int64_t v : a.ints) pa->add_ints(v);
        for (double v : a.floats) pa->add_floats(v);
        for (const std::string& v : a.strings) pa->add_strings(v);
      }
    }
  }
}

Expected<lowered::Model> from_proto(const bc::Model& p) {
  if (p.format_version() != kFormatVersion) {
    return bad("format version " + std::to_string(p.format_version()) + " is not supported (this reader reads " +
               std::to_string(kFormatVersion) + ")");
  }
  lowered::Model m;
  m.name = p.name();
  m.platform = p.platform();
  for (int i = 0; i < p.tensors_size(); ++i) {
    const bc::Tensor& pt = p.tensors(i);
    const std::string who = "tensor " + std::to_string(i) + " '" + pt.name().substr(0, 64) + "'";
    if (pt.type() < static_cast<uint32_t>(lowered::ElemType::f32) || pt.type() > static_cast<uint32_t>(lowered::ElemType::i64))
      return bad(who + " has unknown element type " + std::to_string(pt.type()));
    if (pt.shape_size() > kMaxRank)
      return bad(who + " has rank " + std::to_string(pt.shape_size()) + ", more than " + std::to_string(kMaxRank));
    if (!pt.constant() && !pt.data().empty()) return bad(who + " is not constant but carries data");
    lowered::Tensor t;
    t.name = pt.name();
    t.type = static_cast<lowered::ElemType>(pt.type());
    t.shape = to_vector64(pt.shape());
    t.quant.scale = pt.scale();
    t.quant.zero_point = pt.zero_point();
    t.constant = pt.constant();
    t.data.assign(pt.data().begin(), pt.data().end());
    m.tensors.push_back(std::move(t));
  }
  const int64_t tensors = static_cast<int64_t>(m.tensors.size());
  auto check_index = [&](int32_t v, bool optional, const std::string& who) -> Status {
    if ((v < 0 && !(optional && v == -1)) || v >= tensors)
      return bad(who + " is tensor " + std::to_string(v) + " (the model has " + std::to_string(tensors) + " tensors)");
    return Status::ok();
  };
  for (int i = 0; i < p.inputs_size(); ++i) {
    QFLOW_RETURN_IF_ERROR(check_index(p.inputs(i), false, "model input " + std::to_string(i)));
    m.inputs.push_back(p.inputs(i));
  }
  for (int i = 0; i < p.outputs_size(); ++i) {
    QFLOW_RETURN_IF_ERROR(check_index(p.outputs(i), false, "model output " + std::to_string(i)));
    m.outputs.push_back(p.outputs(i));
  }
  for (int s = 0; s < p.segments_size(); ++s) {
    const bc::Segment& ps = p.segments(s);
    const std::string seg_who = "segment " + std::to_string(s) + " (id " + std::to_string(ps.id()) + ")";
    if (ps.kind() > static_cast<uint32_t>(lowered::SegmentKind::cpu))
      return bad(seg_who + " has unknown kind " + std::to_string(ps.kind()));
    lowered::Segment seg;
    seg.id = ps.id();
    seg.kind = static_cast<lowered::SegmentKind>(ps.kind());
    for (int k = 0; k < ps.ops_size(); ++k) {
      const bc::Op& po = ps.ops(k);
      const std::string who = seg_who + " op " + std::to_string(k) + " (" + po.type().substr(0, 64) + ")";
      lowered::Op op;
      op.type = po.type();
      op.name = po.name();
      for (int j = 0; j < po.inputs_size(); ++j) {
        QFLOW_RETURN_IF_ERROR(check_index(po.inputs(j), true, who + " input " + std::to_string(j)));
        op.inputs.push_back(po.inputs(j));
      }
      // CPU ops may lack optional ONNX outputs (-1); validate() decides which may.
      for (int j = 0; j < po.outputs_size(); ++j) {
        QFLOW_RETURN_IF_ERROR(check_index(po.outputs(j), op.type.starts_with("cpu."), who + " output " + std::to_string(j)));
        op.outputs.push_back(po.outputs(j));
      }
      for (int j = 0; j < po.attributes_size(); ++j) {
        const bc::Attribute& pa = po.attributes(j);
        if (pa.name().empty()) return bad(who + " attribute " + std::to_string(j) + " has an empty name");
        if (!op.attributes.empty() && pa.name() <= op.attributes.back().name)
          return bad(who + " attribute '" + pa.name().substr(0, 64) + "' does not follow '" +
                     op.attributes.back().name.substr(0, 64) + "' (names are sorted and unique)");
        lowered::Attribute a;
        a.name = pa.name();
        a.ints = to_vector64(pa.ints());
        a.floats.assign(pa.floats().begin(), pa.floats().end());
        a.strings.assign(pa.strings().begin(), pa.strings().end());
        op.attributes.push_back(std::move(a));
      }
      seg.ops.push_back(std::move(op));
    }
    m.segments.push_back(std::move(seg));
  }
  if (Status s = lowered::validate(m); !s) return bad(s.message());
  return m;
}

}  // namespace

Expected<std::string> encode_bc(const lowered::Model& model) {
  try {
    bc::Model proto;
    to_proto(model, proto);
    const size_t size = proto.ByteSizeLong();
    if (size > static_cast<size_t>(std::numeric_limits<int>::max()))
      return unsupported("bc: the model needs " + std::to_string(size) + " bytes, more than protobuf's 2 GiB limit");
    std::string out;
    {
      google::protobuf::io::StringOutputStream stream(&out);
      google::protobuf::io::CodedOutputStream coded(&stream);
      coded.SetSerializationDeterministic(true);
      proto.SerializeWithCachedSizes(&coded);
      if (coded.HadError()) return internal_error("bc: serialization failed");
    }
    return out;
  } catch (const std::bad_alloc&) {
    return internal_error("bc: out of memory while encoding the model");
  }
}

Expected<lowered::Model> decode_bc(std::span<const uint8_t> bytes) {
  try {
    if (bytes.size() > static_cast<size_t>(std::numeric_limits<int>::max()))
      return bad("file is " + std::to_string(bytes.size()) + " bytes, more than protobuf's 2 GiB limit");
    bc::Model proto;
    if (!proto.ParseFromArray(bytes.data(), static_cast<int>(bytes.size())))
      return bad("not a valid quantized model file (protobuf parse failed)");
    return from_proto(proto);
  } catch (const std::bad_alloc&) {
    return bad("out of memory while decoding the model");
  } catch (const std::exception& e) {
    return bad(std::string("cannot decode the model: ") + e.what());
  }
}

}  // namespace qflow
