// Dataset scanning and sample streaming for .npy batches and folders of .npy files.
#include "framework/data/dataset.h"

#include <algorithm>
#include <cstring>
#include <filesystem>

#include "framework/core/json_writer.h"
#include "framework/core/npy.h"

namespace qflow {

Expected<Dataset> open_dataset(const DataSpec& spec) {
  const std::string& path = spec.path;
  std::vector<std::string> files;
  std::error_code ec;
  if (std::filesystem::is_directory(path, ec)) {
    for (const auto& entry : std::filesystem::directory_iterator(path, ec))
      if (entry.path().extension() == ".npy") files.push_back(entry.path().string());
    if (ec) return io_error("cannot list '" + path + "': " + ec.message());
    // Name order, so the sample order (and everything order-sensitive) is reproducible.
    std::sort(files.begin(), files.end());
    if (files.empty()) return invalid_input(path + ": the folder holds no .npy files");
  } else {
    files.push_back(path);
  }
  Dataset dataset;
  dataset.spec = spec;
  for (const std::string& file : files) {
    QFLOW_ASSIGN_OR_RETURN(Tensor tensor, read_npy_file(file));
    if (tensor.rank() < 1) return invalid_input(file + ": a scalar holds no samples (the first axis indexes samples)");
    const Shape sample(tensor.shape().begin() + 1, tensor.shape().end());
    if (dataset.files.empty()) {
      dataset.dtype = tensor.dtype();
      dataset.sample_shape = sample;
    } else if (tensor.dtype() != dataset.dtype || sample != dataset.sample_shape) {
      return invalid_input(file + ": samples are " + std::string(dtype_name(tensor.dtype())) + " " +
                           shape_to_string(sample) + ", " + dataset.files[0].path + " holds " +
                           std::string(dtype_name(dataset.dtype)) + " " + shape_to_string(dataset.sample_shape));
    }
    dataset.files.push_back({file, tensor.dim(0)});
    dataset.count += tensor.dim(0);
  }
  if (dataset.count == 0) return invalid_input(path + ": holds no samples");
  return dataset;
}

Expected<std::string> dataset_json(const Dataset& dataset) {
  JsonWriter json;
  json.begin_object();
  json.field("count", dataset.count);
  json.field("dtype", dtype_name(dataset.dtype));
  json.key("files").begin_array();
  for (const DatasetFile& file : dataset.files)
    json.begin_object(true).field("path", file.path).field("samples", file.samples).end_object();
  json.end_array();
  json.key("sample_shape").begin_array(true);
  for (int64_t d : dataset.sample_shape) json.value(d);
  json.end_array();
  json.end_object();
  return json.finish();
}

Status for_each_sample(const Dataset& dataset, const SampleVisitor& visit) {
  int64_t index = 0;
  for (const DatasetFile& file : dataset.files) {
    QFLOW_ASSIGN_OR_RETURN(Tensor batch, read_npy_file(file.path));
    for (int64_t row = 0; row < file.samples; ++row, ++index) {
      Tensor sample(batch.dtype(), dataset.sample_shape);
      if (sample.nbytes() > 0)
        std::memcpy(sample.raw_data(), batch.raw_data() + static_cast<std::size_t>(row) * sample.nbytes(), sample.nbytes());
      QFLOW_RETURN_IF_ERROR(visit(index, sample).with_context(file.path + ", sample " + std::to_string(row)));
    }
  }
  return Status::ok();
}

Shape feed_shape(const Value& input, const Shape& sample_shape) {
  Shape shape = sample_shape;
  const bool has_rank = input.type && input.type->shape;
  if (!has_rank || input.type->shape->size() != shape.size()) shape.insert(shape.begin(), 1);
  return shape;
}

}  // namespace qflow
