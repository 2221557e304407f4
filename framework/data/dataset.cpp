// Dataset scanning and sample streaming for .npy batches, folders of .npy files and folders
// of images. Nothing here holds sample data beyond the sample being visited.
#include "framework/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <limits>
#include <optional>
#include <utility>

#include "qflow/core/json_writer.h"
#include "framework/core/memory_limit.h"
#include "framework/data/image_decode.h"
#include "framework/data/npy_stream.h"
#include "framework/data/preprocess.h"
#include "framework/distributed/share_units.h"

namespace qflow {

namespace {

// Warnings listed one by one before the rest are summarised in one line.
constexpr std::size_t kMaxListedWarnings = 10;

struct NonFinite {
  int64_t nan = 0;
  int64_t inf = 0;
};

NonFinite count_nonfinite(const Tensor& sample) {
  NonFinite n;
  switch (sample.dtype()) {
    case DType::Float32:
      for (float x : sample.span<float>()) {
        if (std::isnan(x)) ++n.nan;
        else if (std::isinf(x)) ++n.inf;
      }
      break;
    case DType::Float64:
      for (double x : sample.span<double>()) {
        if (std::isnan(x)) ++n.nan;
        else if (std::isinf(x)) ++n.inf;
      }
      break;
    case DType::Float16:
      for (uint16_t bits : sample.span<uint16_t>()) {
        if ((bits & 0x7C00u) != 0x7C00u) continue;
        if (bits & 0x03FFu) ++n.nan;
        else ++n.inf;
      }
      break;
    default: break;
  }
  return n;
}

std::string nonfinite_text(const std::string& path, int64_t row, const NonFinite& n) {
  return path + ": sample " + std::to_string(row) + " holds " + std::to_string(n.nan) + " NaN and " +
         std::to_string(n.inf) + " Inf values";
}

std::string size_text(int64_t height, int64_t width) { return std::to_string(height) + "x" + std::to_string(width); }

// Reads one source's samples by (file, row) through descriptors it owns; one per iteration,
// so concurrent iterations share nothing.
class SampleReader {
 public:
  SampleReader(const SampleSource& source, const DataSpec& spec) : source_(source), spec_(spec) {}

  Expected<Tensor> read(std::size_t file_index, int64_t row) {
    const DatasetFile& file = source_.files[file_index];
    if (source_.kind == DataSource::ImageFolder) return read_image(file.path);
    if (!stream_ || open_file_ != file_index) {
      // The header was read by open_dataset; only the descriptor is new.
      stream_.reset();
      NpyHeader header;
      header.dtype = source_.dtype;
      header.shape = source_.sample_shape;
      header.shape.insert(header.shape.begin(), file.rows);
      header.data_offset = static_cast<std::size_t>(file.data_offset);
      header.data_bytes = shape_numel(header.shape) * static_cast<int64_t>(dtype_size(header.dtype));
      QFLOW_ASSIGN_OR_RETURN(NpyStream stream, NpyStream::open_known(file.path, header));
      stream_.emplace(std::move(stream));
      open_file_ = file_index;
    }
    return stream_->read_row(row);
  }

 private:
  Expected<Tensor> read_image(const std::string& path) const {
    QFLOW_ASSIGN_OR_RETURN(DecodedImage image, decode_image(path));
    if (spec_.resize_height == 0) {
      const Shape expected = image_sample_shape(image.info.height, image.info.width, spec_);
      if (expected != source_.sample_shape)
        return invalid_input(path + ": image is " + size_text(image.info.height, image.info.width) +
                             " (HxW), the dataset's samples are " + shape_to_string(source_.sample_shape) +
                             "; set load-data option 'resize' to feed images of different sizes");
    }
    return preprocess_image(image, spec_);
  }

