// HbmFile: kind names and the layout-independent validation shared by writer and reader.
#include "qflow/runtime/hbm_file.h"

#include <cmath>
#include <cstdio>
#include <limits>
#include <utility>

namespace qflow::hbm {

std::string section_kind_name(uint32_t kind) {
  switch (static_cast<SectionKind>(kind)) {
    case SectionKind::metadata: return "metadata";
    case SectionKind::inputs: return "inputs";
    case SectionKind::outputs: return "outputs";
    case SectionKind::bpu_segment: return "bpu-segment";
    case SectionKind::cpu_segment: return "cpu-segment";
    case SectionKind::weights: return "weights";
    case SectionKind::tensors: return "tensors";
  }
  return "kind " + std::to_string(kind);
}

bool is_known_section_kind(uint32_t kind) {
  return kind >= static_cast<uint32_t>(SectionKind::metadata) &&
         kind <= static_cast<uint32_t>(SectionKind::tensors);
}

std::string_view dtype_name(DType dtype) {
  switch (dtype) {
    case DType::float32: return "float32";
    case DType::int8: return "int8";
    case DType::uint8: return "uint8";
    case DType::int16: return "int16";
    case DType::uint16: return "uint16";
    case DType::int32: return "int32";
  }
  return "";
}

namespace {

std::string format_float(float v) {
  char text[32];
  std::snprintf(text, sizeof text, "%g", static_cast<double>(v));
  return text;
}

bool printable(std::string_view s, char lowest) {
  for (char c : s) {
    if (c < lowest || c > '~') return false;
  }
  return true;
}

bool fits_u32(const std::string& s) { return s.size() <= std::numeric_limits<uint32_t>::max(); }

// The integer range a zero point must lie in for a quantized dtype.
std::pair<int64_t, int64_t> zero_point_range(DType dtype) {
  switch (dtype) {
    case DType::int8: return {-128, 127};
    case DType::uint8: return {0, 255};
    case DType::int16: return {-32768, 32767};
    case DType::uint16: return {0, 65535};
    default: return {std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max()};
  }
}

Status validate_quantization(const TensorDesc& t, const std::string& who) {
  const Quantization& q = t.quant;
  if (q.kind == QuantKind::none) {
    if (q.axis != 0 || !q.scales.empty() || !q.zero_points.empty()) {
      return invalid_input(who + " has no quantization but carries scales, zero points or an axis");
    }
    return Status::ok();
  }
  if (q.kind != QuantKind::per_tensor && q.kind != QuantKind::per_axis) {
    return invalid_input(who + " has unknown quantization kind " +
                         std::to_string(static_cast<unsigned>(q.kind)));
  }
  if (t.dtype == DType::float32) {
    return invalid_input(who + " is float32 but has quantization parameters");
  }
  const std::string counts = std::to_string(q.scales.size()) + " scales, " +
                             std::to_string(q.zero_points.size()) + " zero points";
  if (q.kind == QuantKind::per_tensor) {
    if (q.scales.size() != 1 || q.zero_points.size() != 1 || q.axis != 0) {
      return invalid_input(who + " per-tensor quantization needs one scale, one zero point and "
                           "axis 0; got " + counts + ", axis " + std::to_string(q.axis));
    }
  } else {
    if (q.axis < 0 || static_cast<size_t>(q.axis) >= t.shape.size()) {
      return invalid_input(who + " per-axis quantization axis " + std::to_string(q.axis) +
                           " is outside rank " + std::to_string(t.shape.size()));
    }
    if (q.scales.empty() || q.scales.size() != q.zero_points.size()) {
      return invalid_input(who + " per-axis quantization has " + counts);
    }
    const int64_t dim = t.shape[static_cast<size_t>(q.axis)];
    if (dim >= 0 && static_cast<uint64_t>(dim) != q.scales.size()) {
      return invalid_input(who + " per-axis quantization has " + std::to_string(q.scales.size()) +
                           " scales but dimension " + std::to_string(q.axis) + " is " +
                           std::to_string(dim));
    }
  }
  for (size_t i = 0; i < q.scales.size(); ++i) {
    if (!std::isfinite(q.scales[i]) || !(q.scales[i] > 0.0f)) {
      return invalid_input(who + " scale " + std::to_string(i) + " is " +
                           format_float(q.scales[i]) + " (must be finite and > 0)");
    }
  }
  const auto [low, high] = zero_point_range(t.dtype);
  for (size_t i = 0; i < q.zero_points.size(); ++i) {
    if (q.zero_points[i] < low || q.zero_points[i] > high) {
      return invalid_input(who + " zero point " + std::to_string(i) + " is " +
                           std::to_string(q.zero_points[i]) + ", outside the " +
                           std::string(dtype_name(t.dtype)) + " range [" + std::to_string(low) +
                           ", " + std::to_string(high) + "]");
    }
  }
  return Status::ok();
}

Status validate_tensor(const TensorDesc& t, const std::string& who) {
  if (dtype_name(t.dtype).empty()) {
    return invalid_input(who + " has unknown dtype " + std::to_string(static_cast<unsigned>(t.dtype)));
  }
  if (t.layout != Layout::other && t.layout != Layout::nchw && t.layout != Layout::nhwc) {
    return invalid_input(who + " has unknown layout " + std::to_string(static_cast<unsigned>(t.layout)));
  }
  if (t.shape.size() > kMaxRank) {
    return invalid_input(who + " has rank " + std::to_string(t.shape.size()) + ", more than " +
                         std::to_string(kMaxRank));
  }
  if (t.layout != Layout::other && t.shape.size() != 4) {
    return invalid_input(who + " has layout " + (t.layout == Layout::nchw ? "NCHW" : "NHWC") +
                         " but rank " + std::to_string(t.shape.size()) + " (must be 4)");
  }
  for (size_t i = 0; i < t.shape.size(); ++i) {
    if (t.shape[i] < -1) {
      return invalid_input(who + " dimension " + std::to_string(i) + " is " +
                           std::to_string(t.shape[i]) + " (must be >= 0, or -1 for dynamic)");
    }
  }
  return validate_quantization(t, who);
}

Status validate_tensors(const std::vector<TensorDesc>& tensors, const std::string& role) {
  std::map<std::string_view, size_t> seen;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const TensorDesc& t = tensors[i];
    const std::string index = "hbm: " + role + " " + std::to_string(i);
    if (t.name.empty()) return invalid_input(index + " has an empty name");
    if (!fits_u32(t.name)) return invalid_input(index + " has a name longer than 4 GiB");
    const std::string who = index + " '" + t.name + "'";
    const auto [it, fresh] = seen.emplace(t.name, i);
    if (!fresh) {
      return invalid_input(who + " repeats the name of " + role + " " + std::to_string(it->second));
    }
    if (Status s = validate_tensor(t, who); !s) return s;
  }
  return Status::ok();
}

Status validate_segment(const Segment& s, size_t index, uint64_t weights_size) {
  const std::string who = "hbm: segment " + std::to_string(index) + " (id " + std::to_string(s.id) + ")";
  if (s.kind != SegmentKind::bpu && s.kind != SegmentKind::cpu) {
    return invalid_input(who + " has unknown kind " + std::to_string(static_cast<unsigned>(s.kind)));
  }
  for (const auto* names : {&s.reads, &s.writes}) {
    for (const std::string& name : *names) {
      if (name.empty() || !fits_u32(name)) {
        return invalid_input(who + (names == &s.reads ? " reads" : " writes") +
                             " a tensor with an empty or oversized name");
      }
    }
  }
  for (size_t i = 0; i < s.weights.size(); ++i) {
    const WeightRef& w = s.weights[i];
    if (w.offset > weights_size || w.size > weights_size - w.offset) {
      return invalid_input(who + " weight reference " + std::to_string(i) + " (offset " +
                           std::to_string(w.offset) + ", size " + std::to_string(w.size) +
                           ") is outside the " + std::to_string(weights_size) +
                           "-byte weights section");
    }
  }
  return Status::ok();
}

}  // namespace

