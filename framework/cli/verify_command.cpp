// `qflow verify`: a PTQ model and the deployable files its target runs on the host, on the same
// samples (framework/quant/deployed_verify.h). The files come as `--<role> FILE`, the roles
// of the target's lowering (Target::runnable_roles).
#include <algorithm>
#include <filesystem>
#include <iostream>
#include <set>

#include "framework/cli/command.h"
#include "framework/cli/deployed_file.h"
#include "framework/cli/plugin_options.h"
#include "framework/core/file_io.h"
#include "framework/data/data_options.h"
#include "framework/onnx/onnx_import.h"
#include "framework/pipeline/pipeline_text.h"
#include "framework/quant/deployed_verify.h"

namespace qflow::cli {

namespace {

namespace po = boost::program_options;

constexpr std::string_view kDescription =
    "Runs every sample of DATA (an .npy batch, a folder of .npy files or of images, as the\n"
    "load-data stage reads them with default options) through the PTQ model (the float\n"
    "simulation of quantization, with the reference interpreter) and through each deployable\n"
    "file, given as --ROLE FILE with the roles of the target's lowering, and reports per\n"
    "output: mean and minimum cosine and the largest absolute error of each file against the\n"
    "PTQ model, and the rate of elements where each file after the first gives exactly the\n"
    "first one's value. The text goes to stdout (--json: the JSON) and both to\n"
    "OUT/verify_result.{txt,json}. Fails when the files differ anywhere.";

const std::set<std::string> kOwnOptions = {"help", "h", "model", "data", "limit", "threads", "out", "json", "target"};

// Takes every `--NAME FILE` / `--NAME=FILE` whose NAME is not one of the command's own
// options out of `args`: the deployable files by role.
Expected<std::map<std::string, std::string>> extract_role_files(std::vector<std::string>& args) {
  std::map<std::string, std::string> files;
  std::vector<std::string> rest;
  for (std::size_t i = 0; i < args.size(); ++i) {
    const std::string& arg = args[i];
    if (arg == "--") {
      rest.insert(rest.end(), args.begin() + static_cast<std::ptrdiff_t>(i), args.end());
      break;
    }
    if (arg.rfind("--", 0) != 0 || arg.size() < 3) {
      rest.push_back(arg);
      continue;
    }
    const std::size_t eq = arg.find('=');
    const std::string name = arg.substr(2, eq == std::string::npos ? std::string::npos : eq - 2);
    if (kOwnOptions.count(name)) {
      rest.push_back(arg);
      continue;
    }
    std::string path;
    if (eq != std::string::npos) {
      path = arg.substr(eq + 1);
    } else {
      if (i + 1 >= args.size()) return invalid_input("verify: --" + name + " needs a file");
      path = args[++i];
    }
    if (!files.emplace(name, path).second) return invalid_input("verify: --" + name + " given twice");
  }
  args = std::move(rest);
  return files;
}

// The target that runs every given role: --target, else the one installed target whose
// runnable roles include them all.
Expected<std::shared_ptr<Target>> verifying_target(const ComponentRegistry& registry, const std::string& name,
                                                   const std::map<std::string, std::string>& files) {
  auto covers = [&](const Target& target) {
    const std::vector<std::string> roles = target.runnable_roles();
    return std::all_of(files.begin(), files.end(), [&](const auto& file) {
      return std::find(roles.begin(), roles.end(), file.first) != roles.end();
    });
  };
  std::vector<std::string> given;
  for (const auto& [role, path] : files) given.push_back("--" + role);
  if (!name.empty()) {
    QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target, registry.make_target(name, Options{}));
    if (!covers(*target)) {
      std::vector<std::string> roles;
      for (const std::string& role : target->runnable_roles()) roles.push_back("--" + role);
      return invalid_input("verify: target '" + name + "' runs " + (roles.empty() ? "no file" : join(roles, ", ")) +
                           " on the host, not " + join(given, ", "));
    }
    return target;
  }
  std::vector<std::shared_ptr<Target>> found;
  std::vector<std::string> names;
  for (const InstalledTarget& installed : installed_targets(registry))
    if (covers(*installed.target)) {
      found.push_back(installed.target);
      names.push_back(installed.name);
    }
  if (found.size() == 1) return found[0];
  if (found.empty()) return invalid_input("verify: no installed target runs " + join(given, ", ") + " on the host");
  return invalid_input("verify: targets " + join(names, ", ") + " all run " + join(given, ", ") + "; choose one with --target");
}

// The --ROLE flags each installed target takes, in the order it compares them.
void print_runnable_roles(const ComponentRegistry& registry) {
  std::cout << "\nroles of the installed targets' deployable files:\n";
  for (const InstalledTarget& installed : installed_targets(registry)) {
    std::vector<std::string> roles;
    for (const std::string& role : installed.target->runnable_roles()) roles.push_back("--" + role);
    std::cout << "  " << installed.name << ": " << (roles.empty() ? "runs none on the host" : join(roles, " ")) << "\n";
  }
}

}  // namespace