  const SampleSource& source_;
  const DataSpec& spec_;
  std::optional<NpyStream> stream_;
  std::size_t open_file_ = 0;
};

struct Listing {
  DataSource source = DataSource::NpyBatch;
  std::vector<std::string> files;
};

Expected<Listing> list_files(const std::string& path) {
  Listing listing;
  std::error_code ec;
  if (!std::filesystem::is_directory(path, ec)) {
    listing.files.push_back(path);
    return listing;
  }
  std::vector<std::string> npy, images;
  for (const auto& entry : std::filesystem::directory_iterator(path, ec)) {
    if (!entry.is_regular_file(ec)) continue;
    const std::string file = entry.path().string();
    if (entry.path().extension() == ".npy") npy.push_back(file);
    else if (is_image_file(file)) images.push_back(file);
  }
  if (ec) return io_error("cannot list '" + path + "': " + ec.message());
  if (!npy.empty() && !images.empty())
    return invalid_input(path + ": the folder holds both .npy files and images; keep one kind of sample per folder");
  if (npy.empty() && images.empty())
    return invalid_input(path + ": the folder holds no .npy files and no images (.png, .jpg, .jpeg)");
  listing.source = npy.empty() ? DataSource::ImageFolder : DataSource::NpyFolder;
  listing.files = npy.empty() ? std::move(images) : std::move(npy);
  // Name order, so the sample order (and everything order-sensitive) is reproducible.
  std::sort(listing.files.begin(), listing.files.end());
  return listing;
}

// Image options only mean something for images; a changed one on .npy data is a mistake.
Status check_no_image_options(const DataSpec& spec, const std::string& path) {
  const DataSpec defaults;
  const char* changed = nullptr;
  if (spec.resize_height != defaults.resize_height || spec.resize_width != defaults.resize_width) changed = "resize";
  else if (spec.keep_ratio != defaults.keep_ratio) changed = "keep-ratio";
  else if (spec.pad_value != defaults.pad_value) changed = "pad-value";
  else if (spec.color != defaults.color) changed = "color";
  else if (spec.scale != defaults.scale) changed = "scale";
  else if (spec.mean != defaults.mean) changed = "mean";
  else if (spec.std != defaults.std) changed = "std";
  else if (spec.layout != defaults.layout) changed = "layout";
  if (!changed) return Status::ok();
  return invalid_input(std::string("load-data option '") + changed + "' applies to folders of images only; '" + path +
                       "' holds .npy samples");
}

// Adds one file's description: its sample count and, for .npy, the data offset; checks
// that its samples match the first file's.
Status describe_file(SampleSource& source, const DataSpec& spec, const std::string& path) {
  DatasetFile file;
  file.path = path;
  if (source.kind == DataSource::ImageFolder) {
    QFLOW_ASSIGN_OR_RETURN(ImageInfo info, probe_image(path));
    const Shape shape = image_sample_shape(info.height, info.width, spec);
    if (source.files.empty()) {
      source.dtype = DType::Float32;
      source.sample_shape = shape;
    } else if (shape != source.sample_shape) {
      const Shape& first = source.sample_shape;
      const bool nchw = spec.layout == SampleLayout::Nchw;
      const int64_t h = nchw ? first[1] : first[0], w = nchw ? first[2] : first[1];
      return invalid_input(path + ": image is " + size_text(info.height, info.width) + " (HxW), " + source.files[0].path +
                           " is " + size_text(h, w) + "; set load-data option 'resize' to feed images of different sizes");
    }
    file.samples = 1;
  } else {
    QFLOW_ASSIGN_OR_RETURN(NpyHeader header, read_npy_header(path));
    const Shape sample(header.shape.begin() + 1, header.shape.end());
    if (source.files.empty()) {
      source.dtype = header.dtype;
      source.sample_shape = sample;
    } else if (header.dtype != source.dtype || sample != source.sample_shape) {
      return invalid_input(path + ": samples are " + std::string(dtype_name(header.dtype)) + " " + shape_to_string(sample) +
                           ", " + source.files[0].path + " holds " + std::string(dtype_name(source.dtype)) + " " +
                           shape_to_string(source.sample_shape));
    }
    // A sample must fit the memory limit; checked from the header, before any allocation.
    QFLOW_RETURN_IF_ERROR(check_memory(shape_numel(sample) * static_cast<int64_t>(dtype_size(header.dtype)),
                                       path + ": a sample of shape " + shape_to_string(sample)));
    file.samples = header.shape[0];
    file.rows = header.shape[0];
    file.data_offset = static_cast<int64_t>(header.data_offset);
  }
  source.files.push_back(std::move(file));
  return Status::ok();
}

// "input 'state' (states.npy)", or the path of an unnamed source: a source in messages.
std::string source_text(const SampleSource& source) {
  return source.input.empty() ? source.path : "input '" + source.input + "' (" + source.path + ")";
}

// One source while open_dataset scans it: its listing, described lazily, and the reading
// position.
struct SourceScan {
  std::vector<std::string> listed;
  std::size_t file = 0;  // the file holding the next row
  int64_t row = 0;       // within it
};

// Where sample `index` is: its position among all rows (skipped ones included), the file
// holding that position and the file's first position.
struct Cursor {
  int64_t position = 0;
  std::size_t skipped_before = 0;
  std::size_t file = 0;
  int64_t file_start = 0;
};

Cursor seek(const Dataset& dataset, const SampleSource& source, int64_t index) {
  Cursor cursor;
  cursor.position = index;
  while (cursor.skipped_before < dataset.skipped.size() &&
         dataset.skipped[cursor.skipped_before].position <= cursor.position) {
    ++cursor.position;
    ++cursor.skipped_before;
  }
  while (cursor.file < source.files.size() && cursor.position >= cursor.file_start + source.files[cursor.file].samples)
    cursor.file_start += source.files[cursor.file++].samples;
  return cursor;
}

}  // namespace

std::string_view data_source_name(DataSource source) {
  switch (source) {
    case DataSource::NpyBatch: return "npy-batch";
    case DataSource::NpyFolder: return "npy-folder";
    case DataSource::ImageFolder: return "image-folder";
  }
  return "unknown";
}

Expected<std::vector<InputPath>> split_input_paths(const std::string& path) {
  std::error_code ec;
  if (path.empty() || std::filesystem::exists(path, ec)) return std::vector<InputPath>{{"", path}};
  std::vector<InputPath> named;
  std::size_t start = 0;
  while (true) {
    const std::size_t comma = path.find(',', start);
    const std::string part = path.substr(start, comma == std::string::npos ? std::string::npos : comma - start);
    const std::size_t eq = part.find('=');
    // Not a list of NAME=PATH: one path, which listing will report missing.
    if (eq == 0 || eq == std::string::npos || eq + 1 == part.size()) return std::vector<InputPath>{{"", path}};
    InputPath entry{part.substr(0, eq), part.substr(eq + 1)};
    for (const InputPath& seen : named)
      if (seen.input == entry.input)
        return invalid_input("load-data option 'path' names input '" + entry.input + "' twice");
    named.push_back(std::move(entry));
    if (comma == std::string::npos) break;
    start = comma + 1;
  }
  return named;
}

namespace {

// The dataset, or the error of one without usable samples.
Expected<Dataset> checked_count(Dataset& dataset, bool several) {
  const std::string where = several ? std::string("the inputs") : dataset.first().path;
  if (dataset.count == 0) {
    if (!dataset.skipped.empty())
      return invalid_input(where + ": all " + std::to_string(dataset.skipped.size()) +
                           " samples hold NaN or Inf values; none is left to use");
    return invalid_input(where + ": " + (several ? "hold" : "holds") + " no samples");
  }
  return std::move(dataset);
}

// Rows of `source` described so far.
int64_t described_rows(const SampleSource& source) {
  int64_t rows = 0;
  for (const DatasetFile& file : source.files) rows += file.samples;
  return rows;
}

// Describes listed files of every source until each holds `rows` rows or has none left;
// returns the rows every source then holds (the smallest).
Expected<int64_t> describe_until(Dataset& dataset, std::vector<SourceScan>& scans, const DataSpec& spec, int64_t rows) {
  int64_t covered = std::numeric_limits<int64_t>::max();
  for (std::size_t s = 0; s < dataset.sources.size(); ++s) {
    SampleSource& source = dataset.sources[s];
    int64_t have = described_rows(source);
    while (have < rows && source.files.size() < scans[s].listed.size()) {
      QFLOW_RETURN_IF_ERROR(describe_file(source, spec, scans[s].listed[source.files.size()]));
      have += source.files.back().samples;
    }
    covered = std::min(covered, have);
  }
  return covered;
}

// The file of `source` holding row `position` and the row within it (position < its rows).
std::pair<std::size_t, int64_t> locate(const SampleSource& source, int64_t position) {
  std::size_t file = 0;
  while (position >= source.files[file].samples) position -= source.files[file++].samples;
  return {file, position};
}

constexpr int kScanTag = 7001;

// open_dataset's sweep in a distributed world: the rows are scanned in windows, each split
// between the ranks in contiguous slices (every rank reads only its slice's rows); per row a
// rank shares the first source holding NaN or Inf and its counts, and every rank derives the
// same skipped rows, count and limit as the one-process sweep. A window asks for the rows
// the limit still needs, so one window covers a dataset without skipped rows. Without
// skip-nonfinite such a row is the failure of its position, so every rank reports the
// first one, as one process does.
Status scan_in_slices(Dataset& dataset, std::vector<SourceScan>& scans, const DataSpec& spec, const World& world) {
  std::vector<SampleReader> readers;
  for (const SampleSource& source : dataset.sources) readers.emplace_back(source, spec);
  int64_t begin = 0;
  while (!(spec.limit > 0 && dataset.count == spec.limit)) {
    const int64_t wanted = spec.limit > 0 ? spec.limit - dataset.count : std::numeric_limits<int64_t>::max() - begin;
    QFLOW_ASSIGN_OR_RETURN(const int64_t rows, describe_until(dataset, scans, spec, begin + wanted));
    const int64_t end = std::min(rows, begin + wanted);
    if (end <= begin) break;
    const auto n = static_cast<std::size_t>(end - begin);
    constexpr std::size_t kWidth = 3;  // the source at fault + 1 (0: none), NaN count, Inf count
    std::vector<double> found(n * kWidth, 0.0);
    SliceSweep sweep(&world, end - begin);
    for (int64_t i = sweep.slice().begin; i < sweep.slice().end && sweep.status().is_ok(); ++i) {
      const auto k = static_cast<std::size_t>(i);
      Status status = Status::ok();
      for (std::size_t s = 0; s < dataset.sources.size(); ++s) {
        const auto [file, row] = locate(dataset.sources[s], begin + i);
        Expected<Tensor> sample = readers[s].read(file, row);
        if (!sample) {
          status = sample.status();
          break;
        }
        const NonFinite bad = count_nonfinite(*sample);
        if (bad.nan == 0 && bad.inf == 0) continue;
        if (!spec.skip_nonfinite)
          status = invalid_input(nonfinite_text(dataset.sources[s].files[file].path, row, {bad.nan, bad.inf}) +
                                 " (set load-data option skip-nonfinite = true to skip such samples)");
        found[k * kWidth] = static_cast<double>(s + 1);
        found[k * kWidth + 1] = static_cast<double>(bad.nan);
        found[k * kWidth + 2] = static_cast<double>(bad.inf);
        break;
      }
      if (status.is_ok()) sweep.measured(i);
      else sweep.failed(i, std::move(status));  // this rank reads no further
    }
    QFLOW_RETURN_IF_ERROR(sweep.finish(Status::ok(), kScanTag, kWidth, found));
    for (std::size_t k = 0; k < n; ++k) {
      if (found[k * kWidth] == 0.0) {
        ++dataset.count;
        continue;
      }
      const auto s = static_cast<std::size_t>(found[k * kWidth]) - 1;
      const int64_t position = begin + static_cast<int64_t>(k);
      const auto [file, row] = locate(dataset.sources[s], position);
      dataset.skipped.push_back(SkippedSample{position, s, file, row, static_cast<int64_t>(found[k * kWidth + 1]),
                                              static_cast<int64_t>(found[k * kWidth + 2])});
    }
    begin = end;
  }
  // A limit ends the dataset at the last row read, as the one-process sweep ends it.
  if (spec.limit > 0 && dataset.count == spec.limit)
    for (SampleSource& source : dataset.sources) {
      const auto [file, row] = locate(source, begin - 1);
      source.files[file].samples = row + 1;
      source.files.resize(file + 1);
    }
  return Status::ok();
}

}  // namespace

Expected<Dataset> open_dataset(const DataSpec& spec, const World* world) {
  QFLOW_ASSIGN_OR_RETURN(const std::vector<InputPath> paths, split_input_paths(spec.path));
  Dataset dataset;
  dataset.spec = spec;
  std::vector<SourceScan> scans(paths.size());
  bool any_images = false;
  for (std::size_t s = 0; s < paths.size(); ++s) {
    QFLOW_ASSIGN_OR_RETURN(Listing listing, list_files(paths[s].path));
    SampleSource source;
    source.input = paths[s].input;
    source.path = paths[s].path;
    source.kind = listing.source;
    any_images |= source.kind == DataSource::ImageFolder;
    scans[s].listed = std::move(listing.files);
    dataset.sources.push_back(std::move(source));
  }
  // Image options shape the images; set while no source holds images, they are a mistake.
  if (!any_images) QFLOW_RETURN_IF_ERROR(check_no_image_options(spec, dataset.first().path));

  // Several sources must line up row for row: every file is described up front to count
  // them. A single source is described lazily, so files past the limit are never opened.
  const bool several = dataset.sources.size() > 1;
  if (several) {
    std::vector<int64_t> rows(dataset.sources.size(), 0);
    for (std::size_t s = 0; s < dataset.sources.size(); ++s) {
      for (const std::string& path : scans[s].listed) {
        QFLOW_RETURN_IF_ERROR(describe_file(dataset.sources[s], spec, path));
        rows[s] += dataset.sources[s].files.back().samples;
      }
      if (rows[s] != rows[0])
        return invalid_input(source_text(dataset.sources[s]) + " holds " + std::to_string(rows[s]) + " samples, " +
                             source_text(dataset.sources[0]) + " holds " + std::to_string(rows[0]) +
                             "; every input needs one sample per row");
    }
  }

  if (world && world->distributed()) {
    QFLOW_RETURN_IF_ERROR(scan_in_slices(dataset, scans, spec, *world));
    return checked_count(dataset, several);
  }
  // One sweep over the samples, all sources in step: NaN/Inf policy and the limit.
  std::vector<SampleReader> readers;
  for (const SampleSource& source : dataset.sources) readers.emplace_back(source, spec);
  for (int64_t position = 0; !(spec.limit > 0 && dataset.count == spec.limit); ++position) {
    bool done = false;
    for (std::size_t s = 0; s < dataset.sources.size() && !done; ++s) {
      SampleSource& source = dataset.sources[s];
      SourceScan& scan = scans[s];
      while (!done && (scan.file >= source.files.size() || scan.row >= source.files[scan.file].samples)) {
        if (scan.file < source.files.size()) {
          ++scan.file;
          scan.row = 0;
        } else if (source.files.size() < scan.listed.size()) {
          QFLOW_RETURN_IF_ERROR(describe_file(source, spec, scan.listed[source.files.size()]));
        } else {
          done = true;  // counted equal above, so every source ends here
        }
      }
    }
    if (done) break;
    std::optional<SkippedSample> bad;
    for (std::size_t s = 0; s < dataset.sources.size() && !bad; ++s) {
      const SourceScan& scan = scans[s];
      QFLOW_ASSIGN_OR_RETURN(Tensor sample, readers[s].read(scan.file, scan.row));
      const NonFinite found = count_nonfinite(sample);
      if (found.nan != 0 || found.inf != 0) bad = SkippedSample{position, s, scan.file, scan.row, found.nan, found.inf};
    }
    for (SourceScan& scan : scans) ++scan.row;
    if (!bad) {
      ++dataset.count;
      continue;
    }
    const std::string& path = dataset.sources[bad->source].files[bad->file].path;
    if (!spec.skip_nonfinite)
      return invalid_input(nonfinite_text(path, bad->row, {bad->nan_count, bad->inf_count}) +
                           " (set load-data option skip-nonfinite = true to skip such samples)");
    dataset.skipped.push_back(*bad);
  }
  // Keep only the rows read: a limit ends the dataset inside a file or before later ones.
  for (std::size_t s = 0; s < dataset.sources.size(); ++s) {
    SampleSource& source = dataset.sources[s];
    const SourceScan& scan = scans[s];
    if (scan.file < source.files.size()) {
      source.files[scan.file].samples = scan.row;
      source.files.resize(scan.row > 0 ? scan.file + 1 : scan.file);
    }
  }
  return checked_count(dataset, several);
}

namespace {

// The fields of one source in the load-data artifact, in two parts so that a single source's
// fields and the dataset's ("limit") keep one alphabetical order.
void source_json_head(JsonWriter& json, const SampleSource& source, int64_t count) {
  json.field("count", count);
  json.field("dtype", dtype_name(source.dtype));
  json.key("files").begin_array();
  for (const DatasetFile& file : source.files)
    json.begin_object(true).field("path", file.path).field("samples", file.samples).end_object();
  json.end_array();
  if (!source.input.empty()) json.field("input", source.input);
}

void source_json_tail(JsonWriter& json, const SampleSource& source, const DataSpec& spec) {
  if (source.kind == DataSource::ImageFolder) {
    json.key("preprocess").begin_object();
    json.field("color", spec.color == ColorOrder::Rgb ? "rgb" : spec.color == ColorOrder::Bgr ? "bgr" : "gray");
    json.field("keep_ratio", spec.keep_ratio);
    json.field("layout", spec.layout == SampleLayout::Nchw ? "nchw" : "nhwc");
    json.key("mean");
    json.begin_array(true);
    for (double m : spec.mean) json.value(m);
    json.end_array();
    json.field("pad_value", spec.pad_value);
    json.field("resize", spec.resize_height > 0 ? size_text(spec.resize_height, spec.resize_width) : std::string());
    json.field("scale", spec.scale);
    json.key("std");
    json.begin_array(true);
    for (double s : spec.std) json.value(s);
    json.end_array();
    json.end_object();
  }
  json.key("sample_shape").begin_array(true);
  for (int64_t d : source.sample_shape) json.value(d);
  json.end_array();
}

}  // namespace

Expected<std::string> dataset_json(const Dataset& dataset) {
  // One source: its fields at the top level. Several: one object each under "inputs".
  const bool several = dataset.sources.size() > 1;
  JsonWriter json;
  json.begin_object();
  if (several) {
    json.field("count", dataset.count);
    json.key("inputs").begin_array();
    for (const SampleSource& source : dataset.sources) {
      json.begin_object();
      source_json_head(json, source, dataset.count);
      source_json_tail(json, source, dataset.spec);
      json.field("source", data_source_name(source.kind));
      json.end_object();
    }
    json.end_array();
  } else {
    source_json_head(json, dataset.first(), dataset.count);
  }
  json.field("limit", dataset.spec.limit);
  if (!several) source_json_tail(json, dataset.first(), dataset.spec);
  json.key("skipped").begin_array();
  for (const SkippedSample& s : dataset.skipped) {
    const SampleSource& source = dataset.sources[s.source];
    json.begin_object(true).field("inf_count", s.inf_count);
    if (several) json.field("input", source.input);
    json.field("nan_count", s.nan_count).field("path", source.files[s.file].path).field("sample", s.row).end_object();
  }
  json.end_array();
  if (!several) json.field("source", data_source_name(dataset.first().kind));
  json.end_object();
  return json.finish();
}

std::vector<std::string> dataset_warnings(const Dataset& dataset) {
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < dataset.skipped.size() && i < kMaxListedWarnings; ++i) {
    const SkippedSample& s = dataset.skipped[i];
    warnings.push_back(nonfinite_text(dataset.sources[s.source].files[s.file].path, s.row, {s.nan_count, s.inf_count}) +
                       "; skipped (skip-nonfinite = true)");
  }
  if (dataset.skipped.size() > kMaxListedWarnings)
    warnings.push_back(std::to_string(dataset.skipped.size() - kMaxListedWarnings) +
                       " more samples holding NaN or Inf were skipped (the dataset artifact lists them all)");
  return warnings;
}

