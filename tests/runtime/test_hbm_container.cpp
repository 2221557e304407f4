// Tests of the .hbm container: round trip, determinism and every check the reader makes.
#include <doctest/doctest.h>

#include <boost/crc.hpp>

#include <algorithm>
#include <cstdint>
#include <cstdio>
#include <limits>
#include <random>
#include <string>
#include <string_view>
#include <vector>

#include "qflow/runtime/hbm_reader.h"
#include "hbm/writer.h"

using namespace qflow::hbm;
using qflow::Expected;

namespace {

using Bytes = std::vector<uint8_t>;

constexpr std::string_view kSupported[] = {"bernoulli2", "bayes", "nash"};

// A model with every section kind: metadata, inputs, outputs, a BPU and a CPU segment, an
// unknown (future) section and the weights.
HbmFile sample() {
  HbmFile f;
  f.platform = "bayes";
  f.toolchain_version = "qflow 0.1.0";
  f.metadata.model_name = "mnist";
  f.metadata.properties = {{"march", "bayes"}, {"input_source", "ddr"}};
  f.inputs.push_back({"image", DType::uint8, {1, 1, 28, 28}, Layout::nchw,
                      {QuantKind::per_tensor, 0, {0.0078125f}, {128}}});
  Quantization per_axis{QuantKind::per_axis, 1, {}, {}};
  for (int i = 0; i < 10; ++i) {
    per_axis.scales.push_back(0.05f + 0.01f * static_cast<float>(i));
    per_axis.zero_points.push_back(i - 5);
  }
  f.outputs.push_back({"logits", DType::int8, {-1, 10}, Layout::other, per_axis});
  f.outputs.push_back({"probs", DType::float32, {-1, 10}, Layout::other, {}});
  f.segments.push_back({7, SegmentKind::bpu, {"image"}, {"logits"}, {{0, 64}, {64, 40}}, {1, 2, 3, 4, 5}});
  f.segments.push_back({8, SegmentKind::cpu, {"logits"}, {"probs"}, {}, {0x51, 0x52}});
  for (int i = 0; i < 104; ++i) f.weights.push_back(static_cast<uint8_t>(i * 7 + 1));
  f.unknown_sections.push_back({0x1000, 16, {0xde, 0xad, 0xbe, 0xef, 0x01}});
  return f;
}

Bytes write_ok(const HbmFile& f) {
  Expected<Bytes> bytes = write(f);
  REQUIRE_MESSAGE(bytes.has_value(), bytes.message());
  return *bytes;
}

// The error parse() gives, or "" when it succeeds.
std::string parse_error(const Bytes& bytes) {
  Expected<HbmFile> parsed = parse(bytes, kSupported);
  return parsed ? std::string() : parsed.message();
}

std::string write_error(const HbmFile& f) {
  Expected<Bytes> bytes = write(f);
  return bytes ? std::string() : bytes.message();
}

uint64_t get(const Bytes& b, size_t at, size_t n) {
  uint64_t v = 0;
  for (size_t i = 0; i < n; ++i) v |= static_cast<uint64_t>(b[at + i]) << (8 * i);
  return v;
}

void put(Bytes& b, size_t at, size_t n, uint64_t v) {
  for (size_t i = 0; i < n; ++i) b[at + i] = static_cast<uint8_t>(v >> (8 * i));
}

uint32_t crc(const uint8_t* data, size_t size) {
  boost::crc_32_type c;
  c.process_bytes(data, size);
  return c.checksum();
}

std::string hex(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

// Appends src[from, to) to out.
void append(Bytes& out, const Bytes& src, size_t from, size_t to) {
  for (size_t i = from; i < to; ++i) out.push_back(src[i]);
}

// Table entry `i` of a file the writer laid out (table right after the 96-byte header).
size_t entry(size_t i) { return 96 + 32 * i; }
uint64_t section_offset(const Bytes& b, size_t i) { return get(b, entry(i) + 8, 8); }
uint64_t section_size(const Bytes& b, size_t i) { return get(b, entry(i) + 16, 8); }

// Recomputes the section CRCs and the header CRC after a deliberate edit, so that a test
// reaches the check behind the CRCs. Entries or a header that do not fit are left alone.
void reseal(Bytes& b) {
  if (b.size() < 96) return;
  const uint64_t header_size = get(b, 16, 4);
  const uint64_t count = get(b, 20, 4);
  const uint64_t table = get(b, 24, 8);
  const uint64_t entry_size = get(b, 88, 4);
  if (header_size < 96 || header_size > b.size() || count > 4096 || entry_size < 32 || entry_size > 256 ||
      table > b.size() || count * entry_size > b.size() - table) {
    return;
  }
  for (uint64_t i = 0; i < count; ++i) {
    const size_t at = table + i * entry_size;
    const uint64_t offset = get(b, at + 8, 8);
    const uint64_t size = get(b, at + 16, 8);
    if (offset <= b.size() && size <= b.size() - offset) put(b, at + 28, 4, crc(b.data() + offset, size));
  }
  put(b, 92, 4, 0);
  boost::crc_32_type c;
  c.process_bytes(b.data(), header_size);
  c.process_bytes(b.data() + table, count * entry_size);
  put(b, 92, 4, c.checksum());
}

}  // namespace

TEST_CASE("hbm: a file with every section kind round trips") {
  const HbmFile f = sample();
  const Bytes bytes = write_ok(f);
  Expected<HbmFile> parsed = parse(bytes, kSupported);
  REQUIRE_MESSAGE(parsed.has_value(), parsed.message());
  CHECK(*parsed == f);
  CHECK(parsed->segments[0].kind == SegmentKind::bpu);
  CHECK(parsed->segments[1].kind == SegmentKind::cpu);
  CHECK(parsed->unknown_sections.size() == 1);

  // Sections in the defined order: metadata, inputs, outputs, segments, unknown, weights.
  REQUIRE(get(bytes, 20, 4) == 7);
  const uint32_t kinds[] = {1, 2, 3, 4, 5, 0x1000, 6};
  for (size_t i = 0; i < 7; ++i) CHECK(get(bytes, entry(i), 4) == kinds[i]);
  CHECK(section_offset(bytes, 6) % 64 == 0);
  CHECK(section_offset(bytes, 5) % 16 == 0);
  CHECK(section_size(bytes, 6) == 104);
  CHECK(bytes.size() == section_offset(bytes, 6) + 104);
}

TEST_CASE("hbm: the same model gives the same bytes") {
  const Bytes first = write_ok(sample());
  CHECK(write_ok(sample()) == first);

  // Metadata is keyed, not ordered by insertion.
  HbmFile other = sample();
  other.metadata.properties.clear();
  other.metadata.properties.emplace("input_source", "ddr");
  other.metadata.properties.emplace("march", "bayes");
  CHECK(write_ok(other) == first);

  // Writing what was parsed reproduces the file.
  Expected<HbmFile> parsed = parse(first);
  REQUIRE(parsed.has_value());
  CHECK(write_ok(*parsed) == first);
}

TEST_CASE("hbm: the CRC is the CRC-32 of zlib and PNG, as docs/hbm-format.md says") {
  const std::string_view check = "123456789";
  CHECK(crc(reinterpret_cast<const uint8_t*>(check.data()), check.size()) == 0xcbf43926u);
}

TEST_CASE("hbm: the layout of an empty model, byte by byte") {
  HbmFile empty;
  empty.platform = "nash";
  empty.toolchain_version = "qflow 0.1.0";
  const Bytes b = write_ok(empty);
  // 96-byte header, 3 table entries, metadata (8 bytes), inputs (4), 4 bytes of padding so
  // that outputs starts 8-aligned, outputs (4).
  REQUIRE(b.size() == 96 + 3 * 32 + 8 + 4 + 4 + 4);
  const Bytes magic = {'Q', 'F', 'H', 'B', 'M', 0, 0, 0};
  CHECK(Bytes(b.begin(), b.begin() + 8) == magic);
  CHECK(get(b, 8, 2) == 1);
  CHECK(get(b, 10, 2) == 0);
  CHECK(get(b, 12, 4) == 0);
  CHECK(get(b, 16, 4) == 96);
  CHECK(get(b, 20, 4) == 3);
  CHECK(get(b, 24, 8) == 96);
  CHECK(get(b, 32, 8) == b.size());
  CHECK(std::string(b.begin() + 40, b.begin() + 45) == std::string("nash\0", 5));
  CHECK(std::string(b.begin() + 56, b.begin() + 68) == std::string("qflow 0.1.0\0", 12));
  CHECK(get(b, 88, 4) == 32);
  Bytes header(b.begin(), b.begin() + 192);
  put(header, 92, 4, 0);
  CHECK(get(b, 92, 4) == crc(header.data(), header.size()));
  // metadata: empty name, no properties
  CHECK(get(b, entry(0) + 8, 8) == 192);
  CHECK(get(b, entry(0) + 16, 8) == 8);
  CHECK(get(b, entry(0) + 24, 4) == 8);
  CHECK(get(b, entry(0) + 28, 4) == crc(b.data() + 192, 8));
  CHECK(get(b, entry(1) + 8, 8) == 200);
  CHECK(get(b, entry(2) + 8, 8) == 208);
  for (size_t i = 192; i < b.size(); ++i) CHECK(b[i] == 0);
  Expected<HbmFile> parsed = parse(b, kSupported);
  REQUIRE(parsed.has_value());
  CHECK(*parsed == empty);
}

// The sample's layout, pinned so that the expected messages below can name offsets:
// table 96..320, metadata 320+54, inputs 376+72, outputs 448+161, bpu segment 616+80,
// cpu segment 696+45, unknown section 752+5, weights 768+104, file 872 bytes.
TEST_CASE("hbm: the sample's layout is the one the messages below assume") {
  const Bytes b = write_ok(sample());
  REQUIRE(b.size() == 872);
  const uint64_t offsets[] = {320, 376, 448, 616, 696, 752, 768};
  const uint64_t sizes[] = {54, 72, 161, 80, 45, 5, 104};
  for (size_t i = 0; i < 7; ++i) {
    CHECK(section_offset(b, i) == offsets[i]);
    CHECK(section_size(b, i) == sizes[i]);
  }
}

TEST_CASE("hbm: every truncation of a file is rejected with a clear message") {
  const Bytes full = write_ok(sample());
  for (size_t n = 0; n < full.size(); ++n) {
    CAPTURE(n);
    const Bytes prefix(full.begin(), full.begin() + static_cast<std::ptrdiff_t>(n));
    const std::string expected =
        n < 96 ? "hbm: file is " + std::to_string(n) + " bytes, too short for the 96-byte header"
               : "hbm: file is truncated: the header says 872 bytes, got " + std::to_string(n);
    CHECK(parse_error(prefix) == expected);
  }
  Bytes longer = full;
  longer.resize(full.size() + 3, 0);
  CHECK(parse_error(longer) == "hbm: file has 3 bytes after the 872 the header declares");
}

TEST_CASE("hbm: a flipped byte anywhere is detected") {
  const Bytes good = write_ok(sample());
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x80}, uint8_t{0xff}}) {
      CAPTURE(pos);
      CAPTURE(static_cast<int>(mask));
      Bytes bad = good;
      bad[pos] ^= mask;
      const std::string error = parse_error(bad);
      CHECK(error.rfind("hbm: ", 0) == 0);
      CHECK(error.find('\n') == std::string::npos);
    }
  }
}

