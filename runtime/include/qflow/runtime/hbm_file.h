// HbmFile: the in-memory form of a .hbm file (header fields and typed sections).
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <map>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/core/status.h"

namespace qflow::hbm {

// Layout constants of format 1.0; docs/hbm-format.md describes every byte.
inline constexpr std::array<uint8_t, 8> kMagic = {'Q', 'F', 'H', 'B', 'M', 0, 0, 0};
inline constexpr uint16_t kVersionMajor = 1;
inline constexpr uint16_t kVersionMinor = 0;
inline constexpr size_t kHeaderSize = 96;
inline constexpr size_t kHeaderCrcOffset = 92;
inline constexpr size_t kSectionEntrySize = 32;
inline constexpr size_t kPlatformFieldSize = 16;
inline constexpr size_t kToolchainFieldSize = 32;
inline constexpr uint32_t kSectionAlignment = 8;
inline constexpr uint32_t kWeightsAlignment = 64;

// Bounds a reader enforces before it trusts a number from the file.
inline constexpr size_t kMaxHeaderSize = 4096;
inline constexpr size_t kMaxSectionEntrySize = 256;
inline constexpr uint32_t kMaxSections = 4096;
inline constexpr uint32_t kMaxAlignment = 4096;
inline constexpr size_t kMaxRank = 32;

enum class SectionKind : uint32_t {
  metadata = 1,
  inputs = 2,
  outputs = 3,
  bpu_segment = 4,
  cpu_segment = 5,
  weights = 6,
  tensors = 7,  // the lowered model's tensor table (runtime/include/qflow/runtime/hbm_codec.h)
};

// "metadata", "bpu-segment", ...; "kind <n>" for a kind this reader does not know.
std::string section_kind_name(uint32_t kind);
bool is_known_section_kind(uint32_t kind);

enum class DType : uint8_t { float32 = 1, int8 = 2, uint8 = 3, int16 = 4, uint16 = 5, int32 = 6 };
enum class Layout : uint8_t { other = 0, nchw = 1, nhwc = 2 };
enum class QuantKind : uint8_t { none = 0, per_tensor = 1, per_axis = 2 };
enum class SegmentKind : uint8_t { bpu = 0, cpu = 1 };

std::string_view dtype_name(DType dtype);  // "float32", ...; "" when not a DType value

// Affine quantization real = scale * (q - zero_point). Per-tensor: one scale and one zero
// point, axis 0. Per-axis: one pair per index of `axis`. None: no scales, axis 0.
struct Quantization {
  QuantKind kind = QuantKind::none;
  int32_t axis = 0;
  std::vector<float> scales;
  std::vector<int32_t> zero_points;

  bool operator==(const Quantization&) const = default;
};

struct TensorDesc {
  std::string name;
  DType dtype = DType::float32;
  std::vector<int64_t> shape;  // -1 marks a dynamic dimension
  Layout layout = Layout::other;
  Quantization quant;

  bool operator==(const TensorDesc&) const = default;
};

// A byte range of the weights section.
struct WeightRef {
  uint64_t offset = 0;
  uint64_t size = 0;

  bool operator==(const WeightRef&) const = default;
};

// A run of ops placed on one engine. The op stream is opaque to the container: the lowering
// defines its encoding. `reads`/`writes` name the tensors crossing the segment's boundary.
struct Segment {
  uint32_t id = 0;
  SegmentKind kind = SegmentKind::bpu;
  std::vector<std::string> reads;
  std::vector<std::string> writes;
  std::vector<WeightRef> weights;
  std::vector<uint8_t> op_stream;

  bool operator==(const Segment&) const = default;
};

struct Metadata {
  std::string model_name;
  std::map<std::string, std::string> properties;  // sorted: the file is deterministic

  bool operator==(const Metadata&) const = default;
};

// A section whose kind this reader does not know: kept as bytes so that tools can pass it
// through, never interpreted.
struct RawSection {
  uint32_t kind = 0;
  uint32_t alignment = kSectionAlignment;
  std::vector<uint8_t> bytes;

  bool operator==(const RawSection&) const = default;
};

struct HbmFile {
  // The version the file was written with; the writer always writes the current one.
  uint16_t version_major = kVersionMajor;
  uint16_t version_minor = kVersionMinor;
  uint32_t flags = 0;  // no bit is defined in 1.0; kept as found
  std::string platform;           // 1..15 printable ASCII characters, no space
  std::string toolchain_version;  // 0..31 printable ASCII characters
  Metadata metadata;
  std::vector<TensorDesc> inputs;
  std::vector<TensorDesc> outputs;
  std::vector<Segment> segments;  // in execution order
  std::vector<uint8_t> weights;   // written as its own 64-byte aligned section when not empty
  // The tensor table of the lowered model (kind 7); opaque to the container like an op
  // stream, its encoding belongs to runtime/lowered/hbm_codec. Written when not empty.
  std::vector<uint8_t> tensor_table;
  std::vector<RawSection> unknown_sections;

  bool operator==(const HbmFile&) const = default;
};

// The checks that do not depend on the byte layout: names, enum values, shapes,
// quantization parameters, segment ids, weight references. The writer runs them before
// writing and the reader after decoding, so neither accepts what the other would refuse.
Status validate(const HbmFile& file);

}  // namespace qflow::hbm
