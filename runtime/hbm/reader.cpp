// The .hbm reader: header, section table and typed sections, each checked before use.
#include "qflow/runtime/hbm_reader.h"

#include <algorithm>
#include <cstdio>
#include <optional>

#include "hbm/byte_reader.h"
#include "hbm/crc32.h"

namespace qflow::hbm {
namespace {

using Entry = SectionEntry;

uint64_t load(std::span<const uint8_t> bytes, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(bytes[at + i]) << (8 * i);
  return v;
}

uint32_t load32(std::span<const uint8_t> bytes, size_t at) {
  return static_cast<uint32_t>(load(bytes, at, 4));
}

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

std::string hex8(uint8_t v) {
  char text[8];
  std::snprintf(text, sizeof text, "0x%02x", v);
  return text;
}

std::string label(size_t index, uint32_t kind) {
  return "section " + std::to_string(index) + " (" + section_kind_name(kind) + ")";
}

Status fail(const std::string& message) { return invalid_input("hbm: " + message); }

// A NUL-terminated printable string padded with zeros to the field's size.
Expected<std::string> fixed_string(std::span<const uint8_t> field, const char* what, char lowest,
                                   bool allow_empty) {
  const auto nul = std::find(field.begin(), field.end(), uint8_t{0});
  const bool padded = nul != field.end() && std::all_of(nul, field.end(), [](uint8_t b) { return b == 0; });
  const std::string text(field.begin(), nul);
  const bool printable = std::all_of(text.begin(), text.end(), [&](char c) { return c >= lowest && c <= '~'; });
  if (!padded || !printable || (text.empty() && !allow_empty)) {
    return fail(std::string(what) + " field is not a NUL-terminated printable name padded with zeros");
  }
  return text;
}

Status check_platform(const std::string& platform, std::span<const std::string_view> supported) {
  if (supported.empty() || std::find(supported.begin(), supported.end(), platform) != supported.end()) {
    return Status::ok();
  }
  std::string list;
  for (std::string_view p : supported) list += (list.empty() ? "" : ", ") + std::string(p);
  return fail("platform '" + platform + "' is not supported by this runtime (supported: " + list + ")");
}

void decode_metadata(ByteReader& r, Metadata& m) {
  m.model_name = r.string();
  const uint32_t n = r.count(8, "metadata entries");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    std::string key = r.string();
    std::string value = r.string();
    if (!r.ok()) return;
    if (!m.properties.empty() && key <= m.properties.rbegin()->first) {
      r.fail("metadata key '" + key + "' does not follow '" + m.properties.rbegin()->first +
             "' (keys are sorted and unique)");
      return;
    }
    m.properties.emplace(std::move(key), std::move(value));
  }
}

void decode_tensors(ByteReader& r, std::vector<TensorDesc>& tensors) {
  const uint32_t n = r.count(11, "tensors");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    TensorDesc t;
    t.name = r.string();
    t.dtype = static_cast<DType>(r.u8());
    t.layout = static_cast<Layout>(r.u8());
    t.quant.kind = static_cast<QuantKind>(r.u8());
    const uint32_t rank = r.count(8, "dimensions");
    for (uint32_t d = 0; d < rank; ++d) t.shape.push_back(r.i64());
    if (t.quant.kind != QuantKind::none) {
      t.quant.axis = r.i32();
      const uint32_t scales = r.count(4, "scales");
      for (uint32_t k = 0; k < scales; ++k) t.quant.scales.push_back(r.f32());
      const uint32_t zero_points = r.count(4, "zero points");
      for (uint32_t k = 0; k < zero_points; ++k) t.quant.zero_points.push_back(r.i32());
    }
    tensors.push_back(std::move(t));
  }
}

std::vector<std::string> decode_names(ByteReader& r, const char* what) {
  std::vector<std::string> names;
  const uint32_t n = r.count(4, what);
  for (uint32_t i = 0; i < n && r.ok(); ++i) names.push_back(r.string());
  return names;
}