TEST_CASE("hbm: a flipped byte in a section is named by its CRC") {
  const Bytes good = write_ok(sample());
  const char* names[] = {"metadata", "inputs", "outputs", "bpu-segment", "cpu-segment", "kind 4096", "weights"};
  for (size_t i = 0; i < 7; ++i) {
    CAPTURE(i);
    Bytes bad = good;
    const uint64_t offset = section_offset(bad, i);
    const uint64_t size = section_size(bad, i);
    bad[offset + size / 2] ^= 0x10;
    const std::string expected = "hbm: section " + std::to_string(i) + " (" + names[i] + ") CRC mismatch: stored " +
                                 hex(static_cast<uint32_t>(get(good, entry(i) + 28, 4))) + ", computed " +
                                 hex(crc(bad.data() + offset, size));
    CHECK(parse_error(bad) == expected);
  }
  Bytes header = good;
  header[60] ^= 0x01;
  Bytes zeroed = header;
  put(zeroed, 92, 4, 0);
  boost::crc_32_type c;
  c.process_bytes(zeroed.data(), 320);
  CHECK(parse_error(header) == "hbm: header CRC mismatch: stored " + hex(static_cast<uint32_t>(get(good, 92, 4))) +
                                   ", computed " + hex(c.checksum()));
  Bytes table = good;
  table[entry(3) + 8] ^= 0x08;  // a section offset: the table is under the header CRC
  CHECK(parse_error(table).rfind("hbm: header CRC mismatch: stored ", 0) == 0);

  Bytes padding = good;
  padding[374] = 0x5a;  // between metadata (ends at 374) and inputs (starts at 376)
  CHECK(parse_error(padding) == "hbm: byte 374 is outside every section but is 0x5a, not zero padding");
}