Status run_verify(const std::vector<std::string>& given_args) {
  std::vector<std::string> args = given_args;
  QFLOW_ASSIGN_OR_RETURN(const auto role_files, extract_role_files(args));
  po::options_description options("options");
  options.add_options()
      ("help,h", "show this help")
      ("model", po::value<std::string>()->required(), "the PTQ model (<name>_ptq_model.onnx)")
      ("data", po::value<std::string>()->required(), "samples: .npy batch or folder")
      ("target", po::value<std::string>()->default_value(""),
       "the target whose files these are (\"\": the one installed target that runs all the given roles)")
      ("limit", po::value<int64_t>()->default_value(0), "only the first N samples; 0 = all")
      ("threads", po::value<int>()->default_value(1), "samples run at once")
      ("out", po::value<std::string>()->default_value("."), "folder for verify_result.{txt,json}")
      ("json", "print the JSON instead of the text");
  po::positional_options_description positional;
  positional.add("model", 1);
  QFLOW_ASSIGN_OR_RETURN(ParsedCommandLine cmd, parse_command_line("verify", args, options, positional));
  if (cmd.help) {
    print_command_help("verify MODEL --ROLE FILE... --data PATH [--target NAME] [--limit N] [--threads N] [--out DIR]\n"
                       "                    [--json]",
                       kDescription, options);
    if (Expected<ComponentRegistry*> registry = plugin_registry()) print_runnable_roles(**registry);
    return Status::ok();
  }
  if (role_files.empty())
    return invalid_input("verify: no deployable file given (--ROLE FILE; 'qflow verify --help' lists the roles)");
  QFLOW_ASSIGN_OR_RETURN(ComponentRegistry * registry, plugin_registry());
  QFLOW_ASSIGN_OR_RETURN(std::shared_ptr<Target> target,
                         verifying_target(*registry, cmd.values["target"].as<std::string>(), role_files));
  std::vector<RunnableFile> files;
  for (const std::string& role : target->runnable_roles()) {
    const auto file = role_files.find(role);
    if (file == role_files.end()) continue;
    QFLOW_ASSIGN_OR_RETURN(std::string bytes, read_file(file->second));
    auto shared = std::make_shared<const std::string>(std::move(bytes));
    const std::string path = file->second;
    files.push_back({role, [target, role, shared, path]() -> Expected<std::unique_ptr<DeployedModel>> {
                       Expected<std::unique_ptr<DeployedModel>> loaded = target->load(role, *shared);
                       if (!loaded) return loaded.status().with_context(path);
                       return loaded;
                     }});
  }
  const std::string model_path = cmd.values["model"].as<std::string>();
  QFLOW_ASSIGN_OR_RETURN(Model model, import_onnx_file(model_path));
  Options data_options;
  data_options.set("path", cmd.values["data"].as<std::string>());
  QFLOW_ASSIGN_OR_RETURN(DataSpec spec, data_spec_from_options(data_options));
  QFLOW_ASSIGN_OR_RETURN(Dataset dataset, open_dataset(spec));
  const int64_t limit = cmd.values["limit"].as<int64_t>();
  ProgressBar progress("verify", limit > 0 ? std::min(limit, dataset.count) : dataset.count);  // on a terminal only
  QFLOW_ASSIGN_OR_RETURN(DeployedVerification result,
                         verify_deployed(model, files, dataset, cmd.values["threads"].as<int>(), limit, &progress));
  progress.finish();
  const std::string text = verification_text(result);
  QFLOW_ASSIGN_OR_RETURN(std::string json, verification_json(result));
  const std::filesystem::path folder(cmd.values["out"].as<std::string>());
  std::error_code ec;
  std::filesystem::create_directories(folder, ec);
  if (ec) return io_error("cannot create output folder '" + folder.string() + "': " + ec.message());
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "verify_result.txt").string(), text));
  QFLOW_RETURN_IF_ERROR(write_file_atomic((folder / "verify_result.json").string(), json));
  std::cout << (cmd.values.count("json") ? json : text);
  if (!result.bit_identical()) return invalid_input(difference_message(result));
  return Status::ok();
}

}  // namespace qflow::cli
