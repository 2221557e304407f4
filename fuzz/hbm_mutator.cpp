// .hbm mutation that keeps the container consistent (docs/hbm-format.md: layout, CRC coverage).
#include "fuzz/hbm_mutator.h"

#include <algorithm>
#include <cstring>
#include <optional>
#include <random>
#include <vector>

#include <boost/crc.hpp>
#include <boost/endian/conversion.hpp>

#include "qflow/runtime/hbm_file.h"

namespace qflow::fuzz {

namespace {

uint32_t crc32(const uint8_t* data, size_t size) {
  boost::crc_32_type crc;
  crc.process_bytes(data, size);
  return crc.checksum();
}

struct Layout {
  size_t header_size = 0;
  size_t entry_size = 0;
  size_t count = 0;
  size_t table_offset = 0;
  size_t table_end = 0;
};

// The header fields the reader checks before the header CRC, when they are in range.
std::optional<Layout> read_layout(const uint8_t* data, size_t size) {
  if (size < hbm::kHeaderSize) return std::nullopt;
  Layout l;
  l.header_size = static_cast<size_t>(boost::endian::load_little_u32(data + 16));
  l.count = static_cast<size_t>(boost::endian::load_little_u32(data + 20));
  const uint64_t table_offset = boost::endian::load_little_u64(data + 24);
  l.entry_size = static_cast<size_t>(boost::endian::load_little_u32(data + 88));
  if (l.header_size < hbm::kHeaderSize || l.header_size > std::min(size, hbm::kMaxHeaderSize)) return std::nullopt;
  if (l.entry_size < hbm::kSectionEntrySize || l.entry_size > hbm::kMaxSectionEntrySize) return std::nullopt;
  if (l.count > hbm::kMaxSections || table_offset < l.header_size || table_offset > size) return std::nullopt;
  l.table_offset = static_cast<size_t>(table_offset);
  if (l.count * l.entry_size > size - l.table_offset) return std::nullopt;
  l.table_end = l.table_offset + l.count * l.entry_size;
  return l;
}

struct Section {
  size_t entry_at = 0;  // byte offset of its table entry
  uint64_t offset = 0;
  uint64_t size = 0;
  uint32_t alignment = 8;
};

// Sections whose bytes lie inside the file, in file order; nullopt when one does not.
std::optional<std::vector<Section>> read_sections(const uint8_t* data, size_t size, const Layout& l) {
  std::vector<Section> sections;
  for (size_t i = 0; i < l.count; ++i) {
    Section s;
    s.entry_at = l.table_offset + i * l.entry_size;
    s.offset = boost::endian::load_little_u64(data + s.entry_at + 8);
    s.size = boost::endian::load_little_u64(data + s.entry_at + 16);
    s.alignment = static_cast<uint32_t>(boost::endian::load_little_u32(data + s.entry_at + 24));
    if (s.offset < l.table_end || s.offset > size || s.size > size - s.offset) return std::nullopt;
    sections.push_back(s);
  }
  std::stable_sort(sections.begin(), sections.end(), [](const Section& a, const Section& b) { return a.offset < b.offset; });
  for (size_t i = 1; i < sections.size(); ++i)
    if (sections[i].offset < sections[i - 1].offset + sections[i - 1].size) return std::nullopt;
  return sections;
}

// Replaces section `target`'s bytes by `bytes` and lays every section out again after the
// table (each at its alignment, zero padding between), updating offsets, sizes and the file
// size. Returns the new size, or 0 when it does not fit in max_size.
size_t relayout(uint8_t* data, size_t max_size, const Layout& l, std::vector<Section> sections,
                size_t target, const std::vector<uint8_t>& bytes) {
  std::vector<uint8_t> out(data, data + l.table_end);
  for (size_t i = 0; i < sections.size(); ++i) {
    Section& s = sections[i];
    const uint8_t* from = i == target ? bytes.data() : data + s.offset;
    const size_t length = i == target ? bytes.size() : static_cast<size_t>(s.size);
    // An alignment the reader will refuse anyway is kept as it is; only a valid one pads.
    const size_t align = s.alignment >= 8 && s.alignment <= hbm::kMaxAlignment && (s.alignment & (s.alignment - 1)) == 0
                             ? s.alignment
                             : 8;
    out.resize((out.size() + align - 1) / align * align, 0);
    boost::endian::store_little_u64(out.data() + s.entry_at + 8, out.size());
    boost::endian::store_little_u64(out.data() + s.entry_at + 16, length);
    out.insert(out.end(), from, from + length);
    if (out.size() > max_size) return 0;
  }
  boost::endian::store_little_u64(out.data() + 32, out.size());
  std::memcpy(data, out.data(), out.size());
  return out.size();
}

}  // namespace

bool fix_hbm_checksums(uint8_t* data, size_t size) {
  const std::optional<Layout> l = read_layout(data, size);
  if (!l) return false;
  for (size_t i = 0; i < l->count; ++i) {
    const size_t at = l->table_offset + i * l->entry_size;
    const uint64_t offset = boost::endian::load_little_u64(data + at + 8), length = boost::endian::load_little_u64(data + at + 16);
    if (offset <= size && length <= size - offset) boost::endian::store_little_u32(data + at + 28, crc32(data + offset, length));
  }
  // Header CRC: the header with its CRC bytes as zero, then the section table.
  boost::endian::store_little_u32(data + hbm::kHeaderCrcOffset, 0);
  boost::crc_32_type crc;
  crc.process_bytes(data, l->header_size);
  crc.process_bytes(data + l->table_offset, l->table_end - l->table_offset);
  boost::endian::store_little_u32(data + hbm::kHeaderCrcOffset, crc.checksum());
  return true;
}

size_t mutate_hbm(uint8_t* data, size_t size, size_t max_size, unsigned seed, const ByteMutator& mutate) {
  std::minstd_rand rng(seed);
  const std::optional<Layout> layout = read_layout(data, size);
  std::optional<std::vector<Section>> sections;
  if (layout) sections = read_sections(data, size, *layout);
  const unsigned choice = rng() % 16;
  if (!layout || !sections || sections->empty() || choice == 0) {
    // Unreadable layout, or now and then: plain bytes, then the CRCs where they can be found
    // (the reader's checks before the CRCs are fuzzed this way too).
    size = mutate(data, size, max_size);
    if (rng() % 2) fix_hbm_checksums(data, size);
    return size;
  }
  if (choice <= 3) {
    // Header and section table fields in place (file size kept), CRCs fixed after.
    const size_t table_end = layout->table_end;
    std::vector<uint8_t> head(data, data + table_end);
    const size_t n = mutate(head.data(), head.size(), head.size());
    std::memcpy(data, head.data(), std::min(n, table_end));
    fix_hbm_checksums(data, size);
    return size;
  }
  // One section's bytes, grown or shrunk by the mutator; the rest is moved to fit.
  const size_t target = rng() % sections->size();
  const Section& s = (*sections)[target];
  const size_t room = max_size > size ? max_size - size : 0;
  std::vector<uint8_t> bytes(data + s.offset, data + s.offset + s.size);
  // libFuzzer mutates at least one byte: an empty section starts from a random one.
  if (bytes.empty()) bytes.push_back(static_cast<uint8_t>(rng()));
  const size_t length = bytes.size();
  bytes.resize(length + room);
  bytes.resize(mutate(bytes.data(), length, bytes.size()));
  const size_t new_size = relayout(data, max_size, *layout, *sections, target, bytes);
  if (new_size == 0) return size;
  fix_hbm_checksums(data, new_size);
  return new_size;
}

}  // namespace qflow::fuzz