TEST_CASE("hbm: a corrupted file whose CRCs were recomputed is rejected or valid, never a crash") {
  const Bytes good = write_ok(sample());
  size_t rejected = 0;
  size_t accepted = 0;
  for (size_t pos = 0; pos < good.size(); ++pos) {
    for (uint8_t mask : {uint8_t{0x01}, uint8_t{0x04}, uint8_t{0x80}, uint8_t{0xff}}) {
      CAPTURE(pos);
      CAPTURE(static_cast<int>(mask));
      Bytes bad = good;
      bad[pos] ^= mask;
      reseal(bad);
      Expected<HbmFile> parsed = parse(bad);
      if (!parsed) {
        ++rejected;
        CHECK(parsed.message().rfind("hbm: ", 0) == 0);
        CHECK(parsed.message().find('\n') == std::string::npos);
        continue;
      }
      ++accepted;
      // Whatever was accepted is a consistent model: it validates and writes again.
      CHECK(validate(*parsed).is_ok());
      Expected<Bytes> again = write(*parsed);
      CHECK(again.has_value());
    }
  }
  // Both outcomes occur: names and payload bytes may change, structure may not.
  CHECK(rejected > 0);
  CHECK(accepted > 0);
}

TEST_CASE("hbm: random words written over a resealed file are rejected or valid, never a crash") {
  // Whole 32-bit words reach the length and count fields with large values, which single
  // flipped bits rarely do. A fixed seed keeps the test reproducible.
  const Bytes good = write_ok(sample());
  std::mt19937 random(20261129);
  size_t rejected = 0;
  for (int round = 0; round < 4000; ++round) {
    Bytes bad = good;
    const size_t words = 1 + random() % 3;
    for (size_t w = 0; w < words; ++w) {
      const size_t at = 96 + random() % (bad.size() - 96 - 4);
      const uint32_t kinds[] = {0xffffffffu, 0x80000000u, 0x7fffffffu, static_cast<uint32_t>(random()),
                                static_cast<uint32_t>(random() % 256)};
      put(bad, at, 4, kinds[random() % 5]);
    }
    reseal(bad);
    CAPTURE(round);
    Expected<HbmFile> parsed = parse(bad);
    if (!parsed) {
      ++rejected;
      CHECK(parsed.message().rfind("hbm: ", 0) == 0);
      continue;
    }
    CHECK(write(*parsed).has_value());
  }
  CHECK(rejected > 0);
}