void decode_segment(ByteReader& r, Segment& s) {
  s.id = r.u32();
  s.reads = decode_names(r, "read tensor names");
  s.writes = decode_names(r, "written tensor names");
  const uint32_t n = r.count(16, "weight references");
  for (uint32_t i = 0; i < n && r.ok(); ++i) {
    WeightRef ref;
    ref.offset = r.u64();
    ref.size = r.u64();
    s.weights.push_back(ref);
  }
  s.op_stream = r.blob();
}

// The header's fixed fields, each checked against the file's real size before use.
struct Header {
  uint16_t major = 0;
  uint16_t minor = 0;
  uint32_t flags = 0;
  uint64_t header_size = 0;
  uint32_t count = 0;
  uint64_t table_offset = 0;
  uint64_t entry_size = 0;
  uint64_t table_end = 0;
};

Expected<Header> parse_header(std::span<const uint8_t> bytes) {
  const size_t n = bytes.size();
  if (n >= kMagic.size() && !std::equal(kMagic.begin(), kMagic.end(), bytes.begin())) {
    return fail("bad magic: not a .hbm file (expected \"QFHBM\" and three zero bytes)");
  }
  if (n < kHeaderSize) {
    return fail("file is " + std::to_string(n) + " bytes, too short for the " +
                std::to_string(kHeaderSize) + "-byte header");
  }
  Header h;
  h.major = static_cast<uint16_t>(load(bytes, 8, 2));
  h.minor = static_cast<uint16_t>(load(bytes, 10, 2));
  const std::string version = std::to_string(h.major) + "." + std::to_string(h.minor);
  if (h.major > kVersionMajor) {
    return fail("format version " + version + " is newer than this runtime reads (" +
                std::to_string(kVersionMajor) + ".x); update the runtime or rebuild the model");
  }
  if (h.major < kVersionMajor) {
    return fail("format version " + version + " is not supported (this runtime reads " +
                std::to_string(kVersionMajor) + ".x)");
  }
  h.flags = load32(bytes, 12);
  h.header_size = load32(bytes, 16);
  h.count = load32(bytes, 20);
  h.table_offset = load(bytes, 24, 8);
  const uint64_t file_size = load(bytes, 32, 8);
  h.entry_size = load32(bytes, 88);
  if (file_size > n) {
    return fail("file is truncated: the header says " + std::to_string(file_size) + " bytes, got " +
                std::to_string(n));
  }
  if (file_size < n) {
    return fail("file has " + std::to_string(n - file_size) + " bytes after the " +
                std::to_string(file_size) + " the header declares");
  }
  if (h.header_size < kHeaderSize || h.header_size > kMaxHeaderSize || h.header_size % 8 != 0 ||
      h.header_size > n) {
    return fail("header size " + std::to_string(h.header_size) +
                " is invalid (must be a multiple of 8 in [96, 4096] and within the " +
                std::to_string(n) + "-byte file)");
  }
  if (h.entry_size < kSectionEntrySize || h.entry_size > kMaxSectionEntrySize || h.entry_size % 8 != 0) {
    return fail("section entry size " + std::to_string(h.entry_size) +
                " is invalid (must be a multiple of 8 in [32, 256])");
  }
  if (h.count > kMaxSections) {
    return fail("section count " + std::to_string(h.count) + " exceeds the limit of " +
                std::to_string(kMaxSections));
  }
  const uint64_t table_bytes = h.count * h.entry_size;  // both bounded: no overflow
  if (h.table_offset < h.header_size || h.table_offset % 8 != 0 || h.table_offset > n ||
      table_bytes > n - h.table_offset) {
    return fail("section table at offset " + std::to_string(h.table_offset) + " (" +
                std::to_string(h.count) + " entries of " + std::to_string(h.entry_size) +
                " bytes) is not 8-byte aligned after the " + std::to_string(h.header_size) +
                "-byte header and within the " + std::to_string(n) + "-byte file");
  }
  h.table_end = h.table_offset + table_bytes;

  Crc32 crc;
  const uint8_t zero[4] = {0, 0, 0, 0};
  crc.update(bytes.first(kHeaderCrcOffset));
  crc.update(zero);
  crc.update(bytes.subspan(kHeaderCrcOffset + 4, h.header_size - kHeaderCrcOffset - 4));
  crc.update(bytes.subspan(h.table_offset, table_bytes));
  const uint32_t stored = load32(bytes, kHeaderCrcOffset);
  if (stored != crc.value()) {
    return fail("header CRC mismatch: stored " + hex32(stored) + ", computed " + hex32(crc.value()));
  }
  return h;
}

