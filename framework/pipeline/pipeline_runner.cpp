// Pipeline runner: a ready-queue scheduler over worker threads, atomic artifacts and the manifest.
#include "framework/pipeline/pipeline_runner.h"

#include <algorithm>
#include <chrono>
#include <condition_variable>
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <mutex>
#include <optional>
#include <set>
#include <thread>

#include "framework/core/file_io.h"
#include "qflow/core/json_writer.h"
#include "framework/core/memory_limit.h"
#include "framework/core/sha256.h"
#include "framework/pipeline/stage_execution.h"

namespace qflow {

namespace {

struct Completed {
  StageResult result;
  std::string sha256;
  double seconds = 0.0;
  bool written = false;  // the artifact is in the output folder
};

// A pass stage's totals over its passes.
struct PassTotals {
  std::map<std::string, int64_t> counters;
  int64_t nodes_before = 0, nodes_after = 0;
  double seconds = 0.0;
};

PassTotals pass_totals(const std::vector<PassRecord>& passes) {
  PassTotals totals;
  if (passes.empty()) return totals;
  totals.nodes_before = passes.front().nodes_before;
  totals.nodes_after = passes.back().nodes_after;
  for (const PassRecord& pass : passes) {
    for (const auto& [name, count] : pass.counters) totals.counters[name] += count;
    totals.seconds += pass.seconds;
  }
  return totals;
}

void write_counters(JsonWriter& json, const std::map<std::string, int64_t>& counters) {
  json.key("counters").begin_object();
  for (const auto& [name, count] : counters) json.field(name, count);
  json.end_object();
}

void write_option(JsonWriter& json, const OptionValue& value) {
  switch (option_value_type(value)) {
    case OptionType::Bool: json.value(std::get<bool>(value)); break;
    case OptionType::Int: json.value(std::get<int64_t>(value)); break;
    case OptionType::Float: json.value(std::get<double>(value)); break;
    case OptionType::String: json.value(std::get<std::string>(value)); break;
    case OptionType::StringList:
      json.begin_array(true);
      for (const std::string& item : std::get<std::vector<std::string>>(value)) json.value(item);
      json.end_array();
      break;
  }
}

Expected<std::string> manifest_json(const Pipeline& pipeline, const std::vector<std::optional<Completed>>& done,
                                    bool complete, const std::map<std::size_t, Status>& failures, int ranks) {
  JsonWriter json;
  json.begin_object();
  json.field("complete", complete);
  if (!failures.empty()) {
    json.key("failed").begin_object();
    json.field("message", failures.begin()->second.message());
    json.field("stage", pipeline.stages[failures.begin()->first].id);
    json.end_object();
  }
  json.field("pipeline", pipeline.path);
  json.key("plugins").begin_array();
  for (const std::string& plugin : pipeline.plugins) json.value(plugin);
  json.end_array();
  // Only a distributed run names its rank count, so one process's manifest is unchanged.
  if (ranks > 1) json.field("ranks", static_cast<int64_t>(ranks));
  json.key("stages").begin_array();
  for (std::size_t i = 0; i < pipeline.stages.size(); ++i) {
    if (!done[i]) continue;
    const PipelineStage& stage = pipeline.stages[i];
    const Completed& c = *done[i];
    json.begin_object();
    json.key("artifact").begin_object();
    json.field("bytes", static_cast<int64_t>(c.result.artifact.bytes.size()));
    if (c.written) json.field("path", stage.output);
    json.field("sha256", c.sha256);
    json.field("type", artifact_type_name(stage.output_type));
    json.end_object();
    if (c.result.calibration) {
      const CalibrationReport& report = *c.result.calibration;
      json.key("calibration").begin_object();
      if (!report.chosen.empty()) json.field("chosen", report.chosen);
      json.key("counts").begin_object();
      for (const auto& [name, count] : report.counts) json.field(name, count);
      json.end_object();
      json.key("scores").begin_object();
      for (const auto& [name, score] : report.scores) json.field(name, score);
      json.end_object();
      json.end_object();
    }
    const PassTotals totals = pass_totals(c.result.passes);
    if (is_pass_stage(stage.kind)) write_counters(json, totals.counters);
    json.field("id", stage.id);
    json.key("inputs").begin_object();
    for (const auto& [port, input] : stage.inputs) json.field(port, input.stage + "." + input.port);
    json.end_object();
    json.field("kind", stage_kind_name(stage.kind));
    if (is_pass_stage(stage.kind)) {
      json.field("nodes_after", totals.nodes_after);
      json.field("nodes_before", totals.nodes_before);
    }
    json.key("options").begin_object();
    for (const auto& [name, option] : stage.options) {
      json.key(name);
      write_option(json, option.value);
    }
    json.end_object();
    if (is_pass_stage(stage.kind)) json.field("pass_seconds", totals.seconds);
    if (stage.kind == StageKind::Passes) {
      json.key("passes").begin_array();
      for (const PassRecord& pass : c.result.passes) {
        json.begin_object();
        write_counters(json, pass.counters);
        json.field("name", pass.name);
        json.field("nodes_after", pass.nodes_after);
        json.field("nodes_before", pass.nodes_before);
        json.field("seconds", pass.seconds);
        json.end_object();
      }
      json.end_array();
    }
    if (c.result.precision) {
      json.key("precision").begin_object();
      write_precision_fields(json, *c.result.precision);
      json.end_object();
    }
    if (!c.result.side_file_roles.empty()) {
      json.key("side_file_roles").begin_object();
      for (const auto& [name, role] : c.result.side_file_roles) json.field(name, role);
      json.end_object();
    }
    if (!c.result.side_files.empty()) {
      json.key("side_files").begin_array(true);
      for (const auto& [name, bytes] : c.result.side_files) json.value(name);
      json.end_array();
    }
    json.field("seconds", c.seconds);
    json.field("use", canonical_use(stage));
    if (!c.result.warnings.empty()) {
      json.key("warnings").begin_array();
      for (const std::string& warning : c.result.warnings) json.value(warning);
      json.end_array();
    }
    json.end_object();
  }
  json.end_array();
  json.key("vars").begin_object();
  for (const auto& [name, var] : pipeline.vars) {
    json.key(name);
    write_option(json, var.value);
  }
  json.end_object();
  json.end_object();
  return json.finish();
}

// Names --print-after may give: pass stage ids, and the passes they run.
bool selects_pass_stage(const PipelineStage& stage, const std::string& name) {
  if (!is_pass_stage(stage.kind)) return false;
  if (name == stage.id || name == stage.component) return true;
  return std::find(stage.pass_names.begin(), stage.pass_names.end(), name) != stage.pass_names.end();
}

Status check_print_after(const Pipeline& pipeline, const std::vector<std::string>& print_after) {
  for (const std::string& name : print_after) {
    const bool found = std::any_of(pipeline.stages.begin(), pipeline.stages.end(),
                                   [&](const PipelineStage& stage) { return selects_pass_stage(stage, name); });
    if (found) continue;
    std::string passes;
    for (const PipelineStage& stage : pipeline.stages) {
      if (stage.kind == StageKind::Pass) passes += (passes.empty() ? "" : ", ") + stage.id + " (" + stage.component + ")";
      if (stage.kind == StageKind::Passes) {
        std::string list;
        for (const std::string& pass : stage.pass_names) list += (list.empty() ? "" : ", ") + pass;
        passes += (passes.empty() ? "" : ", ") + stage.id + " (" + list + ")";
      }
    }
    return invalid_input("--print-after " + name + ": no pass stage has that id or runs that pass (pass stages: " +
                         (passes.empty() ? std::string("none") : passes) + ")");
  }
  return Status::ok();
}

std::string milliseconds(double seconds) {
  char buffer[32];
  std::snprintf(buffer, sizeof buffer, "%.1f ms", seconds * 1e3);
  return buffer;
}

std::string pass_effect(int64_t before, int64_t after, const std::map<std::string, int64_t>& counters, double seconds) {
  std::string text = std::to_string(before) + " -> " + std::to_string(after) + " nodes";
  for (const auto& [name, count] : counters) text += ", " + name + "=" + std::to_string(count);
  return text + " (" + milliseconds(seconds) + ")";
}

// "stage fold (pass:fold-batchnorm): 52 -> 27 nodes, folded-into-conv=25 (3.1 ms), wrote ...",
// the files written beside the artifact last; a pass list's stage then one line per pass.
// `path` is empty for an artifact left unwritten.
std::string summary_line(const PipelineStage& stage, const StageResult& result, const std::string& path) {
  std::string line = "stage " + stage.id + " (" + canonical_use(stage) + "): ";
  std::vector<std::string> parts;
  if (is_pass_stage(stage.kind)) {
    const PassTotals totals = pass_totals(result.passes);
    if (stage.kind == StageKind::Pass) {
      parts.push_back(pass_effect(totals.nodes_before, totals.nodes_after, totals.counters, totals.seconds));
    } else {
      parts.push_back(std::to_string(totals.nodes_before) + " -> " + std::to_string(totals.nodes_after) + " nodes in " +
                      std::to_string(result.passes.size()) + " passes (" + milliseconds(totals.seconds) + ")");
    }
  }
  std::vector<std::string> files;
  if (!path.empty()) files.push_back(path + " (" + std::to_string(result.artifact.bytes.size()) + " bytes)");
  for (const auto& [name, bytes] : result.side_files) files.push_back(name + " (" + std::to_string(bytes.size()) + " bytes)");
  if (!files.empty()) {
    std::string wrote = "wrote ";
    for (std::size_t i = 0; i < files.size(); ++i) wrote += (i ? ", " : "") + files[i];
    parts.push_back(wrote);
  }
  if (parts.empty()) parts.push_back("kept in memory (--save-intermediate writes it)");
  for (std::size_t i = 0; i < parts.size(); ++i) line += (i ? ", " : "") + parts[i];
  if (stage.kind == StageKind::Passes)
    for (const PassRecord& pass : result.passes)
      line += "\n  " + pass.name + ": " + pass_effect(pass.nodes_before, pass.nodes_after, pass.counters, pass.seconds);
  return line;
}

class Scheduler {
 public:
  Scheduler(const Pipeline& pipeline, const QuantConfig& quantization, const ComponentRegistry& registry,
            const RunOptions& options)
      : pipeline_(pipeline), quantization_(quantization), registry_(registry), options_(options),
        done_(pipeline.stages.size()), waiting_on_(pipeline.stages.size()) {
    for (std::size_t i = 0; i < pipeline.stages.size(); ++i) {
      waiting_on_[i] = pipeline.stages[i].dependencies.size();
      if (waiting_on_[i] == 0) ready_.insert(i);
    }
  }