TEST_CASE("hbm: bad magic and unsupported versions are refused") {
  const Bytes good = write_ok(sample());
  Bytes magic = good;
  magic[3] = 'X';
  CHECK(parse_error(magic) == "hbm: bad magic: not a .hbm file (expected \"QFHBM\" and three zero bytes)");
  CHECK(parse_error(Bytes{'Q', 'F', 'H', 'B', 'M', 0, 0, 1, 0, 0}) ==
        "hbm: bad magic: not a .hbm file (expected \"QFHBM\" and three zero bytes)");

  Bytes major = good;
  put(major, 8, 2, 2);
  put(major, 10, 2, 3);
  reseal(major);
  CHECK(parse_error(major) ==
        "hbm: format version 2.3 is newer than this runtime reads (1.x); update the runtime or rebuild the model");
  put(major, 8, 2, 0);
  reseal(major);
  CHECK(parse_error(major) == "hbm: format version 0.3 is not supported (this runtime reads 1.x)");
}

TEST_CASE("hbm: a newer minor version is read, and may append to sections") {
  Bytes b = write_ok(sample());
  put(b, entry(0) + 16, 8, 55);  // metadata grows by one byte of the padding after it
  reseal(b);
  CHECK(parse_error(b) == "hbm: section 0 (metadata): 1 bytes left over after the encoded data");
  put(b, 10, 2, 1);
  reseal(b);
  Expected<HbmFile> parsed = parse(b, kSupported);
  REQUIRE_MESSAGE(parsed.has_value(), parsed.message());
  CHECK(parsed->version_major == 1);
  CHECK(parsed->version_minor == 1);
  HbmFile expected = sample();
  expected.version_minor = 1;
  CHECK(*parsed == expected);
}

