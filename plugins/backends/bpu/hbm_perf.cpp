// `qflow hbm perf FILE`: what a board evaluation asks of a model on this runtime. Each of N
// threads runs the model on its own scratch (what a qflow_rt_context holds), after W warm-up
// runs, K times; the figures are the latencies of all N*K runs, the throughput over the
// measured wall time, the time per segment and per op (the executor's clocks, read only when
// asked for: by op type and output type, and the slowest ops) and the process's peak resident
// memory.
#include "hbm_perf.h"

#include <sys/resource.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <latch>
#include <map>
#include <random>
#include <tuple>
#include <thread>

#include "file_bytes.h"
#include "qflow/core/json_writer.h"
#include "qflow/npy_runs.h"
#include "qflow/runtime/executor.h"
#include "qflow/runtime/hbm_codec.h"

namespace qflow {
namespace {

using lowered::ElemType;

double percentile(const std::vector<double>& sorted, double p) {
  if (sorted.empty()) return 0.0;
  // Nearest rank: the smallest value with at least p of the runs at or below it.
  const auto rank = static_cast<size_t>(std::ceil(p * static_cast<double>(sorted.size())));
  return sorted[std::min(sorted.size() - 1, rank == 0 ? 0 : rank - 1)];
}

double round3(double v) { return std::round(v * 1000.0) / 1000.0; }

uint64_t peak_rss_bytes() {
  rusage usage{};
  if (getrusage(RUSAGE_SELF, &usage) != 0) return 0;
  return static_cast<uint64_t>(usage.ru_maxrss) * 1024;  // kilobytes on Linux
}

// Seeded inputs of each input's device form: quantized integers spread over the type's range
// when the input takes them, otherwise floats uniform in [-1, 1).
std::vector<lowered::Value> default_inputs(const lowered::Executor& ex, std::vector<std::string>& sources) {
  const lowered::Model& m = ex.model();
  std::mt19937 rng(0);
  std::vector<lowered::Value> values;
  for (size_t i = 0; i < m.inputs.size(); ++i) {
    const lowered::Tensor& t = m.tensors[static_cast<size_t>(m.inputs[i])];
    size_t n = 1;
    for (int64_t d : t.shape) n *= static_cast<size_t>(std::max<int64_t>(d, 0));
    lowered::Value v;
    v.shape = t.shape;
    ElemType type = ElemType::f32;
    lowered::Quant quant;
    if (ex.quantized_input(i, type, quant) && lowered::is_quantized(type)) {
      int32_t lo = -128, hi = 127;
      if (type == ElemType::u8) lo = 0, hi = 255;
      if (type == ElemType::i16) lo = -32768, hi = 32767;
      if (type == ElemType::u16) lo = 0, hi = 65535;
      std::uniform_int_distribution<int32_t> dist(lo, hi);
      v.type = type;
      v.ints.resize(n);
      for (int32_t& x : v.ints) x = dist(rng);
      sources.push_back(std::string("random ") + (type == ElemType::i8 ? "int8" : type == ElemType::u8 ? "uint8"
                                                                        : type == ElemType::i16 ? "int16"
                                                                                                 : "uint16") +
                        ", seed 0");
    } else {
      std::uniform_real_distribution<float> dist(-1.0f, 1.0f);
      v.type = ElemType::f32;
      v.floats.resize(n);
      for (float& x : v.floats) x = dist(rng);
      sources.push_back("random float32 in [-1, 1), seed 0");
    }
    values.push_back(std::move(v));
  }
  return values;
}

Status bind_files(const lowered::Model& m, const std::vector<std::string>& specs, std::vector<lowered::Value>& values,
                  std::vector<std::string>& sources) {
  size_t next = 0;
  for (const std::string& spec : specs) {
    size_t index = next;
    std::string file = spec;
    if (const size_t eq = spec.find('='); eq != std::string::npos && spec.size() > 4 && !spec.ends_with("=")) {
      const std::string name = spec.substr(0, eq);
      index = m.inputs.size();
      for (size_t i = 0; i < m.inputs.size(); ++i)
        if (m.tensors[static_cast<size_t>(m.inputs[i])].name == name) index = i;
      if (index == m.inputs.size()) {
        std::string names;
        for (int32_t t : m.inputs) names += (names.empty() ? "'" : ", '") + m.tensors[static_cast<size_t>(t)].name + "'";
        return invalid_input("hbm perf: --input " + spec + ": the model has no input '" + name + "' (inputs: " + names + ")");
      }
      file = spec.substr(eq + 1);
    } else {
      ++next;
    }
    if (index >= m.inputs.size())
      return invalid_input("hbm perf: more --input files than the model's " + std::to_string(m.inputs.size()) + " inputs");
    QFLOW_ASSIGN_OR_RETURN(Tensor array, read_npy_array(file));
    if (array.dtype() != DType::Float32)
      return invalid_input(file + ": expected a float32 array, got " + std::string(dtype_name(array.dtype())));
    std::vector<float> data(array.data<float>(), array.data<float>() + array.numel());
    lowered::Value& v = values[index];
    const size_t n = v.type == ElemType::f32 ? v.floats.size() : v.ints.size();
    if (data.size() != n)
      return invalid_input("hbm perf: " + file + " holds " + std::to_string(data.size()) + " values, input '" +
                           m.tensors[static_cast<size_t>(m.inputs[index])].name + "' takes " + std::to_string(n));
    v.type = ElemType::f32;
    v.ints.clear();
    v.floats = std::move(data);
    sources[index] = file;
  }
  return Status::ok();
}

// One line of the per-op table: ops of one type in one segment kind, by their first output's type.
struct OpGroup {
  std::string kind, type, dtype;
  uint64_t count = 0;
  double seconds = 0.0;
};

// One op of the model in execution order, with its mean time per run.
struct OpTime {
  const lowered::Op* op = nullptr;
  uint32_t segment = 0;
  bool bpu = true;
  double seconds = 0.0;
};

std::string output_type(const lowered::Model& m, const lowered::Op& op) {
  return op.outputs.empty() || op.outputs[0] < 0 ? "-" : type_name(m.tensors[static_cast<size_t>(op.outputs[0])].type);
}

}  // namespace

Status hbm_perf(const HbmPerfOptions& o) {
  if (o.threads < 1 || o.threads > 1024) return invalid_input("hbm perf: --threads must be in [1, 1024], got " + std::to_string(o.threads));
  if (o.iterations < 1) return invalid_input("hbm perf: --iterations must be at least 1, got " + std::to_string(o.iterations));
  if (o.warmup < 0) return invalid_input("hbm perf: --warmup must not be negative, got " + std::to_string(o.warmup));
  QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file_bytes(o.path));
  Expected<lowered::Model> model =
      lowered::decode_hbm(std::span<const uint8_t>(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size()));
  if (!model) return invalid_input(o.path + ": " + model.message());
  Expected<lowered::Executor> created = lowered::Executor::create(std::move(*model));
  if (!created) return invalid_input(o.path + ": " + created.message());
  const lowered::Executor& ex = *created;
  const lowered::Model& m = ex.model();