  Status run() {
    // Replaces a manifest an earlier run left: from now on it describes this run only.
    QFLOW_RETURN_IF_ERROR(write_manifest(false));
    // Distributed: one stage at a time, lowest file index first, the same order on every rank,
    // so that the ranks meet in each observer stage's exchange together.
    const bool distributed = options_.world && options_.world->distributed();
    const int workers =
        distributed ? 1 : std::max(1, std::min<int>(options_.threads, static_cast<int>(pipeline_.stages.size())));
    {
      std::jthread watchdog;
      const bool stage_timeouts = std::any_of(pipeline_.stages.begin(), pipeline_.stages.end(),
                                              [](const PipelineStage& stage) { return stage.timeout > 0; });
      if (options_.stage_timeout > 0 || stage_timeouts || options_.max_memory > 0)
        watchdog = std::jthread([this](std::stop_token stop) { watch(stop); });
      std::vector<std::jthread> threads;
      for (int i = 1; i < workers; ++i) threads.emplace_back([this] { work(); });
      work();
    }
    std::lock_guard lock(mutex_);
    const Status written = write_manifest(failures_.empty(), Durability::Synced);
    if (!failures_.empty()) return failures_.begin()->second;
    QFLOW_RETURN_IF_ERROR(written);
    if (options_.progress) options_.progress("wrote " + manifest_path());
    return Status::ok();
  }