TEST_CASE("hbm: a later 1.x may grow the header and the table entries") {
  // Re-lay the sample as a 1.1 writer might: 8 more header bytes and 8 more bytes per entry,
  // all non-zero, which a 1.0 reader must skip. Sections move by 8 + 7 * 8 = 64 bytes, which
  // keeps every alignment.
  const Bytes good = write_ok(sample());
  Bytes grown;
  append(grown, good, 0, 96);
  grown.resize(grown.size() + 8, 0xab);
  for (size_t i = 0; i < 7; ++i) {
    append(grown, good, entry(i), entry(i) + 32);
    grown.resize(grown.size() + 8, 0xcd);
    put(grown, grown.size() - 40 + 8, 8, section_offset(good, i) + 64);
  }
  append(grown, good, 320, good.size());
  REQUIRE(grown.size() == good.size() + 64);
  put(grown, 10, 2, 1);
  put(grown, 16, 4, 104);
  put(grown, 24, 8, 104);
  put(grown, 32, 8, grown.size());
  put(grown, 88, 4, 40);
  reseal(grown);
  Expected<HbmFile> parsed = parse(grown, kSupported);
  REQUIRE_MESSAGE(parsed.has_value(), parsed.message());
  HbmFile expected = sample();
  expected.version_minor = 1;
  CHECK(*parsed == expected);

  // The table may also start after a gap, which must be zero.
  Bytes gap;
  append(gap, grown, 0, 104);
  gap.resize(gap.size() + 64, 0);
  append(gap, grown, 104, grown.size());
  put(gap, 24, 8, 168);
  put(gap, 32, 8, gap.size());
  for (size_t i = 0; i < 7; ++i) put(gap, 168 + 40 * i + 8, 8, get(grown, 104 + 40 * i + 8, 8) + 64);
  reseal(gap);
  parsed = parse(gap, kSupported);
  REQUIRE_MESSAGE(parsed.has_value(), parsed.message());
  CHECK(*parsed == expected);
  gap[130] = 1;
  CHECK(parse_error(gap) == "hbm: byte 130 is outside every section but is 0x01, not zero padding");
}

TEST_CASE("hbm: unknown section kinds are skipped, not interpreted") {
  HbmFile f = sample();
  // Bytes that would be nonsense as any known section.
  f.unknown_sections = {{0x7fffffff, 8, Bytes(37, 0xff)}, {0x1001, 4096, {}}};
  const Bytes b = write_ok(f);
  Expected<HbmFile> parsed = parse(b, kSupported);
  REQUIRE_MESSAGE(parsed.has_value(), parsed.message());
  CHECK(parsed->unknown_sections == f.unknown_sections);
  CHECK(parsed->inputs == f.inputs);
  CHECK(parsed->segments == f.segments);

  // A reader that knows nothing of kind 0x1000 treats a renamed known section the same way.
  Bytes renamed = write_ok(sample());
  put(renamed, entry(4), 4, 0x2000);  // the cpu segment
  reseal(renamed);
  parsed = parse(renamed, kSupported);
  REQUIRE_MESSAGE(parsed.has_value(), parsed.message());
  CHECK(parsed->segments.size() == 1);
  CHECK(parsed->unknown_sections.size() == 2);
  CHECK(parsed->unknown_sections[0].kind == 0x2000);
}

TEST_CASE("hbm: section offsets and sizes are checked against the file, the header and each other") {
  const Bytes good = write_ok(sample());
  auto edited = [&](size_t at, size_t n, uint64_t v) {
    Bytes b = good;
    put(b, at, n, v);
    reseal(b);
    return parse_error(b);
  };
  CHECK(edited(entry(6) + 8, 8, 0xffffffffffffffc0ull) ==
        "hbm: section 6 (weights) (offset 18446744073709551552, size 104) extends past the end of the 872-byte file");
  CHECK(edited(entry(6) + 16, 8, std::numeric_limits<uint64_t>::max()) ==
        "hbm: section 6 (weights) (offset 768, size 18446744073709551615) extends past the end of the 872-byte file");
  CHECK(edited(entry(6) + 16, 8, 105) ==
        "hbm: section 6 (weights) (offset 768, size 105) extends past the end of the 872-byte file");
  CHECK(edited(entry(1) + 8, 8, 320) == "hbm: section 1 (inputs) [320, 392) overlaps section 0 (metadata) [320, 374)");
  CHECK(edited(entry(3) + 8, 8, 600) ==
        "hbm: section 3 (bpu-segment) [600, 680) overlaps section 2 (outputs) [448, 609)");
  CHECK(edited(entry(0) + 8, 8, 96) ==
        "hbm: section 0 (metadata) offset 96 overlaps the header and section table, which end at byte 320");
  CHECK(edited(entry(2) + 8, 8, 452) == "hbm: section 2 (outputs) offset 452 is not a multiple of its alignment 8");
}