  std::vector<std::string> sources;
  std::vector<lowered::Value> inputs = default_inputs(ex, sources);
  QFLOW_RETURN_IF_ERROR(bind_files(m, o.inputs, inputs, sources));

  const auto threads = static_cast<size_t>(o.threads);
  const auto iterations = static_cast<size_t>(o.iterations);
  std::vector<std::vector<double>> latencies(threads);
  std::vector<std::vector<double>> segment_seconds(threads), op_seconds(threads);
  std::vector<Status> errors(threads);
  std::latch ready(static_cast<std::ptrdiff_t>(threads) + 1), go(1);
  using Clock = std::chrono::steady_clock;
  std::vector<std::thread> pool;
  for (size_t t = 0; t < threads; ++t)
    pool.emplace_back([&, t] {
      lowered::Scratch scratch;  // what a qflow_rt_context holds
      std::vector<std::vector<float>> outputs;
      lowered::RunOptions plain;
      plain.scratch = &scratch;
      for (int64_t w = 0; w < o.warmup && errors[t]; ++w) errors[t] = ex.run_values(inputs, outputs, plain);
      ready.count_down();
      go.wait();
      lowered::RunOptions timed = plain;
      timed.segment_seconds = &segment_seconds[t];
      timed.op_seconds = &op_seconds[t];
      latencies[t].reserve(iterations);
      for (size_t k = 0; k < iterations && errors[t]; ++k) {
        const Clock::time_point start = Clock::now();
        errors[t] = ex.run_values(inputs, outputs, timed);
        latencies[t].push_back(std::chrono::duration<double>(Clock::now() - start).count());
      }
    });
  ready.arrive_and_wait();
  const Clock::time_point start = Clock::now();
  go.count_down();
  for (std::thread& t : pool) t.join();
  const double wall = std::chrono::duration<double>(Clock::now() - start).count();
  for (const Status& s : errors)
    if (!s) return invalid_input(o.path + ": " + s.message());

