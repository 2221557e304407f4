// Calibration data: a described set of samples (a .npy batch, a folder of .npy files, or a
// folder of images with preprocessing), read back one sample at a time so that memory does
// not grow with the number of samples (docs/calibration-data.md).
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "framework/distributed/world.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

enum class ColorOrder { Rgb, Bgr, Gray };
enum class SampleLayout { Nchw, Nhwc };  // a sample is [C, H, W] or [H, W, C]

// Where the samples are and how to turn each into a model input; the load-data options
// (data_spec_from_options in data_options.h checks them).
struct DataSpec {
  std::string path;  // .npy batch, folder of .npy files, or folder of images
  // Images only. resize_height/width 0 = keep the decoded size.
  int64_t resize_height = 0;
  int64_t resize_width = 0;
  bool keep_ratio = false;  // resize inside HxW keeping the aspect ratio, pad the rest (centered)
  double pad_value = 0.0;   // in pixel units (0..255), before scale, mean and std
  ColorOrder color = ColorOrder::Rgb;
  double scale = 1.0 / 255.0;
  std::vector<double> mean = {0.0};  // one value, or one per channel in output channel order
  std::vector<double> std = {1.0};
  SampleLayout layout = SampleLayout::Nchw;
  // All sources.
  int64_t limit = 0;        // 0 = all samples, else the first `limit` usable samples
  int64_t batch_size = 1;   // samples a sweep reads and hands out per step
  bool skip_nonfinite = false;
};

enum class DataSource { NpyBatch, NpyFolder, ImageFolder };
std::string_view data_source_name(DataSource source);  // "npy-batch", "npy-folder", "image-folder"

struct DatasetFile {
  std::string path;
  int64_t samples = 0;      // rows used from this file (skipped ones included); 1 per image
  int64_t data_offset = 0;  // .npy: byte offset of row 0
  int64_t rows = 0;         // .npy: rows the file holds (more than `samples` under a limit)
};

// The samples of one model input: one path of DataSpec::path.
struct SampleSource {
  std::string input;  // the model input it feeds; "" = the model's only input
  std::string path;
  DataSource kind = DataSource::NpyBatch;
  std::vector<DatasetFile> files;  // reading order
  DType dtype = DType::Float32;
  Shape sample_shape;  // without the samples axis
};

// A sample left out because one of its inputs holds NaN or Inf (skip-nonfinite); with
// several inputs the whole sample goes, and this names the first input at fault.
struct SkippedSample {
  int64_t position = 0;    // among all rows read, before skipping
  std::size_t source = 0;  // index into Dataset::sources
  std::size_t file = 0;    // index into that source's files
  int64_t row = 0;         // within that file
  int64_t nan_count = 0;
  int64_t inf_count = 0;
};

// Samples of one or several model inputs: sample i is row i of every source.
struct Dataset {
  DataSpec spec;
  std::vector<SampleSource> sources;  // one per input, in the order `spec.path` names them
  int64_t count = 0;                  // usable samples: rows minus `skipped`
  std::vector<SkippedSample> skipped; // ascending position, one per position

  // The first source: the only one of a single-input dataset.
  const SampleSource& first() const { return sources.front(); }
};

// One path per model input. `path` names one source, or several as "NAME=PATH,NAME=PATH"
// (NAME a model input); a path that exists as written is always one source.
struct InputPath {
  std::string input;  // "" when unnamed
  std::string path;
};
Expected<std::vector<InputPath>> split_input_paths(const std::string& path);

// Scans every path of `spec.path`: lists the files, checks that every sample of a source has
// the same dtype and shape and that the sources hold the same number of samples, reads every
// sample once to find NaN and Inf (an error, or skipped with spec.skip_nonfinite), applies
// spec.limit, counts samples. No sample data is kept. `world` (not owned; may be null): in a
// distributed world each rank reads only its slice of the rows and every rank returns the
// one-process dataset (every rank must call it).
Expected<Dataset> open_dataset(const DataSpec& spec, const World* world = nullptr);

// The dataset description as JSON (the load-data artifact): source kind, preprocessing,
// files, skipped samples.
Expected<std::string> dataset_json(const Dataset& dataset);

// One line per skipped sample (capped), for StageResult::warnings.
std::vector<std::string> dataset_warnings(const Dataset& dataset);

// Calls `visit(index, samples)` for every sample in dataset order; `samples` holds one tensor
// per source, each of its source's sample shape. Stops at the first error, adding the file
// and sample to its message. Thread-safe and reentrant: every call reads through descriptors
// of its own, so several threads may iterate one const Dataset at once.
using SampleVisitor = std::function<Status(int64_t index, const std::vector<Tensor>& samples)>;
Status for_each_sample(const Dataset& dataset, const SampleVisitor& visit);
// The same for samples [begin, end) (indices as for_each_sample numbers them), for shards.
Status for_each_sample_in(const Dataset& dataset, int64_t begin, int64_t end, const SampleVisitor& visit);

// "calib.npy, sample 3": where sample `index` comes from (file and row; the first source's
// when there are several), for messages.
std::string sample_location(const Dataset& dataset, int64_t index);

// The shape a sample is fed to `input` with: the sample's own shape, or with a leading
// batch axis of 1 when the input's declared rank is one above it.
Shape feed_shape(const Value& input, const Shape& sample_shape);

}  // namespace qflow