TEST_CASE("hbm: the weights must be 64-byte aligned") {
  const Bytes good = write_ok(sample());
  Bytes moved = good;
  put(moved, entry(6) + 8, 8, 760);
  reseal(moved);
  CHECK(parse_error(moved) == "hbm: section 6 (weights) offset 760 is not a multiple of its alignment 64");
  Bytes declared = good;
  put(declared, entry(6) + 24, 4, 8);
  reseal(declared);
  CHECK(parse_error(declared) ==
        "hbm: section 6 (weights) alignment 8 is invalid (must be a power of two in [64, 4096])");
  Bytes odd = good;
  put(odd, entry(1) + 24, 4, 24);
  reseal(odd);
  CHECK(parse_error(odd) == "hbm: section 1 (inputs) alignment 24 is invalid (must be a power of two in [8, 4096])");
}

TEST_CASE("hbm: header fields are range-checked") {
  const Bytes good = write_ok(sample());
  auto edited = [&](size_t at, size_t n, uint64_t v) {
    Bytes b = good;
    put(b, at, n, v);
    reseal(b);
    return parse_error(b);
  };
  CHECK(edited(16, 4, 40) ==
        "hbm: header size 40 is invalid (must be a multiple of 8 in [96, 4096] and within the 872-byte file)");
  CHECK(edited(88, 4, 12) == "hbm: section entry size 12 is invalid (must be a multiple of 8 in [32, 256])");
  CHECK(edited(20, 4, 5000) == "hbm: section count 5000 exceeds the limit of 4096");
  CHECK(edited(20, 4, 4096) ==
        "hbm: section table at offset 96 (4096 entries of 32 bytes) is not 8-byte aligned after the 96-byte header "
        "and within the 872-byte file");
  CHECK(edited(24, 8, 0xfffffffffffffff8ull) ==
        "hbm: section table at offset 18446744073709551608 (7 entries of 32 bytes) is not 8-byte aligned after the "
        "96-byte header and within the 872-byte file");
  CHECK(edited(24, 8, 64) ==
        "hbm: section table at offset 64 (7 entries of 32 bytes) is not 8-byte aligned after the 96-byte header and "
        "within the 872-byte file");
  Bytes platform = good;
  std::fill(platform.begin() + 40, platform.begin() + 56, 'a');  // no terminating NUL left
  reseal(platform);
  CHECK(parse_error(platform) == "hbm: platform field is not a NUL-terminated printable name padded with zeros");
  Bytes toolchain = good;
  toolchain[56 + 12] = 'x';  // after the NUL: not zero padding
  reseal(toolchain);
  CHECK(parse_error(toolchain) ==
        "hbm: toolchain version field is not a NUL-terminated printable name padded with zeros");
}

TEST_CASE("hbm: huge counts and lengths inside sections fail before allocating") {
  const Bytes good = write_ok(sample());
  auto edited = [&](size_t at, size_t n, uint64_t v) {
    Bytes b = good;
    put(b, at, n, v);
    reseal(b);
    return parse_error(b);
  };
  // metadata: name "mnist" (4 + 5 bytes), then the entry count at byte 9 of the section
  CHECK(edited(320 + 9, 4, 0xffffffff) ==
        "hbm: section 0 (metadata): count 4294967295 of metadata entries at byte 9 needs at least 34359738360 "
        "bytes, 41 left");
  CHECK(edited(320, 4, 0x7fffffff) ==
        "hbm: section 0 (metadata): string length 2147483647 at byte 0 exceeds the 50 bytes left");
  CHECK(edited(376, 4, 0xffffffff) ==
        "hbm: section 1 (inputs): count 4294967295 of tensors at byte 0 needs at least 47244640245 bytes, 68 left");
  // inputs: count, name "image" (4 + 5), dtype, layout, quant kind, then the rank at byte 16
  CHECK(edited(376 + 16, 4, 1u << 30) ==
        "hbm: section 1 (inputs): count 1073741824 of dimensions at byte 16 needs at least 8589934592 bytes, 52 "
        "left");
  // bpu segment: id, reads (count, "image"), writes (count, "logits"), weight ref count at byte 31
  CHECK(edited(616 + 31, 4, 0x10000000) ==
        "hbm: section 3 (bpu-segment): count 268435456 of weight references at byte 31 needs at least 4294967296 "
        "bytes, 45 left");
  // two references later, the op stream length (u64) at byte 67
  CHECK(edited(616 + 67, 8, 0xffffffffffffffffull) ==
        "hbm: section 3 (bpu-segment): blob length 18446744073709551615 at byte 67 exceeds the 5 bytes left");
}

