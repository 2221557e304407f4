// Canonical TOML of a resolved pipeline: what `qflow run --dry-run` prints and parses back.
#include <cstdio>
#include <cstdlib>

#include "framework/pipeline/pipeline.h"
#include "framework/pipeline/pipeline_text.h"
#include "framework/quant/quantization_settings.h"

namespace qflow {

namespace {

// Resolved stage strings are literal text, so every '$' is escaped: parsing the canonical
// form must not substitute again.
std::string escape_dollars(std::string_view text) {
  std::string out;
  for (char c : text) {
    if (c == '$') out += '$';
    out += c;
  }
  return out;
}

std::string format_value(const OptionValue& value, bool escape) {
  switch (option_value_type(value)) {
    case OptionType::String: {
      const std::string& text = std::get<std::string>(value);
      return toml_quote(escape ? escape_dollars(text) : text);
    }
    case OptionType::StringList: {
      std::vector<std::string> items;
      for (const std::string& item : std::get<std::vector<std::string>>(value))
        items.push_back(toml_quote(escape_dollars(item)));
      std::string list = "[";
      list += join(items, ", ");
      list += ']';
      return list;
    }
    default: return option_value_text(value);
  }
}

}  // namespace

std::string format_pipeline(const Pipeline& pipeline) {
  std::string out;
  if (!pipeline.plugins.empty()) {
    std::vector<std::string> items;
    for (const std::string& plugin : pipeline.plugins) items.push_back(toml_quote(escape_dollars(plugin)));
    out += "plugins = [" + join(items, ", ") + "]\n\n";
  }
  if (!pipeline.vars.empty()) {
    out += "[vars]\n";
    // Var values are expanded (references resolved), so every '$' is escaped like stage strings.
    for (const auto& [name, var] : pipeline.vars) out += toml_key(name) + " = " + format_value(var.value, true) + "\n";
  }
  std::string quantization = format_quantization(pipeline.quantization);
  if (const QuantizationTarget& target = pipeline.quantization_target; !target.name.empty()) {
    std::string keys = "target = " + format_value(target.name, true) + "\n";
    if (!target.options.empty()) keys += "target-options = " + format_value(target.options, true) + "\n";
    // The target's keys belong to the whole-model table, which comes first.
    if (quantization.empty()) quantization = "[quantization]\n" + keys;
    else quantization.insert(quantization.find('\n') + 1, keys);
  }
  if (!quantization.empty()) {
    if (!out.empty()) out += "\n";
    out += quantization;
  }
  for (const PipelineStage& stage : pipeline.stages) {
    if (!out.empty()) out += "\n";
    out += "[[stage]]\n";
    out += "id = " + toml_quote(stage.id) + "\n";
    out += "use = " + toml_quote(escape_dollars(canonical_use(stage))) + "\n";
    // The named pass pipelines the list uses, as a reader needs them to know what runs.
    for (const PassPipelineInfo& pipeline : stage.pass_pipelines)
      out += "# pass pipeline " + pipeline.name + " = " + pipeline.passes + "\n";
    if (!stage.inputs.empty()) {
      std::vector<std::string> items;
      for (const auto& [port, input] : stage.inputs)
        items.push_back(toml_key(port) + " = " + toml_quote(input.stage + "." + input.port));
      out += "inputs = { " + join(items, ", ") + " }\n";
    }
    if (!stage.options.empty()) {
      std::vector<std::string> items;
      for (const auto& [name, option] : stage.options) items.push_back(toml_key(name) + " = " + format_value(option.value, true));
      out += "options = { " + join(items, ", ") + " }\n";
    }
    // Only a written artifact has its name here: a name makes the stage write it.
    if (stage.writes_output) out += "output = " + toml_quote(escape_dollars(stage.output)) + "\n";
    if (stage.timeout > 0) {
      // Shortest text that reads back as the same double, so the canonical form is a fixed point.
      char buffer[32];
      for (int digits = 6; digits <= 17; ++digits) {
        std::snprintf(buffer, sizeof buffer, "%.*g", digits, stage.timeout);
        if (std::strtod(buffer, nullptr) == stage.timeout) break;
      }
      // "90", "1.5", "1e+20": each is a TOML integer or float.
      out += "timeout = " + std::string(buffer) + "\n";
    }
  }
  return out;
}

}  // namespace qflow
