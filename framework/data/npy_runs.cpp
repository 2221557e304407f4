// Input binding and per-sample runs of a fixed-shape model on .npy files (qflow/npy_runs.h).
#include "qflow/npy_runs.h"

#include <algorithm>
#include <cstring>
#include <filesystem>
#include <iostream>
#include <map>
#include <optional>

#include "framework/data/npy.h"

namespace qflow {

Expected<Tensor> read_npy_array(const std::string& path) { return read_npy_file(path); }

namespace {

std::string type_text(DType dtype, const Shape& shape) {
  return std::string(dtype_name(dtype)) + " " + shape_to_string(shape);
}

Expected<std::vector<std::string>> bind(const std::vector<FixedModelIo>& inputs, const std::vector<std::string>& specs) {
  std::vector<std::string> files(inputs.size());
  std::vector<bool> given(inputs.size(), false);
  size_t next_unnamed = 0;
  for (const std::string& spec : specs) {
    const size_t eq = spec.find('=');
    std::optional<size_t> target;
    if (eq != std::string::npos) {
      const std::string name = spec.substr(0, eq);
      for (size_t i = 0; i < inputs.size(); ++i)
        if (inputs[i].name == name) target = i;
      if (!target && !std::filesystem::exists(spec)) {
        std::string names;
        for (const FixedModelIo& in : inputs) names += (names.empty() ? "" : ", ") + in.name;
        return invalid_input("--input " + spec + ": the model has no input named '" + name + "' (inputs: " + names + ")");
      }
    }
    const std::string file = target ? spec.substr(eq + 1) : spec;
    if (!target) {
      if (next_unnamed >= inputs.size())
        return invalid_input("--input " + spec + ": the model has only " + std::to_string(inputs.size()) +
                             " input(s) to bind unnamed files to");
      target = next_unnamed++;
    }
    if (given[*target]) return invalid_input("input '" + inputs[*target].name + "' is given more than once");
    given[*target] = true;
    files[*target] = file;
  }
  for (size_t i = 0; i < inputs.size(); ++i)
    if (!given[i])
      return invalid_input("input '" + inputs[i].name + "' was not given (use --input " + inputs[i].name + "=FILE.npy)");
  return files;
}

}  // namespace

std::string safe_file_name(const std::string& name) {
  std::string out;
  for (char c : name) {
    const bool keep = (c >= 'a' && c <= 'z') || (c >= 'A' && c <= 'Z') || (c >= '0' && c <= '9') || c == '_' ||
                      c == '-' || c == '.';
    out += keep ? c : '_';
  }
  if (out.empty()) return "_";
  if (out[0] == '.') out[0] = '_';
  return out;
}

Status run_fixed_model_on_npy(const std::vector<FixedModelIo>& inputs, const std::vector<FixedModelIo>& outputs,
                              const std::vector<std::string>& specs, const std::vector<std::string>& carries,
                              const std::string& dir, const std::string& source, const FixedModelRun& run) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<std::string> files, bind(inputs, specs));
  std::vector<Tensor> arrays;
  int64_t samples = 0;  // 0: one run with every array as is
  std::string samples_file;
  std::vector<bool> batched(inputs.size(), false);
  for (size_t i = 0; i < inputs.size(); ++i) {
    const FixedModelIo& in = inputs[i];
    QFLOW_ASSIGN_OR_RETURN(Tensor t, read_npy_file(files[i]));
    const std::string expects = files[i] + ": input '" + in.name + "' expects " + type_text(in.dtype, in.shape);
    const bool stackable = !in.shape.empty() && in.shape[0] == 1;
    if (t.dtype() != in.dtype || t.shape() != in.shape) {
      const bool stacked = stackable && t.dtype() == in.dtype && t.rank() == static_cast<int64_t>(in.shape.size()) &&
                           t.dim(0) > 0 && std::equal(in.shape.begin() + 1, in.shape.end(), t.shape().begin() + 1);
      if (!stacked)
        return invalid_input(expects + (stackable ? " (or such arrays stacked along the first axis)" : "") +
                             ", the file holds " + type_text(t.dtype(), t.shape()));
      batched[i] = true;
      if (samples != 0 && t.dim(0) != samples)
        return invalid_input("inputs hold different numbers of samples: " + samples_file + " has " +
                             std::to_string(samples) + ", " + files[i] + " has " + std::to_string(t.dim(0)));
      samples = t.dim(0);
      samples_file = files[i];
    }
    arrays.push_back(std::move(t));
  }
  const int64_t runs = samples > 0 ? samples : 1;
  // Carried state: input index -> output index, checked before the first run.
  std::vector<std::pair<size_t, size_t>> carried;
  for (const std::string& spec : carries) {
    const size_t eq = spec.find('=');
    const std::string output = eq == std::string::npos ? "" : spec.substr(0, eq);
    const std::string input = eq == std::string::npos ? "" : spec.substr(eq + 1);
    auto out_it = std::find_if(outputs.begin(), outputs.end(), [&](const FixedModelIo& o) { return o.name == output; });
    auto in_it = std::find_if(inputs.begin(), inputs.end(), [&](const FixedModelIo& i) { return i.name == input; });
    if (eq == std::string::npos) return invalid_input("--carry " + spec + ": expected OUTPUT=INPUT");
    if (out_it == outputs.end()) return invalid_input("--carry " + spec + ": the model has no output named '" + output + "'");
    if (in_it == inputs.end()) return invalid_input("--carry " + spec + ": the model has no input named '" + input + "'");
    const size_t i = static_cast<size_t>(in_it - inputs.begin()), o = static_cast<size_t>(out_it - outputs.begin());
    if (batched[i] || in_it->dtype != DType::Float32 || shape_numel(in_it->shape) != shape_numel(out_it->shape))
      return invalid_input("--carry " + spec + ": input '" + input + "' must be a float input given one value with as "
                           "many elements as output '" + output + "'");
    carried.emplace_back(i, o);
  }
  std::vector<std::vector<float>> state(inputs.size());
  // An input of batch 1 given whole while another is stacked is fed to every run.
  std::vector<std::vector<float>> joined(outputs.size());
  for (int64_t r = 0; r < runs; ++r) {
    std::vector<const std::byte*> feeds;
    for (size_t i = 0; i < inputs.size(); ++i) {
      const size_t sample_bytes = batched[i] ? arrays[i].nbytes() / static_cast<size_t>(arrays[i].dim(0)) : 0;
      feeds.push_back(state[i].empty() ? arrays[i].raw_data() + static_cast<size_t>(r) * sample_bytes
                                       : reinterpret_cast<const std::byte*>(state[i].data()));
    }
    std::vector<std::vector<float>> results;
    if (Status s = run(feeds, results); !s.is_ok()) {
      return runs == 1 ? s.with_context(source)
                       : s.with_context(source + ", sample " + std::to_string(r + 1) + " of " + std::to_string(runs));
    }
    if (results.size() != outputs.size())
      return internal_error(source + ": the run gave " + std::to_string(results.size()) + " outputs, expected " +
                            std::to_string(outputs.size()));
    for (size_t o = 0; o < outputs.size(); ++o) joined[o].insert(joined[o].end(), results[o].begin(), results[o].end());
    for (const auto& [i, o] : carried) state[i] = results[o];
  }

  std::map<std::string, std::string> file_of;
  for (const FixedModelIo& out : outputs) {
    const std::string file = safe_file_name(out.name) + ".npy";
    auto [it, inserted] = file_of.emplace(file, out.name);
    if (!inserted)
      return invalid_input("outputs '" + it->second + "' and '" + out.name + "' would both be written to " + file);
  }
  std::error_code ec;
  std::filesystem::create_directories(dir, ec);
  if (ec) return io_error("cannot create output directory '" + dir + "': " + ec.message());
  for (size_t o = 0; o < outputs.size(); ++o) {
    Shape shape = outputs[o].shape;
    if (samples > 0) {
      if (shape.empty()) shape = {runs};
      else shape[0] *= runs;
    }
    Tensor t(DType::Float32, shape);
    if (static_cast<size_t>(t.numel()) != joined[o].size())
      return internal_error(source + ": output '" + outputs[o].name + "' has " + std::to_string(joined[o].size()) +
                            " elements, its shape " + shape_to_string(shape) + " needs " + std::to_string(t.numel()));
    if (!joined[o].empty()) std::memcpy(t.raw_data(), joined[o].data(), joined[o].size() * sizeof(float));
    const std::string path = (std::filesystem::path(dir) / (safe_file_name(outputs[o].name) + ".npy")).string();
    QFLOW_RETURN_IF_ERROR(write_npy_file(path, t));
    std::cout << "wrote " << path << " (" << type_text(DType::Float32, shape) << ")\n";
  }
  return Status::ok();
}

}  // namespace qflow
