// Calibration data: a described set of samples (a .npy batch, a folder of .npy files, or a
// folder of images with preprocessing), read back one sample at a time so that memory does
// not grow with the number of samples.
#pragma once

#include <cstdint>
#include <functional>
#include <string>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Where the samples are and how to turn each into a model input (docs/calibration-data.md).
struct DataSpec {
  std::string path;  // .npy batch, folder of .npy files, or folder of images
};

struct DatasetFile {
  std::string path;
  int64_t samples = 0;
};

struct Dataset {
  DataSpec spec;
  std::vector<DatasetFile> files;  // reading order
  DType dtype = DType::Float32;
  Shape sample_shape;  // without the samples axis
  int64_t count = 0;
};

// Scans `spec.path`: lists the files, checks that every sample has the same dtype and
// shape, counts samples. No sample data is kept.
Expected<Dataset> open_dataset(const DataSpec& spec);

// The dataset description as JSON (the load-data artifact).
Expected<std::string> dataset_json(const Dataset& dataset);

// Calls `visit(index, sample)` for every sample in dataset order; `sample` has the dataset's
// sample shape. Stops at the first error, adding the file and sample to its message.
using SampleVisitor = std::function<Status(int64_t index, const Tensor& sample)>;
Status for_each_sample(const Dataset& dataset, const SampleVisitor& visit);

// The shape a sample is fed to `input` with: the sample's own shape, or with a leading
// batch axis of 1 when the input's declared rank is one above it.
Shape feed_shape(const Value& input, const Shape& sample_shape);

}  // namespace qflow