TEST_CASE("hbm: sections are single where they must be, and present") {
  const Bytes good = write_ok(sample());
  Bytes twice = good;
  put(twice, entry(1), 4, 1);  // inputs relabelled as a second metadata section
  reseal(twice);
  CHECK(parse_error(twice) == "hbm: section 1 (metadata) repeats the metadata section (section 0)");
  Bytes missing = good;
  put(missing, entry(2), 4, 0x3000);
  reseal(missing);
  CHECK(parse_error(missing) == "hbm: the file has no outputs section");
  Bytes reserved = good;
  put(reserved, entry(5), 4, 0);
  reseal(reserved);
  CHECK(parse_error(reserved) == "hbm: unknown section 0 has kind 0, which is reserved");
}

TEST_CASE("hbm: the runtime refuses a platform it does not support") {
  HbmFile f = sample();
  f.platform = "x5";
  const Bytes b = write_ok(f);
  CHECK(parse_error(b) == "hbm: platform 'x5' is not supported by this runtime (supported: bernoulli2, bayes, nash)");
  CHECK(parse(b).has_value());  // no list: any platform
  const std::string_view only_x5[] = {"x5"};
  CHECK(parse(b, only_x5).has_value());
}

TEST_CASE("hbm: the writer refuses what the reader would refuse") {
  auto with = [](auto edit) {
    HbmFile f = sample();
    edit(f);
    return write_error(f);
  };
  CHECK(with([](HbmFile& f) { f.platform = "a-very-long-platform"; }) ==
        "hbm: platform name 'a-very-long-platform' must be 1 to 15 printable ASCII characters without spaces");
  CHECK(with([](HbmFile& f) { f.platform = "has space"; }) ==
        "hbm: platform name 'has space' must be 1 to 15 printable ASCII characters without spaces");
  CHECK(with([](HbmFile& f) { f.toolchain_version = std::string(32, 'v'); }) ==
        "hbm: toolchain version '" + std::string(32, 'v') + "' must be at most 31 printable ASCII characters");
  CHECK(with([](HbmFile& f) { f.metadata.properties.emplace("", "value"); }) == "hbm: metadata has an empty key");
  CHECK(with([](HbmFile& f) { f.inputs.push_back(f.inputs[0]); }) ==
        "hbm: input 1 'image' repeats the name of input 0");
  CHECK(with([](HbmFile& f) { f.outputs[1].name.clear(); }) == "hbm: output 1 has an empty name");
  CHECK(with([](HbmFile& f) { f.inputs[0].dtype = static_cast<DType>(9); }) == "hbm: input 0 'image' has unknown dtype 9");
  CHECK(with([](HbmFile& f) { f.inputs[0].layout = static_cast<Layout>(3); }) ==
        "hbm: input 0 'image' has unknown layout 3");
  CHECK(with([](HbmFile& f) { f.inputs[0].shape = {1, 28, 28}; }) ==
        "hbm: input 0 'image' has layout NCHW but rank 3 (must be 4)");
  CHECK(with([](HbmFile& f) { f.outputs[1].shape = std::vector<int64_t>(33, 1); }) ==
        "hbm: output 1 'probs' has rank 33, more than 32");
  CHECK(with([](HbmFile& f) { f.outputs[1].shape = {-2, 10}; }) ==
        "hbm: output 1 'probs' dimension 0 is -2 (must be >= 0, or -1 for dynamic)");
  CHECK(with([](HbmFile& f) { f.outputs[1].quant = f.inputs[0].quant; }) ==
        "hbm: output 1 'probs' is float32 but has quantization parameters");
  CHECK(with([](HbmFile& f) { f.outputs[1].quant.axis = 1; }) ==
        "hbm: output 1 'probs' has no quantization but carries scales, zero points or an axis");
  CHECK(with([](HbmFile& f) { f.inputs[0].quant.kind = static_cast<QuantKind>(7); }) ==
        "hbm: input 0 'image' has unknown quantization kind 7");
  CHECK(with([](HbmFile& f) { f.inputs[0].quant.scales.push_back(1.0f); }) ==
        "hbm: input 0 'image' per-tensor quantization needs one scale, one zero point and axis 0; got 2 scales, 1 "
        "zero points, axis 0");
  CHECK(with([](HbmFile& f) { f.outputs[0].quant.axis = 2; }) ==
        "hbm: output 0 'logits' per-axis quantization axis 2 is outside rank 2");
  CHECK(with([](HbmFile& f) { f.outputs[0].quant.zero_points.pop_back(); }) ==
        "hbm: output 0 'logits' per-axis quantization has 10 scales, 9 zero points");
  CHECK(with([](HbmFile& f) { f.outputs[0].shape[1] = 12; }) ==
        "hbm: output 0 'logits' per-axis quantization has 10 scales but dimension 1 is 12");
  CHECK(with([](HbmFile& f) { f.inputs[0].quant.scales[0] = 0.0f; }) ==
        "hbm: input 0 'image' scale 0 is 0 (must be finite and > 0)");
  CHECK(with([](HbmFile& f) { f.inputs[0].quant.scales[0] = std::numeric_limits<float>::infinity(); }) ==
        "hbm: input 0 'image' scale 0 is inf (must be finite and > 0)");
  CHECK(with([](HbmFile& f) { f.inputs[0].quant.zero_points[0] = 256; }) ==
        "hbm: input 0 'image' zero point 0 is 256, outside the uint8 range [0, 255]");
  CHECK(with([](HbmFile& f) { f.outputs[0].quant.zero_points[3] = -129; }) ==
        "hbm: output 0 'logits' zero point 3 is -129, outside the int8 range [-128, 127]");
  CHECK(with([](HbmFile& f) { f.segments[1].id = 7; }) == "hbm: segment 1 has id 7, already used by segment 0");
  CHECK(with([](HbmFile& f) { f.segments[0].kind = static_cast<SegmentKind>(4); }) ==
        "hbm: segment 0 (id 7) has unknown kind 4");
  CHECK(with([](HbmFile& f) { f.segments[1].writes.push_back(""); }) ==
        "hbm: segment 1 (id 8) writes a tensor with an empty or oversized name");
  CHECK(with([](HbmFile& f) { f.segments[0].weights[1].size = 41; }) ==
        "hbm: segment 0 (id 7) weight reference 1 (offset 64, size 41) is outside the 104-byte weights section");
  CHECK(with([](HbmFile& f) { f.segments[0].weights[1] = {8, std::numeric_limits<uint64_t>::max()}; }) ==
        "hbm: segment 0 (id 7) weight reference 1 (offset 8, size 18446744073709551615) is outside the 104-byte "
        "weights section");
  CHECK(with([](HbmFile& f) { f.weights.clear(); }) ==
        "hbm: segment 0 (id 7) weight reference 0 (offset 0, size 64) is outside the 0-byte weights section");
  CHECK(with([](HbmFile& f) { f.unknown_sections[0].kind = 6; }) ==
        "hbm: unknown section 0 has kind 6, which is known (weights)");
  CHECK(with([](HbmFile& f) { f.unknown_sections[0].alignment = 12; }) ==
        "hbm: unknown section 0 has alignment 12 (must be a power of two in [8, 4096])");
}

TEST_CASE("hbm: the reader runs the writer's checks on what it decodes") {
  Bytes b = write_ok(sample());
  // input 0's zero point (128, a uint8) sits in the last 4 bytes of the inputs section
  REQUIRE(get(b, 376 + 72 - 4, 4) == 128);
  put(b, 376 + 72 - 4, 4, 300);
  reseal(b);
  CHECK(parse_error(b) == "hbm: input 0 'image' zero point 0 is 300, outside the uint8 range [0, 255]");

  Bytes keys = write_ok(sample());
  // metadata keys sorted: "input_source" then "march"; swap the first letters of both
  REQUIRE(keys[320 + 13 + 4] == 'i');
  keys[320 + 13 + 4] = 'z';
  reseal(keys);
  CHECK(parse_error(keys) ==
        "hbm: section 0 (metadata): metadata key 'march' does not follow 'znput_source' (keys are sorted and unique)");
}