  std::vector<double> all;
  std::vector<double> segments(m.segments.size(), 0.0);
  for (size_t t = 0; t < threads; ++t) {
    all.insert(all.end(), latencies[t].begin(), latencies[t].end());
    for (size_t s = 0; s < segments.size() && s < segment_seconds[t].size(); ++s) segments[s] += segment_seconds[t][s];
  }
  std::sort(all.begin(), all.end());
  const double runs = static_cast<double>(all.size());
  std::vector<OpTime> ops;
  for (const lowered::Segment& seg : m.segments)
    for (const lowered::Op& op : seg.ops) ops.push_back(OpTime{&op, seg.id, seg.kind == lowered::SegmentKind::bpu, 0.0});
  for (size_t t = 0; t < threads; ++t)
    for (size_t k = 0; k < ops.size() && k < op_seconds[t].size(); ++k) ops[k].seconds += op_seconds[t][k] / runs;
  std::map<std::tuple<std::string, std::string, std::string>, OpGroup> grouped;
  for (const OpTime& t : ops) {
    OpGroup& g = grouped[{t.bpu ? "bpu" : "cpu", t.op->type, output_type(m, *t.op)}];
    g.kind = t.bpu ? "bpu" : "cpu";
    g.type = t.op->type;
    g.dtype = output_type(m, *t.op);
    ++g.count;
    g.seconds += t.seconds;
  }
  std::vector<OpGroup> groups;
  double op_total = 0.0;
  for (auto& [key, g] : grouped) {
    op_total += g.seconds;
    groups.push_back(g);
  }
  std::stable_sort(groups.begin(), groups.end(), [](const OpGroup& a, const OpGroup& b) { return a.seconds > b.seconds; });
  std::vector<OpTime> slowest = ops;
  std::stable_sort(slowest.begin(), slowest.end(), [](const OpTime& a, const OpTime& b) { return a.seconds > b.seconds; });
  slowest.resize(std::min<size_t>(slowest.size(), 15));
  double sum = 0.0;
  for (double v : all) sum += v;
  double segment_total = 0.0;
  for (double& s : segments) {
    s /= runs;
    segment_total += s;
  }
  const double ms = 1000.0;
  const uint64_t peak = peak_rss_bytes();
  const std::vector<std::pair<const char*, double>> stats = {
      {"min", all.front() * ms},         {"p50", percentile(all, 0.50) * ms}, {"p90", percentile(all, 0.90) * ms},
      {"p99", percentile(all, 0.99) * ms}, {"max", all.back() * ms},          {"mean", sum / runs * ms}};
  const double throughput = wall > 0 ? runs / wall : 0.0;

