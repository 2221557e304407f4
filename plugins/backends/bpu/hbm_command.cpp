// `qflow hbm info FILE`, `qflow hbm run FILE` and `qflow hbm perf FILE`, a command the bpu
// plugin contributes: inspect a .hbm, run it through the runtime C API
// (runtime/include/qflow/runtime.h) exactly as a device application would, and measure it
// (hbm_perf.cpp).
#include "hbm_command.h"
#include "hbm_perf.h"

#include <algorithm>
#include <cstdio>
#include <iostream>
#include <map>
#include <memory>

#include "file_bytes.h"
#include "qflow/core/json_writer.h"
#include "qflow/npy_runs.h"
#include "qflow/plugin/command_line.h"
#include "qflow/runtime.h"
#include "qflow/runtime/hbm_reader.h"
#include "qflow/runtime/hbm_codec.h"

namespace qflow {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Inspects, runs or measures a compiled .hbm model.\n\n"
    "  info FILE [--json]   the header (format version, platform, toolchain), the sections\n"
    "                       (kind, offset, size, CRC), inputs and outputs (name, dtype, shape,\n"
    "                       layout, quantization), segments (id, kind, op count, op types) and\n"
    "                       the weights size.\n"
    "  run FILE --input [NAME=]X.npy ... --output-dir DIR [--quantized]\n"
    "                       runs FILE through the runtime C API and writes <output>.npy per\n"
    "                       output. Inputs are float32 arrays of the input's shape; an input of\n"
    "                       batch 1 also takes a stack of samples along the first axis, run one\n"
    "                       by one. With --quantized, an input the device takes quantized is\n"
    "                       given as an array of its quantized dtype (int8, uint8, int16,\n"
    "                       uint16), the others as float32.\n"
    "  perf FILE [--threads N] [--iterations K] [--warmup W] [--input [NAME=]X.npy] [--json F]\n"
    "                       board-evaluation figures: N threads (default 1), each on its own\n"
    "                       context, run FILE W times (default 5) unmeasured, then K times\n"
    "                       (default 100); prints latency min/p50/p90/p99/max/mean, throughput,\n"
    "                       mean time per segment (BPU and CPU) and the peak resident memory.\n"
    "                       Inputs are seeded random values of each input's device dtype unless\n"
    "                       --input gives a float32 array. --json F also writes the figures as\n"
    "                       JSON to F ('-': JSON on stdout instead of the text).";

std::string hex32(uint32_t v) {
  char text[16];
  std::snprintf(text, sizeof text, "0x%08x", v);
  return text;
}

std::string layout_name(hbm::Layout l) {
  switch (l) {
    case hbm::Layout::nchw: return "NCHW";
    case hbm::Layout::nhwc: return "NHWC";
    default: return "other";
  }
}

std::string shape_text(const std::vector<int64_t>& shape) {
  std::string out = "[";
  for (size_t i = 0; i < shape.size(); ++i) {
    if (i) out += ", ";
    out += shape[i] < 0 ? std::string("?") : std::to_string(shape[i]);
  }
  return out + "]";
}

std::string quant_text(const hbm::Quantization& q) {
  if (q.kind == hbm::QuantKind::none) return "none";
  std::string out = q.kind == hbm::QuantKind::per_tensor ? "per-tensor" : "per-axis " + std::to_string(q.axis);
  char text[64];
  for (size_t i = 0; i < q.scales.size() && i < 4; ++i) {
    std::snprintf(text, sizeof text, " scale %.9g zero point %d", static_cast<double>(q.scales[i]), q.zero_points[i]);
    if (i) out += ",";
    out += text;
  }
  if (q.scales.size() > 4) out += ", ...";
  return out;
}

struct SegmentRow {
  uint32_t id;
  std::string kind;
  size_t ops;
  std::map<std::string, size_t> histogram;
};

void write_tensors_json(JsonWriter& json, const std::vector<hbm::TensorDesc>& tensors) {
  json.begin_array();
  for (const hbm::TensorDesc& t : tensors) {
    json.begin_object(true).field("name", t.name).field("dtype", hbm::dtype_name(t.dtype));
    json.key("shape").begin_array(true);
    for (int64_t d : t.shape) json.value(d);
    json.end_array();
    json.field("layout", layout_name(t.layout));
    json.key("quantization");
    if (t.quant.kind == hbm::QuantKind::none) {
      json.null();
    } else {
      json.begin_object(true).field("kind", t.quant.kind == hbm::QuantKind::per_tensor ? "per-tensor" : "per-axis");
      json.field("axis", t.quant.axis);
      json.key("scales").begin_array(true);
      for (float s : t.quant.scales) json.value(s);
      json.end_array().key("zero_points").begin_array(true);
      for (int32_t z : t.quant.zero_points) json.value(z);
      json.end_array().end_object();
    }
    json.end_object();
  }
  json.end_array();
}

Status hbm_info(const std::string& path, bool as_json) {
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path));
  const std::span<const uint8_t> span(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size());
  Expected<hbm::HbmFile> file = hbm::parse(span);
  if (!file) return invalid_input(path + ": " + file.message());
  Expected<lowered::Model> model = lowered::from_hbm(*file);
  if (!model) return invalid_input(path + ": " + model.message());
  Expected<std::vector<hbm::SectionEntry>> sections = hbm::section_table(span);
  if (!sections) return invalid_input(path + ": " + sections.message());
  std::vector<SegmentRow> segments;
  for (const lowered::Segment& s : model->segments) {
    SegmentRow row{s.id, s.kind == lowered::SegmentKind::bpu ? "bpu" : "cpu", s.ops.size(), {}};
    for (const lowered::Op& op : s.ops) ++row.histogram[op.type];
    segments.push_back(std::move(row));
  }
  const std::string version = std::to_string(file->version_major) + "." + std::to_string(file->version_minor);

  if (as_json) {
    JsonWriter json;
    json.begin_object();
    json.field("format_version", version).field("platform", file->platform);
    json.field("toolchain", file->toolchain_version).field("model_name", file->metadata.model_name);
    json.field("file_size", static_cast<uint64_t>(bytes.size()));
    json.key("sections").begin_array();
    for (const hbm::SectionEntry& s : *sections) {
      json.begin_object(true).field("kind", hbm::section_kind_name(s.kind)).field("offset", s.offset);
      json.field("size", s.size).field("alignment", s.alignment).field("crc32", hex32(s.crc)).end_object();
    }
    json.end_array();
    json.key("inputs");
    write_tensors_json(json, file->inputs);
    json.key("outputs");
    write_tensors_json(json, file->outputs);
    json.key("segments").begin_array();
    for (const SegmentRow& s : segments) {
      json.begin_object(true).field("id", s.id).field("kind", s.kind).field("ops", static_cast<uint64_t>(s.ops));
      json.key("op_types").begin_object(true);
      for (const auto& [type, n] : s.histogram) json.field(type, static_cast<uint64_t>(n));
      json.end_object().end_object();
    }
    json.end_array();
    json.field("weights_bytes", static_cast<uint64_t>(file->weights.size()));
    json.key("properties").begin_object();
    for (const auto& [k, v] : file->metadata.properties) json.field(k, v);
    json.end_object();
    json.end_object();
    QFLOW_ASSIGN_OR_RETURN(std::string text, json.finish());
    std::cout << text;
    return Status::ok();
  }

  std::cout << "format version " << version << ", platform " << file->platform << ", toolchain '"
            << file->toolchain_version << "', " << bytes.size() << " bytes\n";
  std::cout << "model " << file->metadata.model_name << "\n\nsections:\n";
  for (size_t i = 0; i < sections->size(); ++i) {
    const hbm::SectionEntry& s = (*sections)[i];
    std::printf("  %2zu  %-12s offset %8llu  size %8llu  align %4u  crc32 %s\n", i,
                hbm::section_kind_name(s.kind).c_str(), static_cast<unsigned long long>(s.offset),
                static_cast<unsigned long long>(s.size), s.alignment, hex32(s.crc).c_str());
  }
  std::fflush(stdout);
  for (const auto& [title, list] : {std::pair{"inputs", &file->inputs}, std::pair{"outputs", &file->outputs}}) {
    std::cout << "\n" << title << ":\n";
    for (const hbm::TensorDesc& t : *list) {
      std::cout << "  " << t.name << "  " << hbm::dtype_name(t.dtype) << " " << shape_text(t.shape) << "  "
                << layout_name(t.layout) << "  quantization " << quant_text(t.quant) << "\n";
    }
  }
  std::cout << "\nsegments:\n";
  for (const SegmentRow& s : segments) {
    std::cout << "  id " << s.id << "  " << s.kind << "  " << s.ops << " ops:";
    for (const auto& [type, n] : s.histogram) std::cout << " " << type << " x" << n;
    std::cout << "\n";
  }
  std::cout << "\nweights: " << file->weights.size() << " bytes\n";
  return Status::ok();
}

