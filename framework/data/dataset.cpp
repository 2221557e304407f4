// Dataset scanning and sample streaming for .npy batches, folders of .npy files and folders
// of images. Nothing here holds sample data beyond the sample being visited.
#include "framework/data/dataset.h"

#include <algorithm>
#include <cmath>
#include <cstring>
#include <filesystem>
#include <optional>

#include "framework/core/json_writer.h"
#include "framework/core/memory_limit.h"
#include "framework/data/image_decode.h"
#include "framework/data/npy_stream.h"
#include "framework/data/preprocess.h"

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

// Reads samples by (file, row) through descriptors it owns; one per iteration, so
// concurrent iterations share nothing.
class SampleReader {
 public:
  explicit SampleReader(const Dataset& dataset) : dataset_(dataset) {}

  Expected<Tensor> read(std::size_t file_index, int64_t row) {
    const DatasetFile& file = dataset_.files[file_index];
    if (dataset_.source == DataSource::ImageFolder) return read_image(file.path);
    if (!stream_ || open_file_ != file_index) {
      // The header was read by open_dataset; only the descriptor is new.
      stream_.reset();
      NpyHeader header;
      header.dtype = dataset_.dtype;
      header.shape = dataset_.sample_shape;
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
    if (dataset_.spec.resize_height == 0) {
      const Shape expected = image_sample_shape(image.info.height, image.info.width, dataset_.spec);
      if (expected != dataset_.sample_shape)
        return invalid_input(path + ": image is " + size_text(image.info.height, image.info.width) +
                             " (HxW), the dataset's samples are " + shape_to_string(dataset_.sample_shape) +
                             "; set load-data option 'resize' to feed images of different sizes");
    }
    return preprocess_image(image, dataset_.spec);
  }

  const Dataset& dataset_;
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
Status check_no_image_options(const DataSpec& spec) {
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
  return invalid_input(std::string("load-data option '") + changed + "' applies to folders of images only; '" + spec.path +
                       "' holds .npy samples");
}

// Adds one file's description: its sample count and, for .npy, the data offset; checks
// that its samples match the first file's.
Status describe_file(Dataset& dataset, const std::string& path) {
  DatasetFile file;
  file.path = path;
  if (dataset.source == DataSource::ImageFolder) {
    QFLOW_ASSIGN_OR_RETURN(ImageInfo info, probe_image(path));
    const Shape shape = image_sample_shape(info.height, info.width, dataset.spec);
    if (dataset.files.empty()) {
      dataset.dtype = DType::Float32;
      dataset.sample_shape = shape;
    } else if (shape != dataset.sample_shape) {
      const Shape& first = dataset.sample_shape;
      const bool nchw = dataset.spec.layout == SampleLayout::Nchw;
      const int64_t h = nchw ? first[1] : first[0], w = nchw ? first[2] : first[1];
      return invalid_input(path + ": image is " + size_text(info.height, info.width) + " (HxW), " + dataset.files[0].path +
                           " is " + size_text(h, w) + "; set load-data option 'resize' to feed images of different sizes");
    }
    file.samples = 1;
  } else {
    QFLOW_ASSIGN_OR_RETURN(NpyHeader header, read_npy_header(path));
    const Shape sample(header.shape.begin() + 1, header.shape.end());
    if (dataset.files.empty()) {
      dataset.dtype = header.dtype;
      dataset.sample_shape = sample;
    } else if (header.dtype != dataset.dtype || sample != dataset.sample_shape) {
      return invalid_input(path + ": samples are " + std::string(dtype_name(header.dtype)) + " " + shape_to_string(sample) +
                           ", " + dataset.files[0].path + " holds " + std::string(dtype_name(dataset.dtype)) + " " +
                           shape_to_string(dataset.sample_shape));
    }
    // A sample must fit the memory limit; checked from the header, before any allocation.
    QFLOW_RETURN_IF_ERROR(check_memory(shape_numel(sample) * static_cast<int64_t>(dtype_size(header.dtype)),
                                       path + ": a sample of shape " + shape_to_string(sample)));
    file.samples = header.shape[0];
    file.rows = header.shape[0];
    file.data_offset = static_cast<int64_t>(header.data_offset);
  }
  dataset.files.push_back(std::move(file));
  return Status::ok();
}

// Where sample `index` is: its position among all rows (skipped ones included), the file
// holding that position and the file's first position.
struct Cursor {
  int64_t position = 0;
  std::size_t skipped_before = 0;
  std::size_t file = 0;
  int64_t file_start = 0;
};

Cursor seek(const Dataset& dataset, int64_t index) {
  Cursor cursor;
  cursor.position = index;
  while (cursor.skipped_before < dataset.skipped.size() &&
         dataset.skipped[cursor.skipped_before].position <= cursor.position) {
    ++cursor.position;
    ++cursor.skipped_before;
  }
  while (cursor.file < dataset.files.size() && cursor.position >= cursor.file_start + dataset.files[cursor.file].samples)
    cursor.file_start += dataset.files[cursor.file++].samples;
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

Expected<Dataset> open_dataset(const DataSpec& spec) {
  QFLOW_ASSIGN_OR_RETURN(Listing listing, list_files(spec.path));
  Dataset dataset;
  dataset.spec = spec;
  dataset.source = listing.source;
  if (dataset.source != DataSource::ImageFolder) QFLOW_RETURN_IF_ERROR(check_no_image_options(spec));

  // One sweep over the samples: NaN/Inf policy and the limit. Files past the limit are
  // never opened.
  SampleReader reader(dataset);
  int64_t position = 0;
  for (const std::string& path : listing.files) {
    if (spec.limit > 0 && dataset.count == spec.limit) break;
    QFLOW_RETURN_IF_ERROR(describe_file(dataset, path));
    DatasetFile& file = dataset.files.back();
    const std::size_t file_index = dataset.files.size() - 1;
    int64_t rows = 0;
    for (; rows < file.samples && !(spec.limit > 0 && dataset.count == spec.limit); ++rows, ++position) {
      QFLOW_ASSIGN_OR_RETURN(Tensor sample, reader.read(file_index, rows));
      const NonFinite bad = count_nonfinite(sample);
      if (bad.nan == 0 && bad.inf == 0) {
        ++dataset.count;
        continue;
      }
      if (!spec.skip_nonfinite)
        return invalid_input(nonfinite_text(path, rows, bad) +
                             " (set load-data option skip-nonfinite = true to skip such samples)");
      dataset.skipped.push_back({position, file_index, rows, bad.nan, bad.inf});
    }
    file.samples = rows;
  }
  if (dataset.count == 0) {
    if (!dataset.skipped.empty())
      return invalid_input(spec.path + ": all " + std::to_string(dataset.skipped.size()) +
                           " samples hold NaN or Inf values; none is left to use");
    return invalid_input(spec.path + ": holds no samples");
  }
  return dataset;
}

Expected<std::string> dataset_json(const Dataset& dataset) {
  const DataSpec& spec = dataset.spec;
  JsonWriter json;
  json.begin_object();
  json.field("count", dataset.count);
  json.field("dtype", dtype_name(dataset.dtype));
  json.key("files").begin_array();
  for (const DatasetFile& file : dataset.files)
    json.begin_object(true).field("path", file.path).field("samples", file.samples).end_object();
  json.end_array();
  json.field("limit", spec.limit);
  if (dataset.source == DataSource::ImageFolder) {
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
  for (int64_t d : dataset.sample_shape) json.value(d);
  json.end_array();
  json.key("skipped").begin_array();
  for (const SkippedSample& s : dataset.skipped)
    json.begin_object(true)
        .field("inf_count", s.inf_count)
        .field("nan_count", s.nan_count)
        .field("path", dataset.files[s.file].path)
        .field("sample", s.row)
        .end_object();
  json.end_array();
  json.field("source", data_source_name(dataset.source));
  json.end_object();
  return json.finish();
}

std::vector<std::string> dataset_warnings(const Dataset& dataset) {
  std::vector<std::string> warnings;
  for (std::size_t i = 0; i < dataset.skipped.size() && i < kMaxListedWarnings; ++i) {
    const SkippedSample& s = dataset.skipped[i];
    warnings.push_back(nonfinite_text(dataset.files[s.file].path, s.row, {s.nan_count, s.inf_count}) +
                       "; skipped (skip-nonfinite = true)");
  }
  if (dataset.skipped.size() > kMaxListedWarnings)
    warnings.push_back(std::to_string(dataset.skipped.size() - kMaxListedWarnings) +
                       " more samples holding NaN or Inf were skipped (the dataset artifact lists them all)");
  return warnings;
}

Status for_each_sample_in(const Dataset& dataset, int64_t begin, int64_t end, const SampleVisitor& visit) {
  if (begin < 0 || begin > end || end > dataset.count)
    return internal_error("sample range [" + std::to_string(begin) + ", " + std::to_string(end) + ") is outside [0, " +
                          std::to_string(dataset.count) + ")");
  if (begin == end) return Status::ok();
  Cursor cursor = seek(dataset, begin);
  int64_t position = cursor.position;
  auto skip = dataset.skipped.begin() + static_cast<std::ptrdiff_t>(cursor.skipped_before);
  std::size_t file_index = cursor.file;
  int64_t file_start = cursor.file_start;

  SampleReader reader(dataset);
  int64_t index = begin;
  while (index < end) {
    if (file_index >= dataset.files.size())
      return internal_error("the dataset's files hold fewer than " + std::to_string(dataset.count) + " samples");
    const DatasetFile& file = dataset.files[file_index];
    const int64_t row = position - file_start;
    if (row >= file.samples) {
      file_start += file.samples;
      ++file_index;
      continue;
    }
    if (skip != dataset.skipped.end() && skip->position == position) {
      ++skip;
      ++position;
      continue;
    }
    // Read errors name the file themselves.
    QFLOW_ASSIGN_OR_RETURN(Tensor sample, reader.read(file_index, row));
    const NonFinite bad = count_nonfinite(sample);
    if (bad.nan != 0 || bad.inf != 0)
      return invalid_input(nonfinite_text(file.path, row, bad) + " (the file changed since load-data checked it)");
    QFLOW_RETURN_IF_ERROR(visit(index, sample).with_context(file.path + ", sample " + std::to_string(row)));
    ++index;
    ++position;
  }
  return Status::ok();
}

Status for_each_sample(const Dataset& dataset, const SampleVisitor& visit) {
  return for_each_sample_in(dataset, 0, dataset.count, visit);
}

std::string sample_location(const Dataset& dataset, int64_t index) {
  const Cursor cursor = seek(dataset, index);
  if (index < 0 || cursor.file >= dataset.files.size()) return "sample " + std::to_string(index);
  return dataset.files[cursor.file].path + ", sample " + std::to_string(cursor.position - cursor.file_start);
}

Shape feed_shape(const Value& input, const Shape& sample_shape) {
  Shape shape = sample_shape;
  const bool has_rank = input.type && input.type->shape;
  if (!has_rank || input.type->shape->size() != shape.size()) shape.insert(shape.begin(), 1);
  return shape;
}

}  // namespace qflow