 private:
  // Rank 0 of a distributed run, or the only process, writes the artifacts and the manifest.
  bool writes_files() const { return !options_.world || options_.world->is_root(); }

  std::string manifest_path() const { return (std::filesystem::path(options_.out_dir) / "manifest.json").string(); }

  // Callers hold mutex_ (or no other thread runs): the manifest reflects done_ and failures_.
  // Artifacts and the manifests written while stages run are Deferred (atomic, not flushed);
  // the run's last manifest first flushes them all in one go and is itself written durably,
  // so after a power loss a final manifest lists only artifacts that reached the disk.
  Status write_manifest(bool complete, Durability durability = Durability::Deferred) {
    if (!writes_files()) return Status::ok();
    QFLOW_ASSIGN_OR_RETURN(std::string manifest,
                           manifest_json(pipeline_, done_, complete, failures_, options_.world ? options_.world->size() : 1));
    if (durability == Durability::Synced) QFLOW_RETURN_IF_ERROR(sync_filesystem(options_.out_dir));
    return write_file_atomic(manifest_path(), manifest, durability);
  }

  // Enforces --stage-timeout (or a stage's own timeout key) and --max-memory on running
  // stages. A stage cannot be stopped from outside while it computes (plugins run arbitrary
  // loops), so on a breach the watchdog records the failure, writes the manifest (completed
  // artifacts only, the failed stage named) while holding the lock, so no stage completes
  // after it, and ends the process.
  void watch(std::stop_token stop) {
    std::unique_lock lock(mutex_);
    while (!stop.stop_requested()) {
      watchdog_wake_.wait_for(lock, stop, std::chrono::milliseconds(10), [] { return false; });
      if (stop.stop_requested() || started_.empty()) continue;
      const auto now = std::chrono::steady_clock::now();
      std::optional<std::pair<std::size_t, std::string>> breach;
      for (const auto& [index, since] : started_) {
        // The stage's own `timeout` key wins over --stage-timeout.
        const PipelineStage& stage = pipeline_.stages[index];
        const double limit = stage.timeout > 0 ? stage.timeout : options_.stage_timeout;
        if (limit > 0 && std::chrono::duration<double>(now - since).count() > limit) {
          const std::string source = stage.timeout > 0 ? "'timeout' at " + stage.timeout_pos.file + ":" +
                                                             std::to_string(stage.timeout_pos.line) + ":" +
                                                             std::to_string(stage.timeout_pos.column)
                                                       : std::string("--stage-timeout");
          breach.emplace(index, "exceeded its " + seconds_text(limit) + " s timeout (" + source + ")");
          break;
        }
      }
      // The resident size when polled is not in the message: it varies from run to run.
      if (!breach && options_.max_memory > 0 && resident_bytes() > options_.max_memory)
        breach.emplace(started_.begin()->first,
                       "exceeded the memory limit of " + std::to_string(options_.max_memory) + " bytes (--max-memory)");
      if (!breach) continue;
      const PipelineStage& stage = pipeline_.stages[breach->first];
      const Status status = invalid_input("stage '" + stage.id + "' (" + canonical_use(stage) + ") " + breach->second);
      failures_.emplace(breach->first, status);
      const Status written = write_manifest(false, Durability::Synced);
      if (options_.stop_process) options_.stop_process(written.is_ok() ? status : written);
      std::_Exit(2);
    }
  }