DType ir_dtype(qflow_rt_dtype d) {
  switch (d) {
    case QFLOW_RT_INT8: return DType::Int8;
    case QFLOW_RT_UINT8: return DType::UInt8;
    case QFLOW_RT_INT16: return DType::Int16;
    case QFLOW_RT_UINT16: return DType::UInt16;
    default: return DType::Float32;
  }
}

Status hbm_run(const std::string& path, const std::vector<std::string>& specs, const std::string& dir, bool quantized) {
  qflow_rt_model* raw = nullptr;
  if (qflow_rt_load_file(path.c_str(), &raw) != QFLOW_RT_OK)
    return invalid_input(path + ": " + qflow_rt_last_error());
  std::unique_ptr<qflow_rt_model, void (*)(qflow_rt_model*)> model(raw, qflow_rt_free);
  // uint8 frame inputs (docs/input-types.md) take uint8 arrays with or without --quantized;
  // qflow_rt_run gets them as floats holding the integers.
  std::vector<bool> frames;
  {
    QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(path));
    Expected<lowered::Model> decoded =
        lowered::decode_hbm(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
    if (decoded)
      for (const int32_t t : decoded->inputs)
        frames.push_back(decoded->tensors[static_cast<size_t>(t)].type == lowered::ElemType::u8);
  }
  std::vector<FixedModelIo> inputs, outputs;
  for (size_t i = 0; i < qflow_rt_input_count(model.get()); ++i) {
    qflow_rt_tensor_info info{};
    if (qflow_rt_input_info(model.get(), i, &info) != QFLOW_RT_OK) return internal_error(qflow_rt_last_error());
    const bool frame = i < frames.size() && frames[i];
    inputs.push_back({info.name, Shape(info.shape, info.shape + info.rank),
                      frame ? DType::UInt8 : quantized ? ir_dtype(info.quantized_dtype) : DType::Float32});
  }
  std::vector<std::vector<float>> frame_floats(inputs.size());
  for (size_t i = 0; i < qflow_rt_output_count(model.get()); ++i) {
    qflow_rt_tensor_info info{};
    if (qflow_rt_output_info(model.get(), i, &info) != QFLOW_RT_OK) return internal_error(qflow_rt_last_error());
    outputs.push_back({info.name, Shape(info.shape, info.shape + info.rank), DType::Float32});
  }
  return run_fixed_model_on_npy(inputs, outputs, specs, {}, dir, path,
                                [&](const std::vector<const std::byte*>& feeds, std::vector<std::vector<float>>& results) {
                                  results.assign(outputs.size(), {});
                                  std::vector<float*> out_ptrs;
                                  for (size_t o = 0; o < outputs.size(); ++o) {
                                    size_t n = 1;
                                    for (int64_t d : outputs[o].shape) n *= static_cast<size_t>(d);
                                    results[o].resize(n);
                                    out_ptrs.push_back(results[o].data());
                                  }
                                  std::vector<const void*> in_ptrs(feeds.begin(), feeds.end());
                                  if (!quantized)
                                    for (size_t i = 0; i < inputs.size(); ++i)
                                      if (inputs[i].dtype == DType::UInt8) {
                                        const auto* bytes = reinterpret_cast<const uint8_t*>(feeds[i]);
                                        frame_floats[i].assign(bytes, bytes + static_cast<size_t>(shape_numel(inputs[i].shape)));
                                        in_ptrs[i] = frame_floats[i].data();
                                      }
                                  const qflow_rt_status status =
                                      quantized ? qflow_rt_run_quantized(model.get(), in_ptrs.data(), out_ptrs.data())
                                                : qflow_rt_run(model.get(),
                                                               reinterpret_cast<const float* const*>(in_ptrs.data()),
                                                               out_ptrs.data());
                                  if (status != QFLOW_RT_OK) return invalid_input(qflow_rt_last_error());
                                  return Status::ok();
                                });
}

}  // namespace

