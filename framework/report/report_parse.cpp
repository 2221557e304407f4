// Parsers of the artifacts the report reads: the target's check and estimate sections, the
// verify, sensitivity and precision results (all JSON).
#include <algorithm>
#include <cctype>
#include <cstdio>

#include "framework/report/report.h"
#include "qflow/core/json.h"

namespace qflow::report {

namespace {

std::string json_text(const JsonValue* value) {
  if (!value || value->is_null()) return "";
  if (value->is_string()) return value->as_string();
  if (value->is_number()) {
    if (value->is_integer()) return std::to_string(value->as_int());
    char buffer[64];
    std::snprintf(buffer, sizeof buffer, "%.3f", value->as_number());
    return buffer;
  }
  if (value->is_bool()) return value->as_bool() ? "true" : "false";
  return "";
}

double json_number(const JsonValue* value) { return value && value->is_number() ? value->as_number() : 0.0; }
int64_t json_int(const JsonValue* value) {
  return value && value->is_number() ? (value->is_integer() ? value->as_int() : static_cast<int64_t>(value->as_number())) : 0;
}

std::string upper(std::string text) {
  for (char& c : text) c = static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  return text;
}

// The placement names of the accelerated path ("accelerator", required) and of the other
// nodes ("fallback", "cpu" unless the section says otherwise).
Expected<std::pair<std::string, std::string>> placement_names(const JsonValue& root, const char* section) {
  const std::string accelerator = json_text(root.find("accelerator")), fallback = json_text(root.find("fallback"));
  if (accelerator.empty()) return invalid_input(std::string(section) + ": no \"accelerator\" (docs/targets.md)");
  return std::pair<std::string, std::string>{accelerator, fallback.empty() ? "cpu" : fallback};
}

Expected<Placement> parse_check_json(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "check section"));
  const JsonValue* nodes = root.find("nodes");
  if (!nodes || !nodes->is_array()) return invalid_input("check section: no \"nodes\" array");
  QFLOW_ASSIGN_OR_RETURN(const auto names, placement_names(root, "check section"));
  const auto& [accelerator, fallback] = names;
  Placement placement;
  placement.accelerator = upper(accelerator);
  placement.fallback = upper(fallback);
  placement.header.emplace_back("model", json_text(root.find("model")));
  placement.header.emplace_back("platform", json_text(root.find("platform")));
  int64_t accelerated = 0;
  for (const JsonValue& node : nodes->items()) {
    PlacementNode row;
    row.index = json_int(node.find("index"));
    row.node = json_text(node.find("name"));
    row.op_type = json_text(node.find("op_type"));
    row.placement = upper(json_text(node.find("placement")));
    row.subgraph = json_text(node.find("subgraph"));
    row.reason = json_text(node.find("reason"));
    if (row.placement == placement.accelerator) ++accelerated;
    placement.nodes.push_back(std::move(row));
  }
  int64_t subgraphs = 0;
  if (const JsonValue* list = root.find("subgraphs"); list && list->is_array()) {
    for (const JsonValue& subgraph : list->items()) {
      const JsonValue* members = subgraph.find("nodes");
      placement.subgraphs.push_back(json_text(subgraph.find("id")) + ": " +
                                    std::to_string(members && members->is_array() ? members->items().size() : 0) +
                                    " nodes");
      ++subgraphs;
    }
  }
  const auto others = static_cast<int64_t>(placement.nodes.size()) - accelerated;
  placement.summary.emplace_back("nodes", std::to_string(placement.nodes.size()) + " (" + placement.accelerator + " " +
                                              std::to_string(accelerated) + ", " + placement.fallback + " " +
                                              std::to_string(others) + ")");
  placement.summary.emplace_back("subgraphs", std::to_string(subgraphs));
  return placement;
}

