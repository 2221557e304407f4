// Parsers of the artifacts the report reads: the target's check and estimate sections, the
// verify, sensitivity and precision results (all JSON).
#include <algorithm>
#include <cctype>
#include <cmath>
#include <cstdio>

#include "framework/report/report.h"
#include "qflow/core/json.h"

namespace qflow::report {

namespace {

std::string json_text(const Json* value) {
  if (!value || value->is_null()) return "";
  if (value->is_string()) return value->get_ref<const std::string&>();
  if (value->is_number()) {
    if (value->is_number_integer()) return value->dump();
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.3f", value->get<double>());
    return buffer;
  }
  if (value->is_boolean()) return value->get<bool>() ? "true" : "false";
  return "";
}

double json_number(const Json* value) { return value && value->is_number() ? value->get<double>() : 0.0; }
// Integers as written; other numbers truncated toward zero when they fit int64, else 0.
int64_t json_int(const Json* value) {
  if (!value || !value->is_number()) return 0;
  if (const std::optional<int64_t> integer = json_int64(*value)) return *integer;
  const double number = value->get<double>();
  return std::abs(number) < 9.2e18 ? static_cast<int64_t>(number) : 0;
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// The placement names of the accelerated path ("accelerator", required) and of the other
// nodes ("fallback", "cpu" unless the section says otherwise).
Expected<std::pair<std::string, std::string>> placement_names(const Json& root, const char* section) {
  const std::string accelerator = json_text(json_member(root, "accelerator")), fallback = json_text(json_member(root, "fallback"));
  if (accelerator.empty()) return invalid_input(std::string(section) + ": no \"accelerator\" (docs/targets.md)");
  return std::pair<std::string, std::string>{accelerator, fallback.empty() ? "cpu" : fallback};
}

Expected<Placement> parse_check_json(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(Json root, parse_json(text, "check section"));
  const Json* nodes = json_member(root, "nodes");
  if (!nodes || !nodes->is_array()) return invalid_input("check section: no \"nodes\" array");
  QFLOW_ASSIGN_OR_RETURN(const auto names, placement_names(root, "check section"));
  const auto& [accelerator, fallback] = names;
  Placement placement;
  placement.accelerator = upper(accelerator);
  placement.fallback = upper(fallback);
  placement.header.emplace_back("model", json_text(json_member(root, "model")));
  placement.header.emplace_back("platform", json_text(json_member(root, "platform")));
  int64_t accelerated = 0;
  for (const Json& node : *nodes) {
    PlacementNode row;
    row.index = json_int(json_member(node, "index"));
    row.node = json_text(json_member(node, "name"));
    row.op_type = json_text(json_member(node, "op_type"));
    row.placement = upper(json_text(json_member(node, "placement")));
    row.subgraph = json_text(json_member(node, "subgraph"));
    row.reason = json_text(json_member(node, "reason"));
    if (row.placement == placement.accelerator) ++accelerated;
    placement.nodes.push_back(std::move(row));
  }
  int64_t subgraphs = 0;
  if (const Json* list = json_member(root, "subgraphs"); list && list->is_array()) {
    for (const Json& subgraph : *list) {
      const Json* members = json_member(subgraph, "nodes");
      placement.subgraphs.push_back(json_text(json_member(subgraph, "id")) + ": " +
                                    std::to_string(members && members->is_array() ? members->size() : 0) +
                                    " nodes");
      ++subgraphs;
    }
  }
  const auto others = static_cast<int64_t>(placement.nodes.size()) - accelerated;
  placement.summary.emplace_back("nodes", std::to_string(placement.nodes.size()) + " (" + placement.accelerator + " " +
                                              std::to_string(accelerated) + ", " + placement.fallback + " " +
                                              std::to_string(others) + ")");
  placement.summary.emplace_back("subgraphs", std::to_string(subgraphs));
  // Inputs compiled as uint8 frames (docs/input-types.md): the chain from the frame to the
  // first layer, one row per input.
  if (const Json* inputs = json_member(root, "inputs"); inputs && inputs->is_array())
    for (const Json& input : *inputs) {
      const auto numbers = [&](const char* key) {
        std::string text;
        if (const Json* list = json_member(input, key); list && list->is_array())
          for (const Json& v : *list) {
            if (!text.empty()) text += ' ';
            text += v.is_number() ? v.dump() : json_text(&v);
          }
        return text;
      };
      placement.summary.emplace_back(
          "input " + json_text(json_member(input, "name")),
          json_text(json_member(input, "type_rt")) + " (" + json_text(json_member(input, "layout_rt")) + ") uint8 -> " +
              json_text(json_member(input, "type_train")) + "; " + json_text(json_member(input, "conversion")) +
              "; (x - mean) * scale with mean " + numbers("mean") + ", scale " + numbers("scale") + "; folded into " +
              json_text(json_member(input, "folded")));
    }
  return placement;
}

Expected<Perf> parse_perf_json(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(Json root, parse_json(text, "estimate section"));
  const Json* layers = json_member(root, "layers");
  if (!layers || !layers->is_array()) return invalid_input("estimate section: no \"layers\" array");
  QFLOW_ASSIGN_OR_RETURN(const auto names, placement_names(root, "estimate section"));
  const auto& [accelerator, fallback] = names;
  Perf perf;
  perf.accelerator = upper(accelerator);
  perf.header.emplace_back("model", json_text(json_member(root, "model")));
  if (const Json* platform = json_member(root, "platform")) perf.header.emplace_back("platform", json_text(json_member(*platform, "name")));
  if (const Json* list = json_member(root, "subgraphs"); list && list->is_array())
    for (const Json& s : *list)
      perf.subgraphs.push_back(json_text(json_member(s, "id")) + ": " + json_text(json_member(s, "nodes")) + " nodes, MACs " +
                               json_text(json_member(s, "macs")) + ", " + json_text(json_member(s, "cycles")) + " cycles = " +
                               json_text(json_member(s, "us")) + " us");
  // The totals of each path sit under its placement name.
  if (const Json* totals = json_member(root, accelerator))
    perf.totals.emplace_back(perf.accelerator, "MACs " + json_text(json_member(*totals, "macs")) + ", " +
                                                   json_text(json_member(*totals, "cycles")) + " cycles = " +
                                                   json_text(json_member(*totals, "us")) + " us");
  if (const Json* totals = json_member(root, fallback))
    perf.totals.emplace_back(upper(fallback), json_text(json_member(*totals, "nodes")) + " nodes, MACs " +
                                                  json_text(json_member(*totals, "macs")) + " (not timed)");
  for (const Json& layer : *layers) {
    const Json* cycles = json_member(layer, "cycles");
    if (!cycles || !cycles->is_number()) continue;
    perf.slowest.push_back({json_text(json_member(layer, "name")), json_text(json_member(layer, "op_type")),
                            json_text(json_member(layer, "subgraph")), cycles->get<double>(), json_text(json_member(layer, "bound"))});
  }
  return perf;
}

void keep_slowest(std::vector<PerfNode>& nodes) {
  std::stable_sort(nodes.begin(), nodes.end(), [](const PerfNode& a, const PerfNode& b) { return a.cycles > b.cycles; });
  if (nodes.size() > 10) nodes.resize(10);
}

}  // namespace

Expected<Placement> parse_check(std::string_view json) { return parse_check_json(json); }

Expected<Perf> parse_perf(std::string_view json) {
  QFLOW_ASSIGN_OR_RETURN(Perf perf, parse_perf_json(json));
  keep_slowest(perf.slowest);
  return perf;
}

Expected<Verify> parse_verify(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(Json root, parse_json(text, "verify result"));
  const Json* roles = json_member(root, "roles");
  if (!roles || !roles->is_array()) return invalid_input("verify result: no \"roles\" array");
  Verify verify;
  for (const Json& role : *roles)
    if (role.is_string()) verify.roles.push_back(role.get_ref<const std::string&>());
  verify.samples = json_int(json_member(root, "samples"));
  const Json* identical = json_member(root, "bit_identical");
  verify.bit_identical = identical && identical->is_boolean() && identical->get<bool>();
  if (const Json* outputs = json_member(root, "outputs"); outputs && outputs->is_array())
    for (const Json& o : *outputs) {
      VerifyOutput out;
      out.name = json_text(json_member(o, "name"));
      out.elements = json_int(json_member(o, "elements"));
      for (const std::string& role : verify.roles)
        out.files.push_back({json_number(json_member(o, role + "_cosine_mean")), json_number(json_member(o, role + "_cosine_min")),
                             json_number(json_member(o, role + "_max_abs_error"))});
      out.exact_matches = json_int(json_member(o, "exact_matches"));
      out.compared = json_int(json_member(o, "compared"));
      verify.outputs.push_back(std::move(out));
    }
  return verify;
}

Expected<Sensitivity> parse_sensitivity(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(Json root, parse_json(text, "sensitivity result"));
  Sensitivity sensitivity;
  sensitivity.samples = json_int(json_member(root, "samples"));
  auto cosine = [](const Json* v) -> std::optional<double> {
    if (!v || !v->is_number()) return std::nullopt;
    return json_number(v);
  };
  if (const Json* measured = json_member(root, "measured"); measured && measured->is_boolean())
    sensitivity.measured = measured->get<bool>();
  sensitivity.ptq_cosine = cosine(json_member(root, "ptq_cosine"));
  if (const Json* bound = json_member(root, "when_below"); bound && bound->is_number()) sensitivity.when_below = json_number(bound);
  if (const Json* ranking = json_member(root, "ranking"); ranking && ranking->is_array())
    for (const Json& r : *ranking)
      sensitivity.ranking.push_back({json_text(json_member(r, "node")), json_text(json_member(r, "op_type")),
                                     cosine(json_member(r, "weight_cosine")), cosine(json_member(r, "activation_cosine"))});
  return sensitivity;
}

Expected<Precision> parse_precision(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(Json root, parse_json(text, "precision search result"));
  const Json* changes = json_member(root, "changes");
  if (!changes || !changes->is_array()) return invalid_input("precision search result: no \"changes\" array");
  Precision precision;
  if (const Json* target = json_member(root, "target")) {
    precision.target_kind = json_text(json_member(*target, "kind"));
    if (const Json* names = json_member(*target, "classifier_outputs"); names && names->is_array())
      for (const Json& name : *names) precision.classifier_outputs.push_back(json_text(&name));
    precision.threshold = json_number(json_member(*target, "threshold"));
  }
  precision.before = json_number(json_member(root, "before"));
  precision.after = json_number(json_member(root, "after"));
  precision.samples = json_int(json_member(root, "samples"));
  precision.quantized_tensors = json_int(json_member(root, "quantized_tensors"));
  precision.raised_tensors = json_int(json_member(root, "raised_tensors"));
  precision.overrides_toml = json_text(json_member(root, "overrides_toml"));
  for (const Json& c : *changes) {
    PrecisionDecision d;
    d.node = json_text(json_member(c, "node"));
    d.op_type = json_text(json_member(c, "op_type"));
    if (const Json* tensors = json_member(c, "tensors"); tensors && tensors->is_array())
      for (const Json& t : *tensors)
        if (t.is_string()) d.tensors.push_back(t.get_ref<const std::string&>());
    d.from = json_text(json_member(c, "from"));
    d.to = json_text(json_member(c, "to"));
    const Json* activation = json_member(c, "activation");
    const Json* weight = json_member(c, "weight");
    d.activation = activation && activation->is_boolean() && activation->get<bool>();
    d.weight = weight && weight->is_boolean() && weight->get<bool>();
    d.refusal = json_text(json_member(c, "refusal"));
    d.sensitivity = json_number(json_member(c, "sensitivity"));
    d.value_after = json_number(json_member(c, "value_after"));
    precision.decisions.push_back(std::move(d));
  }
  return precision;
}

double histogram_percentile(const std::vector<double>& counts, double range, double percentile) {
  double total = 0.0;
  for (double c : counts) total += c;
  if (counts.empty() || total <= 0.0) return 0.0;
  const double width = range / static_cast<double>(counts.size());
  const double target = total * percentile / 100.0;
  double before = 0.0;
  for (std::size_t k = 0; k < counts.size(); ++k) {
    if (counts[k] > 0.0 && before + counts[k] >= target)
      return static_cast<double>(k) * width + width * (target - before) / counts[k];
    before += counts[k];
  }
  return range;
}

}  // namespace qflow::report
