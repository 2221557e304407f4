// qflow CLI entry point: dispatches to subcommands and maps every failure to an exit code.
#include <stdlib.h>

#include <algorithm>
#include <exception>
#include <iostream>
#include <string>
#include <vector>

#include "framework/cli/cli_error.h"
#include "framework/cli/command.h"
#include "framework/cli/plugin_options.h"
#include "framework/core/memory_limit.h"
#include "framework/distributed/world.h"
#include "framework/interpreter/kernel_isa.h"
#include "qflow/version.h"

namespace qflow::cli {

namespace {

constexpr Command kCommands[] = {
    {"inspect", "show a model's inputs, outputs, operators, parameters and MACs", run_inspect},
    {"infer", "run a model on .npy inputs with the reference interpreter", run_infer},
    {"convert", "import and re-export an ONNX model (optionally with inferred shapes)", run_convert},
    {"check", "place a model's nodes on a target's platform and show why a node is off its accelerated path", run_check},
    {"perf", "estimate MACs, bytes and time per layer of a model on a target's platform", run_perf},
    {"verify", "compare a PTQ model with the deployable files its target runs on the host", run_verify},
    {"compare", "compare a QDQ model with its float model per quantized tensor on samples", run_compare},
    {"sensitivity", "rank nodes by the output cosine when only that node is quantized", run_sensitivity},
    {"run", "run a pipeline file (a DAG of plugin stages)", run_run},
    {"bench", "time a model per sample: float interpreter or a target's deployable file", run_bench},
    {"report", "rebuild report.html and report.md from a finished run's folder", run_report},
    {"plugins", "list the loaded plugin libraries and their components", run_plugins},
};

const Command* find_builtin(const std::string& name) {
  for (const Command& c : kCommands)
    if (c.name == name) return &c;
  return nullptr;
}

void print_main_help() {
  std::cout << "usage: qflow <command> [options]\n"
               "       qflow help <command>\n"
               "       qflow --version\n\n"
               "qflow turns float ONNX models into fixed-point NPU models.\n\n"
               "commands:\n";
  std::size_t width = 0;
  for (const Command& c : kCommands) width = std::max(width, c.name.size() + 2);
  for (const Command& c : kCommands) {
    std::string name(c.name);
    name.resize(width, ' ');
    std::cout << "  " << name << c.summary << "\n";
  }
  // Subcommands the loaded plugins contribute (a plugin that fails to load is reported by
  // the commands that need it, not here).
  if (Expected<ComponentRegistry*> registry = plugin_registry()) {
    std::vector<const ComponentInfo*> contributed = (*registry)->components(ComponentKind::Command);
    std::erase_if(contributed, [](const ComponentInfo* info) { return find_builtin(info->name) != nullptr; });
    if (!contributed.empty()) {
      std::cout << "\ncommands from plugins:\n";
      for (const ComponentInfo* info : contributed) {
        std::string name = info->name;
        name.resize(std::max(width, name.size() + 1), ' ');
        std::cout << "  " << name << info->summary << "\n";
      }
    }
  }
  std::cout << "\nglobal options (accepted by every command, anywhere on the line):\n"
               "  --plugin FILE         load a plugin library (repeatable)\n"
               "  --no-default-plugins  skip the built-in plugins and QFLOW_PLUGIN_PATH\n"
               "  --max-memory SIZE     refuse data and stop runs above SIZE bytes (K, M, G suffixes;\n"
               "                        default: half of the physical memory)\n"
               "  --isa NAME            cap the kernels' instruction set: portable, avx2, avxvnni, avx512\n"
               "                        or native (default: QFLOW_ISA, else native)\n"
               "\nRun 'qflow <command> --help' for a command's options.\n"
               "Exit codes: 0 success, 2 invalid input or command line, 3 internal error.\n";
}

Status unknown_command(const std::string& name) {
  return invalid_input("unknown command '" + name + "' (see 'qflow --help')");
}

// A built-in subcommand, else a command component of the loaded plugins.
Status run_command(const std::string& name, const std::vector<std::string>& args) {
  if (const Command* command = find_builtin(name)) return command->run(args);
  Expected<ComponentRegistry*> registry = plugin_registry();
  if (!registry) return registry.status();
  if (!(*registry)->find(ComponentKind::Command, name)) return unknown_command(name);
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<qflow::Command> command, (*registry)->make_command(name, Options{}));
  return command->run(args);
}

// `--max-memory SIZE` / `--max-memory=SIZE`, global like --plugin: taken out before dispatch
// (up to a `--`) and put in force for every size check of the process.
Status extract_max_memory(std::vector<std::string>& args) {
  constexpr std::string_view kOption = "--max-memory";
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    std::string text;
    if (args[i] == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    } else if (args[i] == kOption) {
      if (i + 1 == args.size()) return invalid_input("option '--max-memory' needs a size (--max-memory SIZE)");
      text = args[++i];
    } else if (args[i].rfind(std::string(kOption) + "=", 0) == 0) {
      text = args[i].substr(kOption.size() + 1);
    } else {
      rest.push_back(args[i]);
      continue;
    }
    Expected<int64_t> bytes = parse_byte_size(text);
    if (!bytes) return invalid_input("--max-memory: " + bytes.status().message());
    set_memory_limit(*bytes);
  }
  args = std::move(rest);
  return Status::ok();
}