Expected<Perf> parse_perf_json(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "estimate section"));
  const JsonValue* layers = root.find("layers");
  if (!layers || !layers->is_array()) return invalid_input("estimate section: no \"layers\" array");
  QFLOW_ASSIGN_OR_RETURN(const auto names, placement_names(root, "estimate section"));
  const auto& [accelerator, fallback] = names;
  Perf perf;
  perf.accelerator = upper(accelerator);
  perf.header.emplace_back("model", json_text(root.find("model")));
  if (const JsonValue* platform = root.find("platform")) perf.header.emplace_back("platform", json_text(platform->find("name")));
  if (const JsonValue* list = root.find("subgraphs"); list && list->is_array())
    for (const JsonValue& s : list->items())
      perf.subgraphs.push_back(json_text(s.find("id")) + ": " + json_text(s.find("nodes")) + " nodes, MACs " +
                               json_text(s.find("macs")) + ", " + json_text(s.find("cycles")) + " cycles = " +
                               json_text(s.find("us")) + " us");
  // The totals of each path sit under its placement name.
  if (const JsonValue* totals = root.find(accelerator))
    perf.totals.emplace_back(perf.accelerator, "MACs " + json_text(totals->find("macs")) + ", " +
                                                   json_text(totals->find("cycles")) + " cycles = " +
                                                   json_text(totals->find("us")) + " us");
  if (const JsonValue* totals = root.find(fallback))
    perf.totals.emplace_back(upper(fallback), json_text(totals->find("nodes")) + " nodes, MACs " +
                                                  json_text(totals->find("macs")) + " (not timed)");
  for (const JsonValue& layer : layers->items()) {
    const JsonValue* cycles = layer.find("cycles");
    if (!cycles || !cycles->is_number()) continue;
    perf.slowest.push_back({json_text(layer.find("name")), json_text(layer.find("op_type")),
                            json_text(layer.find("subgraph")), cycles->as_number(), json_text(layer.find("bound"))});
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
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "verify result"));
  const JsonValue* roles = root.find("roles");
  if (!roles || !roles->is_array()) return invalid_input("verify result: no \"roles\" array");
  Verify verify;
  for (const JsonValue& role : roles->items())
    if (role.is_string()) verify.roles.push_back(role.as_string());
  verify.samples = json_int(root.find("samples"));
  const JsonValue* identical = root.find("bit_identical");
  verify.bit_identical = identical && identical->is_bool() && identical->as_bool();
  if (const JsonValue* outputs = root.find("outputs"); outputs && outputs->is_array())
    for (const JsonValue& o : outputs->items()) {
      VerifyOutput out;
      out.name = json_text(o.find("name"));
      out.elements = json_int(o.find("elements"));
      for (const std::string& role : verify.roles)
        out.files.push_back({json_number(o.find(role + "_cosine_mean")), json_number(o.find(role + "_cosine_min")),
                             json_number(o.find(role + "_max_abs_error"))});
      out.exact_matches = json_int(o.find("exact_matches"));
      out.compared = json_int(o.find("compared"));
      verify.outputs.push_back(std::move(out));
    }
  return verify;
}

Expected<Sensitivity> parse_sensitivity(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "sensitivity result"));
  Sensitivity sensitivity;
  sensitivity.samples = json_int(root.find("samples"));
  auto cosine = [](const JsonValue* v) -> std::optional<double> {
    if (!v || !v->is_number()) return std::nullopt;
    return json_number(v);
  };
  if (const JsonValue* measured = root.find("measured"); measured && measured->is_bool())
    sensitivity.measured = measured->as_bool();
  sensitivity.ptq_cosine = cosine(root.find("ptq_cosine"));
  if (const JsonValue* bound = root.find("when_below"); bound && bound->is_number()) sensitivity.when_below = json_number(bound);
  if (const JsonValue* ranking = root.find("ranking"); ranking && ranking->is_array())
    for (const JsonValue& r : ranking->items())
      sensitivity.ranking.push_back({json_text(r.find("node")), json_text(r.find("op_type")),
                                     cosine(r.find("weight_cosine")), cosine(r.find("activation_cosine"))});
  return sensitivity;
}

Expected<Precision> parse_precision(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "precision search result"));
  const JsonValue* changes = root.find("changes");
  if (!changes || !changes->is_array()) return invalid_input("precision search result: no \"changes\" array");
  Precision precision;
  if (const JsonValue* target = root.find("target")) {
    precision.target_kind = json_text(target->find("kind"));
    precision.threshold = json_number(target->find("threshold"));
  }
  precision.before = json_number(root.find("before"));
  precision.after = json_number(root.find("after"));
  precision.samples = json_int(root.find("samples"));
  precision.quantized_tensors = json_int(root.find("quantized_tensors"));
  precision.raised_tensors = json_int(root.find("raised_tensors"));
  precision.overrides_toml = json_text(root.find("overrides_toml"));
  for (const JsonValue& c : changes->items()) {
    PrecisionDecision d;
    d.node = json_text(c.find("node"));
    d.op_type = json_text(c.find("op_type"));
    if (const JsonValue* tensors = c.find("tensors"); tensors && tensors->is_array())
      for (const JsonValue& t : tensors->items())
        if (t.is_string()) d.tensors.push_back(t.as_string());
    d.from = json_text(c.find("from"));
    d.to = json_text(c.find("to"));
    const JsonValue* activation = c.find("activation");
    const JsonValue* weight = c.find("weight");
    d.activation = activation && activation->is_bool() && activation->as_bool();
    d.weight = weight && weight->is_bool() && weight->as_bool();
    d.refusal = json_text(c.find("refusal"));
    d.sensitivity = json_number(c.find("sensitivity"));
    d.value_after = json_number(c.find("value_after"));
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
