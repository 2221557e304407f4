// Calibration data from .npy: streaming rows by offset, folders, limit, NaN/Inf policy,
// option validation, and concurrent iteration of one dataset.
#include <doctest/doctest.h>

#include <cmath>
#include <fstream>
#include <limits>
#include <thread>

#include "framework/core/file_io.h"
#include "framework/data/data_options.h"
#include "framework/data/npy_stream.h"
#include "framework/pipeline/stage_execution.h"
#include "framework/plugin/component_registry.h"
#include "test_dataset_util.h"

namespace qflow {

using test::all_samples;
using test::batch_value;
using test::batch_values;
using test::spec_for;
using test::TempDir;
using test::write_npy;

namespace {

std::string open_error(const DataSpec& spec) {
  Expected<Dataset> dataset = open_dataset(spec);
  return dataset ? std::string("(opened)") : dataset.status().message();
}

std::string option_error(const Options& options) {
  Expected<DataSpec> spec = data_spec_from_options(options);
  return spec ? std::string("(accepted)") : spec.status().message();
}

Options with_path(const std::string& name, OptionValue value) {
  Options options;
  options.set("path", std::string("calib.npy"));
  options.set(name, std::move(value));
  return options;
}

}  // namespace

TEST_CASE("dataset: a .npy batch streams exact rows; ranges and limit") {
  TempDir dir("dataset_batch");
  const std::string path = dir.file("calib.npy");
  write_npy(path, {5, 2, 3}, batch_values(5, 6));

  Expected<Dataset> dataset = open_dataset(spec_for(path));
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  CHECK(dataset->count == 5);
  CHECK(dataset->first().kind == DataSource::NpyBatch);
  CHECK(dataset->first().sample_shape == Shape{2, 3});
  REQUIRE(dataset->first().files.size() == 1);
  CHECK(dataset->first().files[0].samples == 5);
  CHECK(dataset->first().files[0].data_offset == 128);  // NumPy-style header padded to 64 bytes

  const auto rows = all_samples(*dataset);
  REQUIRE(rows.size() == 5);
  for (int64_t i = 0; i < 5; ++i)
    for (int64_t k = 0; k < 6; ++k) CHECK(rows[static_cast<std::size_t>(i)][static_cast<std::size_t>(k)] == batch_value(i, k));

  const auto middle = all_samples(*dataset, 2, 4);
  REQUIRE(middle.size() == 2);
  CHECK(middle[0][0] == batch_value(2, 0));
  CHECK(middle[1][5] == batch_value(3, 5));
  CHECK(for_each_sample_in(*dataset, 4, 6, [](int64_t, const std::vector<Tensor>&) { return Status::ok(); }).message() ==
        "sample range [4, 6) is outside [0, 5)");

  DataSpec limited = spec_for(path);
  limited.limit = 3;
  Expected<Dataset> first3 = open_dataset(limited);
  REQUIRE(first3.has_value());
  CHECK(first3->count == 3);
  CHECK(first3->first().files[0].samples == 3);
  const auto kept = all_samples(*first3);
  REQUIRE(kept.size() == 3);
  CHECK(kept[2][4] == batch_value(2, 4));
  Expected<std::string> json = dataset_json(*first3);
  REQUIRE(json.has_value());
  CHECK(*json == "{\n  \"count\": 3,\n  \"dtype\": \"float\",\n  \"files\": [\n    {\"path\": \"" + path +
                     "\", \"samples\": 3}\n  ],\n  \"limit\": 3,\n  \"sample_shape\": [2, 3],\n  \"skipped\": [],\n"
                     "  \"source\": \"npy-batch\"\n}\n");
}

TEST_CASE("dataset: a visitor's error names the file and the sample") {
  TempDir dir("dataset_visit_error");
  const std::string path = dir.file("calib.npy");
  write_npy(path, {3, 2}, batch_values(3, 2));
  Expected<Dataset> dataset = open_dataset(spec_for(path));
  REQUIRE(dataset.has_value());
  const Status status = for_each_sample(*dataset, [](int64_t index, const std::vector<Tensor>&) {
    return index == 1 ? invalid_input("boom") : Status::ok();
  });
  CHECK(status.message() == path + ", sample 1: boom");
  CHECK(sample_location(*dataset, 2) == path + ", sample 2");
}

TEST_CASE("dataset: truncated, non-.npy and missing files are refused with one-line messages") {
  TempDir dir("dataset_truncated");
  const std::string path = dir.file("calib.npy");
  Expected<std::string> bytes = serialize_npy(Tensor::from_vector<float>({5, 2, 3}, batch_values(5, 6)));
  REQUIRE(bytes.has_value());
  REQUIRE(write_file_atomic(path, std::string_view(*bytes).substr(0, bytes->size() - 20)).is_ok());
  CHECK(open_error(spec_for(path)) == path + ": shape (5, 2, 3) of float needs 120 bytes of data, the file holds 100");

  REQUIRE(write_file_atomic(path, "not an npy file at all").is_ok());
  CHECK(open_error(spec_for(path)) == path + ": not a .npy file (the magic string \\x93NUMPY is missing)");
  CHECK(open_error(spec_for(dir.file("absent.npy"))).find("cannot open '" + dir.file("absent.npy") + "'") == 0);
}

TEST_CASE("dataset: a file that changes after load-data read it is an error, not garbage") {
  TempDir dir("dataset_changed");
  const std::string path = dir.file("calib.npy");
  write_npy(path, {5, 2, 3}, batch_values(5, 6));
  Expected<Dataset> dataset = open_dataset(spec_for(path));
  REQUIRE(dataset.has_value());
  write_npy(path, {3, 2, 3}, batch_values(3, 6));
  const Status status = for_each_sample(*dataset, [](int64_t, const std::vector<Tensor>&) { return Status::ok(); });
  CHECK(status.message() == path + ": the file changed since load-data read it (200 bytes, expected 248)");
}

TEST_CASE("dataset: a shape overflowing 64 bits is refused") {
  TempDir dir("dataset_overflow");
  const std::string path = dir.file("calib.npy");
  Expected<std::string> bytes = serialize_npy(Tensor::from_vector<float>({1, 2}, {1.0f, 2.0f}));
  REQUIRE(bytes.has_value());
  std::string text = *bytes;
  const std::size_t at = text.find("(1, 2)");
  REQUIRE(at != std::string::npos);
  text.replace(at, 6, "(4294967296, 4294967296)");
  REQUIRE(write_file_atomic(path, text).is_ok());
  CHECK(open_error(spec_for(path)) == path + ": shape (4294967296, 4294967296) overflows a 64-bit size");
}

TEST_CASE("dataset: a folder of .npy batches is read in name order") {
  TempDir dir("dataset_folder");
  write_npy(dir.file("b.npy"), {2, 4}, batch_values(2, 4, 3));
  write_npy(dir.file("a.npy"), {3, 4}, batch_values(3, 4, 0));
  std::ofstream(dir.file("notes.txt")) << "ignored";
  Expected<Dataset> dataset = open_dataset(spec_for(dir.path()));
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  CHECK(dataset->first().kind == DataSource::NpyFolder);
  CHECK(dataset->count == 5);
  REQUIRE(dataset->first().files.size() == 2);
  CHECK(dataset->first().files[0].path == dir.file("a.npy"));
  const auto rows = all_samples(*dataset);
  REQUIRE(rows.size() == 5);
  for (int64_t i = 0; i < 5; ++i) CHECK(rows[static_cast<std::size_t>(i)][3] == batch_value(i, 3));
  // A range that crosses the file boundary.
  const auto across = all_samples(*dataset, 2, 4);
  REQUIRE(across.size() == 2);
  CHECK(across[0][0] == batch_value(2, 0));
  CHECK(across[1][0] == batch_value(3, 0));

  DataSpec limited = spec_for(dir.path());
  limited.limit = 2;
  Expected<Dataset> first2 = open_dataset(limited);
  REQUIRE(first2.has_value());
  CHECK(first2->first().files.size() == 1);  // b.npy is never opened
  CHECK(first2->count == 2);

  write_npy(dir.file("c.npy"), {1, 5}, batch_values(1, 5));
  CHECK(open_error(spec_for(dir.path())) ==
        dir.file("c.npy") + ": samples are float [5], " + dir.file("a.npy") + " holds float [4]");

  TempDir empty("dataset_empty_folder");
  CHECK(open_error(spec_for(empty.path())) ==
        empty.path() + ": the folder holds no .npy files and no images (.png, .jpg, .jpeg)");
  write_npy(empty.file("zero.npy"), {0, 3}, {});
  CHECK(open_error(spec_for(empty.path())) == empty.path() + ": holds no samples");
}

TEST_CASE("dataset: NaN and Inf samples fail by default, or are skipped with a warning") {
  TempDir dir("dataset_nan");
  const std::string path = dir.file("calib.npy");
  std::vector<float> values = batch_values(6, 4);
  const float nan = std::numeric_limits<float>::quiet_NaN();
  const float inf = std::numeric_limits<float>::infinity();
  values[3 * 4 + 0] = nan;
  values[3 * 4 + 2] = nan;
  values[5 * 4 + 1] = -inf;
  write_npy(path, {6, 4}, values);

  CHECK(open_error(spec_for(path)) ==
        path + ": sample 3 holds 2 NaN and 0 Inf values (set load-data option skip-nonfinite = true to skip such samples)");

  DataSpec skipping = spec_for(path);
  skipping.skip_nonfinite = true;
  Expected<Dataset> dataset = open_dataset(skipping);
  REQUIRE_MESSAGE(dataset.has_value(), dataset.status().message());
  CHECK(dataset->count == 4);
  REQUIRE(dataset->skipped.size() == 2);
  CHECK(dataset->skipped[0].row == 3);
  CHECK(dataset->skipped[1].inf_count == 1);
  const std::vector<std::string> warnings = dataset_warnings(*dataset);
  REQUIRE(warnings.size() == 2);
  CHECK(warnings[0] == path + ": sample 3 holds 2 NaN and 0 Inf values; skipped (skip-nonfinite = true)");
  CHECK(warnings[1] == path + ": sample 5 holds 0 NaN and 1 Inf values; skipped (skip-nonfinite = true)");

  const auto rows = all_samples(*dataset);
  REQUIRE(rows.size() == 4);
  const int64_t kept[] = {0, 1, 2, 4};
  for (std::size_t i = 0; i < 4; ++i) CHECK(rows[i][1] == batch_value(kept[i], 1));
  const auto tail = all_samples(*dataset, 3, 4);
  REQUIRE(tail.size() == 1);
  CHECK(tail[0][0] == batch_value(4, 0));
  CHECK(sample_location(*dataset, 3) == path + ", sample 4");

  Expected<std::string> json = dataset_json(*dataset);
  REQUIRE(json.has_value());
  CHECK(json->find("{\"inf_count\": 0, \"nan_count\": 2, \"path\": \"" + path + "\", \"sample\": 3}") != std::string::npos);

  // The limit counts usable samples.
  skipping.limit = 4;
  Expected<Dataset> limited = open_dataset(skipping);
  REQUIRE(limited.has_value());
  CHECK(limited->count == 4);
  CHECK(limited->first().files[0].samples == 5);
  CHECK(limited->skipped.size() == 1);

  const std::string bad = dir.file("bad.npy");
  write_npy(bad, {2, 1}, {nan, inf});
  DataSpec all_bad = spec_for(bad);
  all_bad.skip_nonfinite = true;
  CHECK(open_error(all_bad) == bad + ": all 2 samples hold NaN or Inf values; none is left to use");
}

TEST_CASE("dataset: load-data options are checked with one-line messages") {
  Options minimal;
  minimal.set("path", std::string("calib.npy"));
  Expected<DataSpec> defaults = data_spec_from_options(minimal);
  REQUIRE(defaults.has_value());
  CHECK(defaults->scale == 1.0 / 255.0);
  CHECK(defaults->batch_size == 1);
  // The pipeline table's default is written as this literal; it must be the same double.
  CHECK(0.00392156862745098 == 1.0 / 255.0);

  CHECK(option_error(with_path("resize", std::string("224"))) ==
        "load-data option 'resize' must be \"\" (keep the size) or HxW with sides 1..32768 (e.g. 224x224), got '224'");
  CHECK(option_error(with_path("resize", std::string("0x4"))).find("got '0x4'") != std::string::npos);
  CHECK(option_error(with_path("color", std::string("RGB"))) == "load-data option 'color' must be rgb, bgr or gray, got 'RGB'");
  CHECK(option_error(with_path("layout", std::string("chw"))) == "load-data option 'layout' must be nchw or nhwc, got 'chw'");
  CHECK(option_error(with_path("mean", std::string("1,2"))) ==
        "load-data option 'mean' must be one number or 3 comma-separated numbers (one per channel, in rgb order), got '1,2'");
  CHECK(option_error(with_path("std", std::string("1,0,1"))) ==
        "load-data option 'std' must be one non-zero number or 3 comma-separated non-zero numbers (one per channel, in rgb "
        "order), got '1,0,1'");
  Options gray = with_path("color", std::string("gray"));
  gray.set("mean", std::string("0.5,0.5,0.5"));
  CHECK(option_error(gray) ==
        "load-data option 'mean' must be one number (color gray has one channel), got '0.5,0.5,0.5'");
  CHECK(option_error(with_path("scale", 0.0)) == "load-data option 'scale' must be a finite number greater than 0, got 0");
  CHECK(option_error(with_path("limit", int64_t{-3})) ==
        "load-data option 'limit' must be 0 (all samples) or a positive count, got -3");
  CHECK(option_error(with_path("batch-size", int64_t{0})) == "load-data option 'batch-size' must be at least 1, got 0");
  CHECK(option_error(with_path("keep-ratio", true)) ==
        "load-data option 'keep-ratio' needs option 'resize' (HxW), which is empty");
  Options no_path;
  CHECK(option_error(no_path) == "load-data option 'path' must name a .npy file or a folder, got ''");

  Options good = with_path("mean", std::string("0.485, 0.456,0.406"));
  good.set("std", std::string("0.229,0.224,0.225"));
  good.set("resize", std::string("32x48"));
  good.set("layout", std::string("nhwc"));
  Expected<DataSpec> spec = data_spec_from_options(good);
  REQUIRE_MESSAGE(spec.has_value(), spec.status().message());
  CHECK(spec->mean == std::vector<double>{0.485, 0.456, 0.406});
  CHECK(spec->resize_height == 32);
  CHECK(spec->resize_width == 48);
  CHECK(spec->layout == SampleLayout::Nhwc);

  // Image options on .npy data are a mistake, not silently ignored.
  TempDir dir("dataset_options");
  const std::string path = dir.file("calib.npy");
  write_npy(path, {1, 2}, {1.0f, 2.0f});
  DataSpec resized = spec_for(path);
  resized.resize_height = resized.resize_width = 4;
  CHECK(open_error(resized) == "load-data option 'resize' applies to folders of images only; '" + path +
                                   "' holds .npy samples");
}

TEST_CASE("dataset: the load-data stage reads its options, reports skipped samples as warnings") {
  TempDir dir("dataset_stage");
  const std::string path = dir.file("calib.npy");
  std::vector<float> values = batch_values(4, 2);
  values[1 * 2 + 1] = std::numeric_limits<float>::infinity();
  write_npy(path, {4, 2}, values);
  PipelineStage stage;
  stage.id = "data";
  stage.kind = StageKind::LoadData;
  stage.component = "load-data";
  stage.output_type = ArtifactType::Dataset;
  stage.options["path"].value = path;
  stage.options["skip-nonfinite"].value = true;
  stage.options["limit"].value = int64_t{2};
  const ComponentRegistry registry;
  Expected<StageResult> result = execute_stage(stage, {}, registry);
  REQUIRE_MESSAGE(result.has_value(), result.status().message());
  CHECK(result->warnings ==
        std::vector<std::string>{path + ": sample 1 holds 0 NaN and 1 Inf values; skipped (skip-nonfinite = true)"});
  REQUIRE(result->artifact.dataset);
  CHECK(result->artifact.dataset->count == 2);
  CHECK(result->artifact.bytes.find("\"limit\": 2,") != std::string::npos);

  stage.options["color"].value = std::string("hsv");
  CHECK(execute_stage(stage, {}, registry).status().message() ==
        "load-data option 'color' must be rgb, bgr or gray, got 'hsv'");
}

TEST_CASE("dataset: threads iterating one dataset at once see the same samples") {
  TempDir dir("dataset_threads");
  write_npy(dir.file("a.npy"), {40, 3}, batch_values(40, 3, 0));
  write_npy(dir.file("b.npy"), {25, 3}, batch_values(25, 3, 40));
  Expected<Dataset> opened = open_dataset(spec_for(dir.path()));
  REQUIRE(opened.has_value());
  const Dataset& dataset = *opened;
  const auto expected = all_samples(dataset);
  REQUIRE(expected.size() == 65);

  constexpr int kThreads = 4;
  std::vector<std::vector<std::vector<float>>> seen(kThreads);
  std::vector<Status> results(kThreads);
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t)
    threads.emplace_back([&, t] {
      // Each thread makes several passes so the reads interleave.
      for (int pass = 0; pass < 3; ++pass) {
        seen[static_cast<std::size_t>(t)].clear();
        results[static_cast<std::size_t>(t)] = for_each_sample(dataset, [&](int64_t, const std::vector<Tensor>& samples) {
          const Tensor& sample = samples.at(0);
          seen[static_cast<std::size_t>(t)].emplace_back(sample.span<float>().begin(), sample.span<float>().end());
          return Status::ok();
        });
      }
    });
  for (std::thread& thread : threads) thread.join();
  for (int t = 0; t < kThreads; ++t) {
    CHECK(results[static_cast<std::size_t>(t)].is_ok());
    CHECK(seen[static_cast<std::size_t>(t)] == expected);
  }
}

TEST_CASE("dataset: NpyStream reads single rows and refuses rows out of range") {
  TempDir dir("dataset_stream");
  const std::string path = dir.file("rows.npy");
  write_npy(path, {4, 3}, batch_values(4, 3));
  Expected<NpyStream> stream = NpyStream::open(path);
  REQUIRE_MESSAGE(stream.has_value(), stream.status().message());
  CHECK(stream->rows() == 4);
  CHECK(stream->row_bytes() == 12);
  Expected<Tensor> row = stream->read_row(2);
  REQUIRE(row.has_value());
  CHECK(row->shape() == Shape{3});
  CHECK(row->span<float>()[1] == batch_value(2, 1));
  CHECK(stream->read_row(4).status().message() == path + ": row 4 is outside [0, 4)");
}

}  // namespace qflow