namespace {

// Reads one source's rows from sample `begin` on, skipping the dataset's skipped positions.
class SourceCursor {
 public:
  SourceCursor(const Dataset& dataset, std::size_t source, int64_t begin)
      : dataset_(dataset), source_(dataset.sources[source]), reader_(source_, dataset.spec) {
    const Cursor cursor = seek(dataset, source_, begin);
    position_ = cursor.position;
    skip_ = cursor.skipped_before;
    file_ = cursor.file;
    file_start_ = cursor.file_start;
  }

  // The next usable sample, with the file and row it came from.
  Expected<Tensor> next(std::string& location) {
    while (true) {
      if (file_ >= source_.files.size())
        return internal_error("the dataset's files hold fewer than " + std::to_string(dataset_.count) + " samples");
      const DatasetFile& file = source_.files[file_];
      const int64_t row = position_ - file_start_;
      if (row >= file.samples) {
        file_start_ += file.samples;
        ++file_;
        continue;
      }
      const bool skipped = skip_ < dataset_.skipped.size() && dataset_.skipped[skip_].position == position_;
      ++position_;
      if (skipped) {
        ++skip_;
        continue;
      }
      location = file.path + ", sample " + std::to_string(row);
      // Read errors name the file themselves.
      QFLOW_ASSIGN_OR_RETURN(Tensor sample, reader_.read(file_, row));
      const NonFinite bad = count_nonfinite(sample);
      if (bad.nan != 0 || bad.inf != 0)
        return invalid_input(nonfinite_text(file.path, row, bad) + " (the file changed since load-data checked it)");
      return sample;
    }
  }

