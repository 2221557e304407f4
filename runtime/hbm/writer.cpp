// The .hbm writer: encodes the typed sections and lays out header, table and sections.
#include "hbm/writer.h"

#include <span>

#include "hbm/byte_writer.h"
#include "hbm/crc32.h"

namespace qflow::hbm {
namespace {

struct PendingSection {
  uint32_t kind;
  uint32_t alignment;
  std::vector<uint8_t> bytes;
};

std::vector<uint8_t> encode_metadata(const Metadata& m) {
  ByteWriter w;
  w.string(m.model_name);
  w.u32(static_cast<uint32_t>(m.properties.size()));
  for (const auto& [key, value] : m.properties) {
    w.string(key);
    w.string(value);
  }
  return w.take();
}

std::vector<uint8_t> encode_tensors(const std::vector<TensorDesc>& tensors) {
  ByteWriter w;
  w.u32(static_cast<uint32_t>(tensors.size()));
  for (const TensorDesc& t : tensors) {
    w.string(t.name);
    w.u8(static_cast<uint8_t>(t.dtype));
    w.u8(static_cast<uint8_t>(t.layout));
    w.u8(static_cast<uint8_t>(t.quant.kind));
    w.u32(static_cast<uint32_t>(t.shape.size()));
    for (int64_t d : t.shape) w.i64(d);
    if (t.quant.kind == QuantKind::none) continue;
    w.i32(t.quant.axis);
    w.u32(static_cast<uint32_t>(t.quant.scales.size()));
    for (float s : t.quant.scales) w.f32(s);
    w.u32(static_cast<uint32_t>(t.quant.zero_points.size()));
    for (int32_t z : t.quant.zero_points) w.i32(z);
  }
  return w.take();
}

void encode_names(ByteWriter& w, const std::vector<std::string>& names) {
  w.u32(static_cast<uint32_t>(names.size()));
  for (const std::string& n : names) w.string(n);
}

std::vector<uint8_t> encode_segment(const Segment& s) {
  ByteWriter w;
  w.u32(s.id);
  encode_names(w, s.reads);
  encode_names(w, s.writes);
  w.u32(static_cast<uint32_t>(s.weights.size()));
  for (const WeightRef& ref : s.weights) {
    w.u64(ref.offset);
    w.u64(ref.size);
  }
  w.blob(s.op_stream);
  return w.take();
}

uint64_t align_up(uint64_t v, uint64_t alignment) { return (v + alignment - 1) / alignment * alignment; }

void store_fixed_string(std::span<uint8_t> out, size_t at, const std::string& s) {
  for (size_t i = 0; i < s.size(); ++i) out[at + i] = static_cast<uint8_t>(s[i]);
}

// Header and table; the header CRC is computed last, over the header with its CRC field
// zero followed by the section table.
void write_header(std::vector<uint8_t>& out, const HbmFile& file, size_t sections) {
  std::span<uint8_t> h(out);
  for (size_t i = 0; i < kMagic.size(); ++i) h[i] = kMagic[i];
  store_u16(h, 8, kVersionMajor);
  store_u16(h, 10, kVersionMinor);
  store_u32(h, 12, file.flags);
  store_u32(h, 16, kHeaderSize);
  store_u32(h, 20, static_cast<uint32_t>(sections));
  store_u64(h, 24, kHeaderSize);
  store_u64(h, 32, out.size());
  store_fixed_string(h, 40, file.platform);
  store_fixed_string(h, 56, file.toolchain_version);
  store_u32(h, 88, kSectionEntrySize);
}

}  // namespace

Expected<std::vector<uint8_t>> write(const HbmFile& file) {
  if (Status s = validate(file); !s) return s;

  std::vector<PendingSection> sections;
  sections.push_back({static_cast<uint32_t>(SectionKind::metadata), kSectionAlignment,
                      encode_metadata(file.metadata)});
  sections.push_back({static_cast<uint32_t>(SectionKind::inputs), kSectionAlignment,
                      encode_tensors(file.inputs)});
  sections.push_back({static_cast<uint32_t>(SectionKind::outputs), kSectionAlignment,
                      encode_tensors(file.outputs)});
  if (!file.tensor_table.empty()) {
    sections.push_back({static_cast<uint32_t>(SectionKind::tensors), kSectionAlignment, file.tensor_table});
  }
  for (const Segment& seg : file.segments) {
    const SectionKind kind = seg.kind == SegmentKind::bpu ? SectionKind::bpu_segment : SectionKind::cpu_segment;
    sections.push_back({static_cast<uint32_t>(kind), kSectionAlignment, encode_segment(seg)});
  }
  for (const RawSection& raw : file.unknown_sections) sections.push_back({raw.kind, raw.alignment, raw.bytes});
  if (!file.weights.empty()) {
    sections.push_back({static_cast<uint32_t>(SectionKind::weights), kWeightsAlignment, file.weights});
  }
  if (sections.size() > kMaxSections) {
    return invalid_input("hbm: " + std::to_string(sections.size()) + " sections exceed the limit of " +
                         std::to_string(kMaxSections));
  }

  // Offsets first, then one zero-filled buffer: padding is zero by construction.
  std::vector<uint64_t> offsets;
  uint64_t end = kHeaderSize + sections.size() * kSectionEntrySize;
  for (const PendingSection& s : sections) {
    offsets.push_back(align_up(end, s.alignment));
    end = offsets.back() + s.bytes.size();
  }
  std::vector<uint8_t> out(end, 0);
  std::span<uint8_t> bytes(out);
  for (size_t i = 0; i < sections.size(); ++i) {
    const PendingSection& s = sections[i];
    std::copy(s.bytes.begin(), s.bytes.end(), out.begin() + static_cast<std::ptrdiff_t>(offsets[i]));
    const size_t entry = kHeaderSize + i * kSectionEntrySize;
    store_u32(bytes, entry + 0, s.kind);
    store_u32(bytes, entry + 4, 0);
    store_u64(bytes, entry + 8, offsets[i]);
    store_u64(bytes, entry + 16, s.bytes.size());
    store_u32(bytes, entry + 24, s.alignment);
    store_u32(bytes, entry + 28, crc32(s.bytes));
  }
  write_header(out, file, sections.size());
  store_u32(bytes, kHeaderCrcOffset,
            crc32(bytes.first(kHeaderSize + sections.size() * kSectionEntrySize)));
  return out;
}

}  // namespace qflow::hbm