  static std::string seconds_text(double seconds) {
    char buffer[32];
    std::snprintf(buffer, sizeof buffer, "%g", seconds);
    return buffer;
  }

  void work() {
    std::unique_lock lock(mutex_);
    while (true) {
      wake_.wait(lock, [&] { return (!ready_.empty() && failures_.empty()) || running_ == 0; });
      if (ready_.empty() || !failures_.empty()) break;  // running_ == 0 here: nothing more will come
      // The lowest file index first, so a one-worker run follows the file where it can.
      const std::size_t index = *ready_.begin();
      ready_.erase(ready_.begin());
      ++running_;
      started_[index] = std::chrono::steady_clock::now();
      lock.unlock();
      Expected<Completed> outcome = execute(index);
      lock.lock();
      --running_;
      started_.erase(index);
      if (outcome) {
        done_[index] = std::move(*outcome);
        // A failed manifest write fails the run; the artifact itself is complete.
        if (Status written = write_manifest(false); !written.is_ok()) failures_.emplace(index, written);
        for (std::size_t j = 0; j < pipeline_.stages.size(); ++j) {
          const auto& deps = pipeline_.stages[j].dependencies;
          if (std::find(deps.begin(), deps.end(), index) != deps.end() && --waiting_on_[j] == 0) ready_.insert(j);
        }
        if (options_.progress) {
          const PipelineStage& stage = pipeline_.stages[index];
          const StageResult& result = done_[index]->result;
          const std::string path =
              done_[index]->written ? (std::filesystem::path(options_.out_dir) / stage.output).string() : std::string();
          options_.progress(summary_line(stage, result, path));
          if (!result.printed.empty()) options_.progress(result.printed.substr(0, result.printed.find_last_not_of('\n') + 1));
          if (!result.graph_text.empty()) {
            options_.progress(result.graph_text.substr(0, result.graph_text.find_last_not_of('\n') + 1));
          }
        }
        if (options_.warning)
          for (const std::string& warning : done_[index]->result.warnings)
            options_.warning("stage '" + pipeline_.stages[index].id + "': " + warning);
      } else {
        failures_.emplace(index, outcome.status());
      }
      wake_.notify_all();
    }
    wake_.notify_all();
  }

