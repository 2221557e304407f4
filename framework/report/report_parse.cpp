// Parsers of the artifacts the report reads: the check and perf reports (text or JSON) and
// the verify result.
#include <algorithm>
#include <cstdlib>

#include "framework/report/report.h"
#include "qflow/core/json.h"

namespace qflow::report {

namespace {

std::vector<std::string> split_lines(std::string_view text) {
  std::vector<std::string> lines;
  std::size_t start = 0;
  while (start <= text.size()) {
    std::size_t end = text.find('\n', start);
    if (end == std::string_view::npos) end = text.size();
    std::string line(text.substr(start, end - start));
    if (!line.empty() && line.back() == '\r') line.pop_back();
    lines.push_back(std::move(line));
    if (end == text.size()) break;
    start = end + 1;
  }
  return lines;
}

std::string trim(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(" \t");
  if (begin == std::string_view::npos) return "";
  const std::size_t end = text.find_last_not_of(" \t");
  return std::string(text.substr(begin, end - begin + 1));
}

// "key: value" -> pair; false when the line has no ": ".
bool key_value(const std::string& line, std::pair<std::string, std::string>& out) {
  const std::size_t colon = line.find(": ");
  if (colon == std::string::npos) return false;
  out = {trim(line.substr(0, colon)), trim(line.substr(colon + 2))};
  return true;
}

// A fixed-width table: the column start of each header word.
struct Columns {
  std::vector<std::pair<std::string, std::size_t>> starts;
  std::string cell(const std::string& line, const std::string& name, bool rest = false) const {
    for (std::size_t i = 0; i < starts.size(); ++i) {
      if (starts[i].first != name) continue;
      const std::size_t begin = starts[i].second;
      if (begin >= line.size()) return "";
      if (rest || i + 1 == starts.size()) return trim(line.substr(begin));
      return trim(line.substr(begin, starts[i + 1].second - begin));
    }
    return "";
  }
};

Columns columns_of(const std::string& header, const std::vector<std::string>& names) {
  Columns columns;
  std::size_t from = 0;
  for (const std::string& name : names) {
    const std::size_t at = header.find(name, from);
    if (at == std::string::npos) continue;
    columns.starts.emplace_back(name, at);
    from = at + name.size();
  }
  return columns;
}

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

Expected<Placement> parse_check_json(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "check report"));
  Placement placement;
  placement.header.emplace_back("model", json_text(root.find("model")));
  placement.header.emplace_back("platform", json_text(root.find("platform")));
  // A target names its accelerated placement ("accelerator"); the BPU's reports before that
  // key read as "bpu".
  if (const JsonValue* accelerator = root.find("accelerator"); accelerator && accelerator->is_string())
    placement.accelerator = upper(accelerator->as_string());
  int64_t bpu = 0, cpu = 0;
  bool other_named = false;
  if (const JsonValue* nodes = root.find("nodes"); nodes && nodes->is_array()) {
    for (const JsonValue& node : nodes->items()) {
      PlacementNode row;
      row.index = json_int(node.find("index"));
      row.node = json_text(node.find("name"));
      row.op_type = json_text(node.find("op_type"));
      row.placement = upper(json_text(node.find("placement")));
      row.subgraph = json_text(node.find("subgraph"));
      row.reason = json_text(node.find("reason"));
      (row.placement == placement.accelerator ? bpu : cpu) += 1;
      if (row.placement != placement.accelerator && !other_named && !row.placement.empty()) {
        placement.other = row.placement;
        other_named = true;
      }
      placement.nodes.push_back(std::move(row));
    }
  }
  int64_t subgraphs = 0;
  if (const JsonValue* list = root.find("subgraphs"); list && list->is_array()) {
    for (const JsonValue& subgraph : list->items()) {
      const JsonValue* nodes = subgraph.find("nodes");
      placement.subgraphs.push_back(json_text(subgraph.find("id")) + ": " +
                                    std::to_string(nodes && nodes->is_array() ? nodes->items().size() : 0) + " nodes");
      ++subgraphs;
    }
  }
  placement.summary.emplace_back("nodes", std::to_string(bpu + cpu) + " (" + placement.accelerator + " " +
                                              std::to_string(bpu) + ", " + placement.other + " " + std::to_string(cpu) + ")");
  placement.summary.emplace_back("subgraphs", std::to_string(subgraphs));
  return placement;
}

Expected<Perf> parse_perf_json(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "perf report"));
  Perf perf;
  perf.header.emplace_back("model", json_text(root.find("model")));
  if (const JsonValue* platform = root.find("platform")) perf.header.emplace_back("platform", json_text(platform->find("name")));
  if (const JsonValue* list = root.find("subgraphs"); list && list->is_array())
    for (const JsonValue& s : list->items())
      perf.subgraphs.push_back(json_text(s.find("id")) + ": " + json_text(s.find("nodes")) + " nodes, MACs " +
                               json_text(s.find("macs")) + ", " + json_text(s.find("cycles")) + " cycles = " +
                               json_text(s.find("us")) + " us");
  if (const JsonValue* bpu = root.find("bpu"))
    perf.totals.emplace_back("BPU", "MACs " + json_text(bpu->find("macs")) + ", " + json_text(bpu->find("cycles")) +
                                        " cycles = " + json_text(bpu->find("us")) + " us");
  if (const JsonValue* cpu = root.find("cpu"))
    perf.totals.emplace_back("CPU", json_text(cpu->find("nodes")) + " nodes, MACs " + json_text(cpu->find("macs")) +
                                        " (not timed)");
  if (const JsonValue* layers = root.find("layers"); layers && layers->is_array())
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