  JsonWriter json;
  json.begin_object();
  json.field("model", m.name).field("file", o.path).field("platform", m.platform).field("kernels", ex.kernels());
  json.field("threads", o.threads).field("iterations", o.iterations).field("warmup", o.warmup);
  json.field("runs", static_cast<uint64_t>(all.size()));
  json.key("inputs").begin_array();
  for (size_t i = 0; i < m.inputs.size(); ++i)
    json.begin_object(true).field("name", m.tensors[static_cast<size_t>(m.inputs[i])].name).field("source", sources[i]).end_object();
  json.end_array();
  json.key("latency_ms").begin_object(true);
  for (const auto& [name, v] : stats) json.field(name, round3(v));
  json.end_object();
  json.field("throughput_per_s", round3(throughput)).field("wall_s", round3(wall));
  json.key("segments").begin_array();
  for (size_t s = 0; s < m.segments.size(); ++s) {
    const lowered::Segment& seg = m.segments[s];
    json.begin_object(true).field("id", seg.id).field("kind", seg.kind == lowered::SegmentKind::bpu ? "bpu" : "cpu");
    json.field("ops", static_cast<uint64_t>(seg.ops.size())).field("mean_ms", round3(segments[s] * ms));
    json.field("share", segment_total > 0 ? round3(segments[s] / segment_total) : 0.0).end_object();
  }
  json.end_array();
  json.key("op_types").begin_array();
  for (const OpGroup& g : groups) {
    json.begin_object(true).field("kind", g.kind).field("op", g.type).field("output", g.dtype).field("count", g.count);
    json.field("mean_ms", round3(g.seconds * ms)).field("share", op_total > 0 ? round3(g.seconds / op_total) : 0.0).end_object();
  }
  json.end_array();
  json.key("slowest_ops").begin_array();
  for (const OpTime& t : slowest)
    json.begin_object(true).field("segment", t.segment).field("op", t.op->type).field("name", t.op->name)
        .field("output", output_type(m, *t.op)).field("mean_ms", round3(t.seconds * ms)).end_object();
  json.end_array();
  json.field("peak_rss_bytes", peak);
  json.end_object();
  QFLOW_ASSIGN_OR_RETURN(std::string text, json.finish());
  if (o.json_path == "-") {
    std::cout << text;
    return Status::ok();
  }
  if (!o.json_path.empty()) {
    std::ofstream out(o.json_path, std::ios::binary);
    out << text;
    out.close();
    if (!out) return io_error("hbm perf: cannot write '" + o.json_path + "'");
  }

  std::printf("model %s (%s), platform %s, kernels %s\n", m.name.c_str(), o.path.c_str(), m.platform.c_str(),
              ex.kernels().c_str());
  for (size_t i = 0; i < m.inputs.size(); ++i)
    std::printf("input %s: %s\n", m.tensors[static_cast<size_t>(m.inputs[i])].name.c_str(), sources[i].c_str());
  std::printf("%lld thread(s) x %lld runs (after %lld warm-up runs each), one context per thread\n",
              static_cast<long long>(o.threads), static_cast<long long>(o.iterations), static_cast<long long>(o.warmup));
  std::printf("latency ms: min %.3f  p50 %.3f  p90 %.3f  p99 %.3f  max %.3f  mean %.3f\n", stats[0].second,
              stats[1].second, stats[2].second, stats[3].second, stats[4].second, stats[5].second);
  std::printf("throughput: %.1f runs/s (%.0f runs in %.3f s)\n", throughput, runs, wall);
  std::printf("segments (mean ms per run):\n");
  for (size_t s = 0; s < m.segments.size(); ++s) {
    const lowered::Segment& seg = m.segments[s];
    std::printf("  id %-3u %s %5zu ops %10.3f ms  %5.1f%%\n", seg.id, seg.kind == lowered::SegmentKind::bpu ? "bpu" : "cpu",
                seg.ops.size(), segments[s] * ms, segment_total > 0 ? 100.0 * segments[s] / segment_total : 0.0);
  }
  std::printf("ops by type and output type (mean ms per run):\n");
  for (const OpGroup& g : groups)
    std::printf("  %s %-24s %-4s %5llu ops %10.3f ms  %5.1f%%\n", g.kind.c_str(), g.type.c_str(), g.dtype.c_str(),
                static_cast<unsigned long long>(g.count), g.seconds * ms, op_total > 0 ? 100.0 * g.seconds / op_total : 0.0);
  std::printf("slowest ops (mean ms per run):\n");
  for (const OpTime& t : slowest)
    std::printf("  segment %-3u %-20s %-4s %10.3f ms  %s\n", t.segment, t.op->type.c_str(), output_type(m, *t.op).c_str(),
                t.seconds * ms, t.op->name.c_str());
  std::printf("peak memory (RSS high-water mark): %.1f MiB\n", static_cast<double>(peak) / (1024.0 * 1024.0));
  if (!o.json_path.empty()) std::printf("wrote %s\n", o.json_path.c_str());
  std::fflush(stdout);
  return Status::ok();
}

}  // namespace qflow