 private:
  const Dataset& dataset_;
  const SampleSource& source_;
  SampleReader reader_;
  int64_t position_ = 0;
  std::size_t skip_ = 0;
  std::size_t file_ = 0;
  int64_t file_start_ = 0;
};

}  // namespace

Status for_each_sample_in(const Dataset& dataset, int64_t begin, int64_t end, const SampleVisitor& visit) {
  if (begin < 0 || begin > end || end > dataset.count)
    return internal_error("sample range [" + std::to_string(begin) + ", " + std::to_string(end) + ") is outside [0, " +
                          std::to_string(dataset.count) + ")");
  if (begin == end) return Status::ok();
  std::vector<SourceCursor> cursors;
  cursors.reserve(dataset.sources.size());
  for (std::size_t s = 0; s < dataset.sources.size(); ++s) cursors.emplace_back(dataset, s, begin);
  std::vector<Tensor> samples(dataset.sources.size());
  std::string location, first_location;
  for (int64_t index = begin; index < end; ++index) {
    for (std::size_t s = 0; s < cursors.size(); ++s) {
      QFLOW_ASSIGN_OR_RETURN(samples[s], cursors[s].next(location));
      if (s == 0) first_location = location;
    }
    QFLOW_RETURN_IF_ERROR(visit(index, samples).with_context(first_location));
  }
  return Status::ok();
}

Status for_each_sample(const Dataset& dataset, const SampleVisitor& visit) {
  return for_each_sample_in(dataset, 0, dataset.count, visit);
}

std::string sample_location(const Dataset& dataset, int64_t index) {
  const SampleSource& source = dataset.first();
  const Cursor cursor = seek(dataset, source, index);
  if (index < 0 || cursor.file >= source.files.size()) return "sample " + std::to_string(index);
  return source.files[cursor.file].path + ", sample " + std::to_string(cursor.position - cursor.file_start);
}

Shape feed_shape(const Value& input, const Shape& sample_shape) {
  Shape shape = sample_shape;
  const bool has_rank = input.type && input.type->shape;
  if (!has_rank || input.type->shape->size() != shape.size()) shape.insert(shape.begin(), 1);
  return shape;
}

}  // namespace qflow