ComponentInfo HbmCommand::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Command;
  info.name = "hbm";
  info.summary = "show a compiled .hbm model's layout, or run it through the runtime C API";
  return info;
}

Expected<std::unique_ptr<Command>> HbmCommand::create(const Options&) {
  return std::unique_ptr<Command>(std::make_unique<HbmCommand>());
}

Status HbmCommand::run(const std::vector<std::string>& given) const {
  // `hbm info --json` is a switch, `hbm perf --json F` names a file: for perf, a --json
  // followed by a value becomes --json-file.
  std::vector<std::string> args = given;
  if (std::find(args.begin(), args.end(), "perf") != args.end())
    for (size_t i = 0; i + 1 < args.size(); ++i)
      if (args[i] == "--json" && (args[i + 1] == "-" || !args[i + 1].starts_with("-"))) args[i] = "--json-file";
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("action", po::value<std::string>()->required(), "info, run or perf")
      ("file", po::value<std::string>()->required(), "the .hbm file")
      ("json", "info: print JSON; perf: --json F writes the figures as JSON to F")
      ("input,i", po::value<std::vector<std::string>>()->composing(), "run, perf: FILE.npy or NAME=FILE.npy; repeat for several inputs")
      ("output-dir,o", po::value<std::string>(), "run: folder for the <output-name>.npy files")
      ("quantized", "run: give inputs the device takes quantized in their quantized dtype")
      ("threads", po::value<int64_t>()->default_value(1), "perf: threads, each with its own context")
      ("iterations", po::value<int64_t>()->default_value(100), "perf: measured runs per thread")
      ("warmup", po::value<int64_t>()->default_value(5), "perf: unmeasured runs per thread first")
      ("json-file", po::value<std::string>(), "perf: the same as --json F");
  po::positional_options_description positional;
  positional.add("action", 1).add("file", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("hbm", args, options, positional));
  if (cmd.help) {
    print_command_help("hbm info FILE [--json]\n       qflow hbm run FILE --input [NAME=]X.npy [--input ...] "
                       "--output-dir DIR [--quantized]\n       qflow hbm perf FILE [--threads N] [--iterations K] "
                       "[--warmup W] [--input [NAME=]X.npy] [--json F]",
                       kDescription, options);
    return Status::ok();
  }
  const std::string action = cmd.values["action"].as<std::string>();
  const std::string path = cmd.values["file"].as<std::string>();
  const bool perf_options = !cmd.values["threads"].defaulted() || !cmd.values["iterations"].defaulted() ||
                            !cmd.values["warmup"].defaulted() || cmd.values.count("json-file");
  if (action != "perf" && perf_options)
    return invalid_input("hbm " + action + ": --threads, --iterations, --warmup and --json F belong to 'hbm perf'");
  if (action == "perf") {
    if (cmd.values.count("output-dir") || cmd.values.count("quantized"))
      return invalid_input("hbm perf: --output-dir and --quantized belong to 'hbm run'");
    HbmPerfOptions o;
    o.path = path;
    o.threads = cmd.values["threads"].as<int64_t>();
    o.iterations = cmd.values["iterations"].as<int64_t>();
    o.warmup = cmd.values["warmup"].as<int64_t>();
    if (cmd.values.count("input")) o.inputs = cmd.values["input"].as<std::vector<std::string>>();
    if (cmd.values.count("json-file")) o.json_path = cmd.values["json-file"].as<std::string>();
    else if (cmd.values.count("json")) o.json_path = "-";
    return hbm_perf(o);
  }
  if (action == "info") {
    if (cmd.values.count("input") || cmd.values.count("output-dir") || cmd.values.count("quantized"))
      return invalid_input("hbm info: --input, --output-dir and --quantized belong to 'hbm run'");
    return hbm_info(path, cmd.values.count("json") > 0);
  }
  if (action == "run") {
    if (cmd.values.count("json")) return invalid_input("hbm run: --json belongs to 'hbm info'");
    if (!cmd.values.count("input")) return invalid_input("hbm run: the option '--input' is required (see 'qflow hbm --help')");
    if (!cmd.values.count("output-dir"))
      return invalid_input("hbm run: the option '--output-dir' is required (see 'qflow hbm --help')");
    return hbm_run(path, cmd.values["input"].as<std::vector<std::string>>(), cmd.values["output-dir"].as<std::string>(),
                   cmd.values.count("quantized") > 0);
  }
  return invalid_input("hbm: unknown action '" + action + "' (expected info, run or perf; see 'qflow hbm --help')");
}

}  // namespace qflow