  Expected<Completed> execute(std::size_t index) {
    const PipelineStage& stage = pipeline_.stages[index];
    std::map<std::string, const Artifact*> inputs;
    std::vector<FinishedStage> finished;
    {
      // Producers completed before this stage became ready; the lock orders the reads.
      std::lock_guard lock(mutex_);
      for (const auto& [port, input] : stage.inputs)
        for (std::size_t j = 0; j < pipeline_.stages.size(); ++j)
          if (pipeline_.stages[j].id == input.stage) inputs[port] = &done_[j]->result.artifact;
      if (stage.kind == StageKind::Report || stage.kind == StageKind::CompareCalibrators)
        for (std::size_t j = 0; j < pipeline_.stages.size(); ++j)
          if (done_[j]) {
            const PipelineStage& other = pipeline_.stages[j];
            finished.push_back({other.id, other.kind, canonical_use(other), done_[j]->written ? other.output : "",
                                static_cast<int64_t>(done_[j]->result.artifact.bytes.size()), done_[j]->seconds});
          }
    }
    const auto start = std::chrono::steady_clock::now();
    StageContext stage_context;
    stage_context.verify = options_.verify_each;
    for (const std::string& name : options_.print_after)
      if (selects_pass_stage(stage, name)) stage_context.print_after.push_back(name);
    stage_context.save_intermediate = options_.save_intermediate;
    stage_context.threads = options_.threads;
    stage_context.world = options_.world;
    stage_context.quantization = &quantization_;
    if (stage.kind == StageKind::Observer)
      for (const PipelineStage& other : pipeline_.stages) {
        auto statistics = other.inputs.find("statistics");
        if (other.kind == StageKind::Calibrator && statistics != other.inputs.end() &&
            statistics->second.stage == stage.id && other.inputs.count("model") && other.inputs.count("dataset"))
          stage_context.keep_outputs = true;
      }
    if (stage.kind == StageKind::Report || stage.kind == StageKind::CompareCalibrators) stage_context.finished = &finished;
    if (options_.progress)
      stage_context.progress = [this, id = stage.id](const std::string& line) {
        std::lock_guard lock(mutex_);  // serialised with the runner's own lines
        options_.progress("stage " + id + ": " + line);
      };
    Expected<StageResult> result = execute_stage(stage, inputs, registry_, stage_context);
    release_free_memory();  // what the stage freed, for the stages after it
    const std::string context = "stage '" + stage.id + "' (" + canonical_use(stage) + ") failed";
    if (!result) return result.status().with_context(context);
    const bool write = stage.writes_output || options_.save_intermediate;
    if (write && writes_files()) {
      const std::string path = (std::filesystem::path(options_.out_dir) / stage.output).string();
      const Status written = write_file_atomic(path, result->artifact.bytes, Durability::Deferred);
      if (!written.is_ok()) return written.with_context(context);
    }
    for (const auto& [name, bytes] : result->side_files) {
      if (!writes_files()) break;
      const Status side =
          write_file_atomic((std::filesystem::path(options_.out_dir) / name).string(), bytes, Durability::Deferred);
      if (!side.is_ok()) return side.with_context(context);
    }
    Completed completed;
    completed.written = write;
    completed.sha256 = sha256_hex(result->artifact.bytes);
    completed.seconds = std::chrono::duration<double>(std::chrono::steady_clock::now() - start).count();
    completed.result = std::move(*result);
    return completed;
  }

  const Pipeline& pipeline_;
  const QuantConfig& quantization_;  // [quantization] over its target's rule
  const ComponentRegistry& registry_;
  const RunOptions& options_;
  std::mutex mutex_;
  std::condition_variable wake_;
  std::condition_variable_any watchdog_wake_;
  std::map<std::size_t, std::chrono::steady_clock::time_point> started_;  // running stages
  std::vector<std::optional<Completed>> done_;
  std::vector<std::size_t> waiting_on_;
  std::set<std::size_t> ready_;
  std::map<std::size_t, Status> failures_;  // by file index: the first is reported
  int running_ = 0;
};

}  // namespace

Status run_pipeline(const Pipeline& pipeline, const ComponentRegistry& registry, const RunOptions& options) {
  QFLOW_RETURN_IF_ERROR(check_print_after(pipeline, options.print_after));
  if (!options.world || options.world->is_root()) {
    std::error_code ec;
    std::filesystem::create_directories(options.out_dir, ec);
    if (ec) return io_error("cannot create output folder '" + options.out_dir + "': " + ec.message());
    remove_stale_temp_files(options.out_dir);
  }
  QFLOW_ASSIGN_OR_RETURN(const QuantConfig quantization, pipeline_quantization(pipeline, registry));
  if (options.progress && !pipeline.quantization_target.name.empty()) {
    // The effective settings minus the table's own: what the target's rule decided.
    const std::vector<std::string> lines = quantization_rule_lines(quantization, pipeline.quantization);
    std::string text;
    for (const std::string& line : lines) text += (text.empty() ? "" : ", ") + line;
    options.progress("quantization: target " + pipeline.quantization_target.name +
                     (text.empty() ? " asks for nothing the [quantization] table leaves open" : " sets " + text));
  }
  return Scheduler(pipeline, quantization, registry, options).run();
}

}  // namespace qflow