// Bounds, alignment, overlaps, zero padding and CRC of every section.
Expected<std::vector<Entry>> parse_table(std::span<const uint8_t> bytes, const Header& h) {
  const uint64_t n = bytes.size();
  std::vector<Entry> entries;
  for (size_t i = 0; i < h.count; ++i) {
    const size_t at = h.table_offset + i * h.entry_size;
    Entry e;
    e.kind = load32(bytes, at);
    e.offset = load(bytes, at + 8, 8);
    e.size = load(bytes, at + 16, 8);
    e.alignment = load32(bytes, at + 24);
    e.crc = load32(bytes, at + 28);
    const std::string who = label(i, e.kind);
    const uint32_t min_alignment =
        e.kind == static_cast<uint32_t>(SectionKind::weights) ? kWeightsAlignment : kSectionAlignment;
    if (e.alignment < min_alignment || e.alignment > kMaxAlignment || (e.alignment & (e.alignment - 1)) != 0) {
      return fail(who + " alignment " + std::to_string(e.alignment) + " is invalid (must be a power of two in [" +
                  std::to_string(min_alignment) + ", " + std::to_string(kMaxAlignment) + "])");
    }
    if (e.offset % e.alignment != 0) {
      return fail(who + " offset " + std::to_string(e.offset) + " is not a multiple of its alignment " +
                  std::to_string(e.alignment));
    }
    if (e.offset < h.table_end) {
      return fail(who + " offset " + std::to_string(e.offset) +
                  " overlaps the header and section table, which end at byte " + std::to_string(h.table_end));
    }
    if (e.offset > n || e.size > n - e.offset) {
      return fail(who + " (offset " + std::to_string(e.offset) + ", size " + std::to_string(e.size) +
                  ") extends past the end of the " + std::to_string(n) + "-byte file");
    }
    entries.push_back(e);
  }

  // Every byte belongs to the header, the table or one section, or is zero padding.
  std::vector<size_t> order(entries.size());
  for (size_t i = 0; i < order.size(); ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return entries[a].offset < entries[b].offset; });
  uint64_t covered = h.table_end;
  std::optional<size_t> last;
  auto check_zero = [&](uint64_t from, uint64_t to) -> Status {
    for (uint64_t p = from; p < to; ++p) {
      if (bytes[p] != 0) {
        return fail("byte " + std::to_string(p) + " is outside every section but is " +
                    hex8(bytes[p]) + ", not zero padding");
      }
    }
    return Status::ok();
  };
  if (Status s = check_zero(h.header_size, h.table_offset); !s) return s;
  for (size_t i : order) {
    const Entry& e = entries[i];
    if (e.size == 0) continue;
    if (e.offset < covered && last) {
      const Entry& p = entries[*last];
      return fail(label(i, e.kind) + " [" + std::to_string(e.offset) + ", " + std::to_string(e.offset + e.size) +
                  ") overlaps " + label(*last, p.kind) + " [" + std::to_string(p.offset) + ", " +
                  std::to_string(p.offset + p.size) + ")");
    }
    if (Status s = check_zero(covered, e.offset); !s) return s;
    covered = e.offset + e.size;
    last = i;
  }
  if (Status s = check_zero(covered, n); !s) return s;

  for (size_t i = 0; i < entries.size(); ++i) {
    const Entry& e = entries[i];
    const uint32_t computed = crc32(bytes.subspan(e.offset, e.size));
    if (computed != e.crc) {
      return fail(label(i, e.kind) + " CRC mismatch: stored " + hex32(e.crc) + ", computed " + hex32(computed));
    }
  }
  return entries;
}