// `--isa NAME` / `--isa=NAME`, global like --max-memory: the instruction-set cap of every
// kernel (framework/interpreter/kernel_isa.h). Put in the environment as well, so that the runtime and
// the processes a run starts see the same cap. Without it, QFLOW_ISA must be valid.
Status extract_isa(std::vector<std::string>& args) {
  constexpr std::string_view kOption = "--isa";
  std::vector<std::string> rest;
  std::string name;
  bool given = false;
  for (std::size_t i = 0; i < args.size(); ++i) {
    if (args[i] == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    } else if (args[i] == kOption) {
      if (i + 1 == args.size()) return invalid_input("option '--isa' needs a name (--isa NAME)");
      name = args[++i], given = true;
    } else if (args[i].rfind(std::string(kOption) + "=", 0) == 0) {
      name = args[i].substr(kOption.size() + 1), given = true;
    } else {
      rest.push_back(args[i]);
    }
  }
  args = std::move(rest);
  if (!given) return kernel_isa_cap_status();
  QFLOW_RETURN_IF_ERROR(set_kernel_isa_cap(name, "--isa"));
  ::setenv("QFLOW_ISA", name.c_str(), 1);
  return Status::ok();
}

int run_main(int argc, char** argv) {
  std::vector<std::string> args(argv + 1, argv + argc);
  // Taken out before dispatch so that every subcommand accepts them without declaring them.
  Expected<PluginOptions> plugin_options = extract_plugin_options(args);
  if (!plugin_options) return report_error(plugin_options.status());
  if (Status memory = extract_max_memory(args); !memory.is_ok()) return report_error(memory);
  if (Status isa = extract_isa(args); !isa.is_ok()) return report_error(isa);
  const bool plugins_named = !plugin_options->files.empty();
  set_plugin_options(std::move(plugin_options).value());
  if (args.empty()) return report_error(invalid_input("no command given (see 'qflow --help')"));
  const std::string& first = args[0];
  if (first == "--help" || first == "-h") {
    print_main_help();
    return kExitOk;
  }
  if (first == "help") {
    if (args.size() == 1) {
      print_main_help();
      return kExitOk;
    }
    const Status status = run_command(args[1], {"--help"});
    return status.is_ok() ? kExitOk : report_error(status);
  }
  if (first == "--version") {
    std::cout << "qflow " << QFLOW_VERSION_STRING << "\n";
    return kExitOk;
  }
  if (!first.empty() && first[0] == '-')
    return report_error(invalid_input("unknown option '" + first + "' (see 'qflow --help')"));
  // Plugins load lazily, but a library the user named must never be ignored silently,
  // whichever command was given: a broken one fails here.
  if (plugins_named) {
    Expected<ComponentRegistry*> registry = plugin_registry();
    if (!registry) return report_error(registry.status());
  }
  const Status status = run_command(first, std::vector<std::string>(args.begin() + 1, args.end()));
  return status.is_ok() ? kExitOk : report_error(status);
}

}  // namespace

std::span<const Command> commands() { return kCommands; }

}  // namespace qflow::cli

namespace {

// Under mpirun a rank that fails alone would leave the others waiting for it in the next
// exchange forever: a failure on any rank of a distributed run ends the whole job.
int finish(int code) {
  const qflow::World& world = qflow::World::get();
  if (code != qflow::cli::kExitOk && world.distributed()) {
    std::cout.flush();
    std::cerr.flush();
    world.abort(code);
  }
  return code;
}

}  // namespace

int main(int argc, char** argv) {
  const qflow::World::Session session(argc, argv);
  try {
    return finish(qflow::cli::run_main(argc, argv));
  } catch (const std::exception& e) {
    std::cerr << "qflow: error: internal error: " << qflow::cli::one_line(e.what()) << std::endl;
  } catch (...) {
    std::cerr << "qflow: error: internal error: unknown exception" << std::endl;
  }
  return finish(qflow::cli::kExitInternal);
}