Expected<Placement> parse_check(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') return parse_check_json(text);
  Placement placement;
  const std::vector<std::string> lines = split_lines(text);
  enum { Header, Table, Subgraphs, Summary, Other } state = Header;
  Columns columns;
  for (const std::string& line : lines) {
    if (line.rfind("index ", 0) == 0) {
      columns = columns_of(line, {"index", "node", "op type", "placement", "subgraph", "reason"});
      state = Table;
      continue;
    }
    if (line == "subgraphs:") { state = Subgraphs; continue; }
    if (line == "summary:") { state = Summary; continue; }
    if (trim(line).empty()) {
      if (state == Table) state = Other;
      continue;
    }
    std::pair<std::string, std::string> kv;
    switch (state) {
      case Header:
        if (key_value(line, kv)) placement.header.push_back(kv);
        break;
      case Table: {
        PlacementNode node;
        node.index = std::strtoll(columns.cell(line, "index").c_str(), nullptr, 10);
        node.node = columns.cell(line, "node");
        node.op_type = columns.cell(line, "op type");
        node.placement = columns.cell(line, "placement");
        node.subgraph = columns.cell(line, "subgraph");
        node.reason = columns.cell(line, "reason", true);
        placement.nodes.push_back(std::move(node));
        break;
      }
      case Subgraphs: placement.subgraphs.push_back(trim(line)); break;
      case Summary:
        if (key_value(line, kv)) placement.summary.push_back(kv);
        break;
      case Other: break;
    }
  }
  if (placement.nodes.empty()) return invalid_input("check report: no node table (a line starting with 'index')");
  return placement;
}

Expected<Perf> parse_perf(std::string_view text) {
  const std::size_t first = text.find_first_not_of(" \t\r\n");
  if (first != std::string_view::npos && text[first] == '{') {
    QFLOW_ASSIGN_OR_RETURN(Perf perf, parse_perf_json(text));
    keep_slowest(perf.slowest);
    return perf;
  }
  Perf perf;
  const std::vector<std::string> lines = split_lines(text);
  enum { Header, Table, Subgraphs, Totals, Other } state = Header;
  Columns columns;
  bool table = false;
  for (const std::string& line : lines) {
    if (line.rfind("index ", 0) == 0) {
      columns = columns_of(line, {"index", "node", "op type", "placement", "subgraph", "MACs", "weight B", "read B",
                                  "write B", "compute cyc", "memory cyc", "cycles", "bound"});
      state = Table;
      table = true;
      continue;
    }
    if (line == "subgraphs:") { state = Subgraphs; continue; }
    if (line == "totals:") { state = Totals; continue; }
    if (trim(line).empty()) {
      if (state != Header) state = Other;
      continue;
    }
    std::pair<std::string, std::string> kv;
    switch (state) {
      case Header:
        if (key_value(line, kv)) perf.header.push_back(kv);
        break;
      case Table: {
        const std::string cycles = columns.cell(line, "cycles");
        char* end = nullptr;
        const double value = std::strtod(cycles.c_str(), &end);
        if (cycles.empty() || end == cycles.c_str()) break;
        perf.slowest.push_back(
            {columns.cell(line, "node"), columns.cell(line, "op type"), columns.cell(line, "subgraph"), value,
             columns.cell(line, "bound")});
        break;
      }
      case Subgraphs: perf.subgraphs.push_back(trim(line)); break;
      case Totals:
        if (key_value(line, kv)) perf.totals.push_back(kv);
        break;
      case Other: break;
    }
  }
  if (!table) return invalid_input("perf report: no node table (a line starting with 'index')");
  keep_slowest(perf.slowest);
  return perf;
}

Expected<Verify> parse_verify(std::string_view text) {
  QFLOW_ASSIGN_OR_RETURN(JsonValue root, parse_json(text, "verify result"));
  Verify verify;
  verify.samples = json_int(root.find("samples"));
  const JsonValue* identical = root.find("bit_identical");
  verify.bit_identical = identical && identical->is_bool() && identical->as_bool();
  if (const JsonValue* outputs = root.find("outputs"); outputs && outputs->is_array())
    for (const JsonValue& o : outputs->items()) {
      VerifyOutput out;
      out.name = json_text(o.find("name"));
      out.elements = json_int(o.find("elements"));
      out.bc_cosine_mean = json_number(o.find("bc_cosine_mean"));
      out.bc_cosine_min = json_number(o.find("bc_cosine_min"));
      out.bc_max_abs_error = json_number(o.find("bc_max_abs_error"));
      out.hbm_cosine_mean = json_number(o.find("hbm_cosine_mean"));
      out.hbm_cosine_min = json_number(o.find("hbm_cosine_min"));
      out.hbm_max_abs_error = json_number(o.find("hbm_max_abs_error"));
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