// Decodes one known section into `file`; `first` remembers where each single section was.
Status decode_section(std::span<const uint8_t> data, size_t index, uint32_t kind, const Header& h,
                      HbmFile& file, std::map<uint32_t, size_t>& first) {
  const auto k = static_cast<SectionKind>(kind);
  if (k != SectionKind::bpu_segment && k != SectionKind::cpu_segment) {
    const auto [it, fresh] = first.emplace(kind, index);
    if (!fresh) {
      return fail(label(index, kind) + " repeats the " + section_kind_name(kind) + " section (section " +
                  std::to_string(it->second) + ")");
    }
  }
  if (k == SectionKind::weights) {
    file.weights.assign(data.begin(), data.end());
    return Status::ok();
  }
  if (k == SectionKind::tensors) {
    file.tensor_table.assign(data.begin(), data.end());
    return Status::ok();
  }
  ByteReader r(data);
  switch (k) {
    case SectionKind::metadata: decode_metadata(r, file.metadata); break;
    case SectionKind::inputs: decode_tensors(r, file.inputs); break;
    case SectionKind::outputs: decode_tensors(r, file.outputs); break;
    default: {
      Segment s;
      s.kind = k == SectionKind::bpu_segment ? SegmentKind::bpu : SegmentKind::cpu;
      decode_segment(r, s);
      file.segments.push_back(std::move(s));
    }
  }
  // A newer minor version may append fields to a section; this version wrote none.
  if (r.ok() && r.remaining() != 0 && h.minor <= kVersionMinor) {
    r.fail(std::to_string(r.remaining()) + " bytes left over after the encoded data");
  }
  if (!r.ok()) return fail(label(index, kind) + ": " + r.error());
  return Status::ok();
}

}  // namespace

Expected<HbmFile> parse(std::span<const uint8_t> bytes, std::span<const std::string_view> supported_platforms) {
  Expected<Header> header = parse_header(bytes);
  if (!header) return header.status();
  const Header& h = *header;

  HbmFile file;
  file.version_major = h.major;
  file.version_minor = h.minor;
  file.flags = h.flags;
  Expected<std::string> platform = fixed_string(bytes.subspan(40, kPlatformFieldSize), "platform", '!', false);
  if (!platform) return platform.status();
  Expected<std::string> toolchain =
      fixed_string(bytes.subspan(56, kToolchainFieldSize), "toolchain version", ' ', true);
  if (!toolchain) return toolchain.status();
  file.platform = std::move(*platform);
  file.toolchain_version = std::move(*toolchain);
  if (Status s = check_platform(file.platform, supported_platforms); !s) return s;

  Expected<std::vector<Entry>> entries = parse_table(bytes, h);
  if (!entries) return entries.status();
  std::map<uint32_t, size_t> first;
  for (size_t i = 0; i < entries->size(); ++i) {
    const Entry& e = (*entries)[i];
    const auto data = bytes.subspan(e.offset, e.size);
    if (!is_known_section_kind(e.kind)) {
      file.unknown_sections.push_back({e.kind, e.alignment, std::vector<uint8_t>(data.begin(), data.end())});
      continue;
    }
    if (Status s = decode_section(data, i, e.kind, h, file, first); !s) return s;
  }
  for (SectionKind required : {SectionKind::metadata, SectionKind::inputs, SectionKind::outputs}) {
    if (!first.contains(static_cast<uint32_t>(required))) {
      return fail("the file has no " + section_kind_name(static_cast<uint32_t>(required)) + " section");
    }
  }
  if (Status s = validate(file); !s) return s;
  return file;
}

Expected<std::vector<SectionEntry>> section_table(std::span<const uint8_t> bytes) {
  Expected<Header> header = parse_header(bytes);
  if (!header) return header.status();
  return parse_table(bytes, *header);
}

}  // namespace qflow::hbm