Status validate(const HbmFile& file) {
  if (file.platform.empty() || file.platform.size() >= kPlatformFieldSize ||
      !printable(file.platform, '!')) {
    return invalid_input("hbm: platform name '" + file.platform +
                         "' must be 1 to 15 printable ASCII characters without spaces");
  }
  if (file.toolchain_version.size() >= kToolchainFieldSize ||
      !printable(file.toolchain_version, ' ')) {
    return invalid_input("hbm: toolchain version '" + file.toolchain_version +
                         "' must be at most 31 printable ASCII characters");
  }
  if (!fits_u32(file.metadata.model_name)) return invalid_input("hbm: model name longer than 4 GiB");
  for (const auto& [key, value] : file.metadata.properties) {
    if (key.empty()) return invalid_input("hbm: metadata has an empty key");
    if (!fits_u32(key) || !fits_u32(value)) {
      return invalid_input("hbm: metadata entry '" + key.substr(0, 64) + "' is longer than 4 GiB");
    }
  }
  if (Status s = validate_tensors(file.inputs, "input"); !s) return s;
  if (Status s = validate_tensors(file.outputs, "output"); !s) return s;
  std::map<uint32_t, size_t> ids;
  for (size_t i = 0; i < file.segments.size(); ++i) {
    const Segment& seg = file.segments[i];
    const auto [it, fresh] = ids.emplace(seg.id, i);
    if (!fresh) {
      return invalid_input("hbm: segment " + std::to_string(i) + " has id " + std::to_string(seg.id) +
                           ", already used by segment " + std::to_string(it->second));
    }
    if (Status s = validate_segment(seg, i, file.weights.size()); !s) return s;
  }
  for (size_t i = 0; i < file.unknown_sections.size(); ++i) {
    const RawSection& raw = file.unknown_sections[i];
    const std::string who = "hbm: unknown section " + std::to_string(i);
    if (raw.kind == 0) return invalid_input(who + " has kind 0, which is reserved");
    if (is_known_section_kind(raw.kind)) {
      return invalid_input(who + " has kind " + std::to_string(raw.kind) + ", which is known (" +
                           section_kind_name(raw.kind) + ")");
    }
    if (raw.alignment < kSectionAlignment || raw.alignment > kMaxAlignment ||
        (raw.alignment & (raw.alignment - 1)) != 0) {
      return invalid_input(who + " has alignment " + std::to_string(raw.alignment) +
                           " (must be a power of two in [8, 4096])");
    }
  }
  return Status::ok();
}

}  // namespace qflow::hbm
