// `qflow run`: validates a pipeline file, then prints it in canonical form or runs its stages.
#include <dlfcn.h>

#include <algorithm>
#include <cstdlib>
#include <iostream>
#include <mutex>
#include <sstream>
#include <thread>

#include "framework/cli/cli_error.h"
#include "framework/cli/command.h"
#include "framework/cli/plugin_options.h"
#include "framework/core/file_io.h"
#include "framework/core/memory_limit.h"
#include "framework/core/sha256.h"
#include "framework/distributed/same_build.h"
#include "framework/pipeline/pipeline.h"
#include "framework/pipeline/pipeline_runner.h"
#include "framework/pipeline/stage_execution.h"
#include "qflow/version.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

// What must be the same on every rank of a distributed run, one entry per line: the qflow
// executable and core library (content hashes: the same version built twice differs only if
// the code does) and every loaded plugin by name, version and content hash.
Expected<std::string> build_identity(const ComponentRegistry& registry) {
  std::string identity = "qflow " QFLOW_VERSION_STRING "\n";
  Dl_info core{};
  const std::string core_path =
      dladdr(reinterpret_cast<void*>(&check_same_build), &core) && core.dli_fname ? core.dli_fname : "";
  for (const std::string& path : {std::string("/proc/self/exe"), core_path}) {
    if (path.empty()) continue;
    QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(path));
    identity += (path == core_path ? "core library " : "executable ") + sha256_hex(bytes) + "\n";
  }
  std::vector<std::string> plugins;
  for (const PluginLibrary& library : registry.libraries())
    plugins.push_back("plugin " + library.name + " " + library.version + " " + library.sha256);
  std::sort(plugins.begin(), plugins.end());
  for (const std::string& plugin : plugins) identity += plugin + "\n";
  return identity;
}

constexpr std::string_view kDescription =
    "Validates PIPELINE (components, options, inputs, types, cycles) before anything runs,\n"
    "then runs its stages in dependency order, independent branches concurrently, writing\n"
    "the artifacts the pipeline names (an `output`, and tables, reports, checks and lowered\n"
    "files) and manifest.json into DIR; --save-intermediate also writes the others (models\n"
    "between passes, after every pass of a pass list, datasets, statistics). Results never\n"
    "depend on --threads.\n\n"
    "Under `mpirun -np N` (a build with QFLOW_MPI) the ranks split the calibration samples\n"
    "between them and rank 0 writes the same artifacts as one process; see\n"
    "docs/distributed.md.\n\n"
    "--set VAR=VALUE overrides a [vars] entry; --set STAGE.OPTION=VALUE overrides an option\n"
    "of a stage (string lists comma-separated). --dry-run prints the resolved pipeline as\n"
    "canonical TOML (vars substituted, every option with its default) and runs nothing; that\n"
    "output is itself a pipeline file giving the same output. See docs/pipelines.md.\n\n"
    "Each pass prints its node count before -> after, its counters and its time; the manifest\n"
    "records them. --print-after NAME prints the graph after every pass with that name, or\n"
    "after the pass stage with that id; --verify-each checks the model after every pass\n"
    "(graph structure and the ONNX checker) and stops at the first pass that breaks it. See\n"
    "docs/passes.md.\n\n"
    "A stage running longer than --stage-timeout, or a process above --max-memory (a global\n"
    "option), stops the run: the manifest keeps the finished stages and names the failed one.\n"
    "See docs/hostile-inputs.md.";

}  // namespace

Status run_run(const std::vector<std::string>& args) {
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("pipeline", po::value<std::string>()->required(), "the pipeline file (.toml)")
      ("set", po::value<std::vector<std::string>>()->composing(), "VAR=VALUE or STAGE.OPTION=VALUE; repeatable")
      ("out,o", po::value<std::string>()->default_value("qflow-out"), "folder for the artifacts and manifest.json")
      ("threads", po::value<int>()->default_value(0), "stages run at once (0: one per core)")
      ("dry-run", "print the resolved pipeline and run nothing")
      ("print-after", po::value<std::vector<std::string>>()->composing(),
       "print the graph after passes with this name, or pass stages with this id; repeatable")
      ("verify-each", "check the model after every pass")
      ("save-intermediate", "also write the artifacts the pipeline does not name, and the model after every pass")
      ("stage-timeout", po::value<double>()->default_value(0),
       "stop the run when a stage takes longer than this many seconds (0: no limit)");
  po::positional_options_description positional;
  positional.add("pipeline", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("run", args, options, positional));
  if (cmd.help) {
    print_command_help("run PIPELINE.toml [--set VAR=VALUE]... [--out DIR] [--threads N] [--dry-run]"
                       " [--print-after NAME]... [--verify-each] [--save-intermediate] [--stage-timeout SECONDS]",
                       kDescription, options);
    return Status::ok();
  }
  int threads = cmd.values["threads"].as<int>();
  if (threads < 0) return invalid_input("run: --threads must not be negative, got " + std::to_string(threads));
  if (threads == 0) threads = static_cast<int>(std::max(1u, std::thread::hardware_concurrency()));
  const double stage_timeout = cmd.values["stage-timeout"].as<double>();
  if (!(stage_timeout >= 0)) {
    std::ostringstream text;
    text << stage_timeout;
    return invalid_input("run: --stage-timeout must not be negative, got " + text.str());
  }
  const std::vector<std::string> sets =
      cmd.values.count("set") ? cmd.values["set"].as<std::vector<std::string>>() : std::vector<std::string>{};

  QFLOW_ASSIGN_OR_RETURN(Pipeline pipeline, load_pipeline(cmd.values["pipeline"].as<std::string>(), sets));
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  for (const std::string& plugin : pipeline.plugins)
    QFLOW_RETURN_IF_ERROR(registry->load_library(plugin).with_context(pipeline.path + ": plugins"));
  if (World::get().distributed()) {  // hashing the binaries is for comparing ranks only
    QFLOW_ASSIGN_OR_RETURN(std::string identity, build_identity(*registry));
    QFLOW_RETURN_IF_ERROR(check_same_build(World::get(), identity));
  }
  QFLOW_RETURN_IF_ERROR(resolve_pipeline(pipeline, ComponentCatalog::from_registry(*registry), sets));
  QFLOW_RETURN_IF_ERROR(check_targets(pipeline, *registry));
  if (cmd.values.count("dry-run")) {
    std::cout << format_pipeline(pipeline);
    return Status::ok();
  }
  RunOptions run;
  run.out_dir = cmd.values["out"].as<std::string>();
  run.threads = threads;
  if (cmd.values.count("print-after")) run.print_after = cmd.values["print-after"].as<std::vector<std::string>>();
  run.verify_each = cmd.values.count("verify-each") > 0;
  run.save_intermediate = cmd.values.count("save-intermediate") > 0;
  run.stage_timeout = stage_timeout;
  run.max_memory = memory_limit();
  // The watchdog has written the manifest; stage threads may still compute, so the process
  // ends here with the usual one-line error instead of unwinding through them.
  run.stop_process = [](const Status& status) {
    std::cout.flush();
    const int code = report_error(status);
    World::get().abort(code);  // the other ranks of a distributed run must not wait for this one
    std::_Exit(code);
  };
  run.world = &World::get();
  // Under mpirun every rank runs the same stages: rank 0 speaks for them all.
  if (run.world->is_root()) {
    run.progress = [](const std::string& line) { std::cout << line << std::endl; };
    run.warning = [](const std::string& line) { std::cerr << "qflow: warning: " << line << std::endl; };
  }
  return run_pipeline(pipeline, *registry, run);
}

}  // namespace qflow::cli
