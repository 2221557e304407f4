// The BPU performance estimate: per-layer MACs and bytes from shapes and dtypes, roofline cycles from the platform's cost figures.
#include "perf_report.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <set>

#include "bpu_cost.h"

namespace qflow {

namespace {

// Three decimals, fixed notation: cycles, microseconds and the platform's figures.
std::string fixed3(double value) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), value, std::chars_format::fixed, 3);
  return std::string(buf, result.ptr);
}

// Bytes per element of `value` as node traffic: the table's dtype when the node is on the
// BPU and the table lists the tensor, else the tensor's own dtype (float32 when unknown).
int64_t element_bytes(const Graph& graph, const Value* value, bool bpu, const QuantTable& qparams) {
  if (bpu) {
    const auto it = qparams.find(value->name());
    if (it != qparams.end()) return static_cast<int64_t>(dtype_size(it->second.dtype));
  }
  DType dtype = DType::Float32;
  if (const Tensor* t = graph.initializer(value)) dtype = t->dtype();
  else if (value->type && value->type->dtype != DType::Undefined) dtype = value->type->dtype;
  const std::size_t size = dtype_size(dtype);
  return size > 0 ? static_cast<int64_t>(size) : 4;
}

void add(PerfTotals& totals, const LayerPerf& layer) {
  if (!layer.macs || !layer.weight_bytes || !layer.activation_read_bytes || !layer.activation_write_bytes ||
      (layer.bpu && !layer.cycles)) {
    ++totals.unknown_nodes;
    return;
  }
  totals.macs += *layer.macs;
  totals.weight_bytes += *layer.weight_bytes;
  totals.activation_read_bytes += *layer.activation_read_bytes;
  totals.activation_write_bytes += *layer.activation_write_bytes;
  if (layer.cycles) totals.cycles += *layer.cycles;
}

Json optional_integer(const std::optional<int64_t>& value) { return value ? Json(*value) : Json(nullptr); }
Json optional_real(const std::optional<double>& value) { return value ? Json(*value) : Json(nullptr); }

const char* bound_of(const LayerPerf& layer) {
  return *layer.compute_cycles >= *layer.memory_cycles ? "compute" : "memory";
}

// Counts are JSON integers, cycles and times JSON floats (written with three decimals).
Json totals_value(const PerfTotals& totals, std::size_t nodes, const BpuCost* cost) {
  Json m = Json::object();
  m["activation_read_bytes"] = totals.activation_read_bytes;
  m["activation_write_bytes"] = totals.activation_write_bytes;
  m["macs"] = totals.macs;
  m["nodes"] = static_cast<int64_t>(nodes);
  m["unknown_nodes"] = totals.unknown_nodes;
  m["weight_bytes"] = totals.weight_bytes;
  if (cost) {
    m["cycles"] = totals.cycles;
    m["us"] = cost->frequency_mhz > 0.0 ? totals.cycles / cost->frequency_mhz : 0.0;
  }
  return m;
}

bool scalar(const Json& v) { return !v.is_array() && !v.is_object(); }

void dump(const Json& v, int indent, std::string& out) {
  switch (v.type()) {
    case Json::value_t::null: out += "null"; return;
    case Json::value_t::boolean: out += v.get<bool>() ? "true" : "false"; return;
    case Json::value_t::number_integer:
    case Json::value_t::number_unsigned: out += v.dump(); return;
    case Json::value_t::number_float: out += fixed3(v.get<double>()); return;
    case Json::value_t::string: out += plan_json_string(v.get_ref<const std::string&>()); return;
    case Json::value_t::array:
    case Json::value_t::object: break;
    case Json::value_t::binary:
    case Json::value_t::discarded: out += "null"; return;  // never in a parsed or built report
  }
  const bool object = v.is_object();
  std::vector<std::pair<const std::string*, const Json*>> items;
  if (object)
    for (const auto& [key, member] : v.get_ref<const Json::object_t&>()) items.emplace_back(&key, &member);
  else
    for (const Json& item : v) items.emplace_back(nullptr, &item);
  const bool flat = std::all_of(items.begin(), items.end(), [](const auto& item) { return scalar(*item.second); });
  out += object ? '{' : '[';
  const std::string inner(static_cast<std::size_t>(indent + 2), ' ');
  for (std::size_t i = 0; i < items.size(); ++i) {
    out += flat ? (i ? ", " : "") : (i ? ",\n" + inner : "\n" + inner);
    if (items[i].first) out += plan_json_string(*items[i].first) + ": ";
    dump(*items[i].second, indent + 2, out);
  }
  if (!flat && !items.empty()) out += "\n" + std::string(static_cast<std::size_t>(indent), ' ');
  out += object ? '}' : ']';
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

std::string count_text(const std::optional<int64_t>& value) { return value ? std::to_string(*value) : "?"; }

std::string totals_text(const PerfTotals& t, const BpuCost* cost) {
  std::string out = "MACs " + std::to_string(t.macs) + ", weights " + std::to_string(t.weight_bytes) + " B, read " +
                    std::to_string(t.activation_read_bytes) + " B, written " + std::to_string(t.activation_write_bytes) +
                    " B";
  if (cost)
    out += ", " + fixed3(t.cycles) + " cycles = " +
           fixed3(cost->frequency_mhz > 0.0 ? t.cycles / cost->frequency_mhz : 0.0) + " us";
  if (t.unknown_nodes) out += "; " + std::to_string(t.unknown_nodes) + " nodes of unknown size not counted";
  return out;
}

}  // namespace

Expected<PerfEstimate> estimate_perf(const Graph& graph, const PartitionPlan& plan, const BpuPlatform& platform,
                                     const QuantTable& qparams) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  if (order.size() != plan.nodes.size() || plan.subgraph_of.size() != plan.nodes.size())
    return internal_error("performance estimate: the partition plan has " + std::to_string(plan.nodes.size()) +
                          " nodes, the graph " + std::to_string(order.size()));
  PerfEstimate e;
  e.model = graph.name;
  e.platform = platform;
  e.quantized = !qparams.empty();
  std::vector<std::string> symbolic;
  for (std::size_t i = 0; i < order.size(); ++i) {
    const Node& node = *order[i];
    LayerPerf layer;
    layer.index = static_cast<int64_t>(i);
    layer.name = plan.nodes[i].node;
    layer.op_type = plan.nodes[i].op_type;
    layer.bpu = plan.nodes[i].supported;
    layer.subgraph = plan.subgraph_of[i];
    layer.macs = node_macs(graph, node);
    int64_t weights = 0, reads = 0, writes = 0;
    bool known = true;
    std::set<const Value*> seen;  // a value read twice is fetched once
    for (const Value* v : node.inputs()) {
      if (!v || v->name().empty() || !seen.insert(v).second) continue;
      const std::optional<int64_t> n = value_elements(graph, v, &symbolic);
      if (!n) {
        known = false;
        continue;
      }
      (graph.initializer(v) ? weights : reads) += *n * element_bytes(graph, v, layer.bpu, qparams);
    }
    for (const Value* v : node.outputs()) {
      if (!v || v->name().empty()) continue;
      const std::optional<int64_t> n = value_elements(graph, v, &symbolic);
      if (!n) {
        known = false;
        continue;
      }
      writes += *n * element_bytes(graph, v, layer.bpu, qparams);
    }
    if (known) {
      layer.weight_bytes = weights;
      layer.activation_read_bytes = reads;
      layer.activation_write_bytes = writes;
    }
    if (layer.bpu && known && layer.macs) {
      const LayerCycles c = layer_cycles(platform.cost, *layer.macs, weights + reads + writes);
      layer.compute_cycles = c.compute;
      layer.memory_cycles = c.memory;
      layer.cycles = c.total();
    }
    add(layer.bpu ? e.bpu : e.cpu, layer);
    e.layers.push_back(std::move(layer));
  }
  for (const BpuSubgraph& sub : plan.subgraphs) {
    SubgraphPerf s;
    s.id = sub.id;
    s.nodes = sub.nodes;
    for (int64_t n : sub.nodes) add(s.totals, e.layers.at(static_cast<std::size_t>(n)));
    e.subgraphs.push_back(std::move(s));
  }
  std::sort(symbolic.begin(), symbolic.end());
  symbolic.erase(std::unique(symbolic.begin(), symbolic.end()), symbolic.end());
  e.symbolic_dimensions = std::move(symbolic);
  return e;
}

Json perf_report_value(const PerfEstimate& e) {
  Json doc = Json::object();
  doc["format"] = "qflow-bpu-perf";
  doc["version"] = 1;
  doc["model"] = e.model;
  // The keys every target's sections carry (docs/targets.md); the totals of each path sit
  // under its placement name ("bpu", "cpu").
  doc["target"] = "bpu";
  doc["accelerator"] = "bpu";
  doc["fallback"] = "cpu";
  doc["quantized"] = e.quantized;
  doc["symbolic_dimensions"] = e.symbolic_dimensions;
  const BpuCost& cost = e.platform.cost;
  doc["platform"] = {{"name", e.platform.name},
                     {"summary", e.platform.summary},
                     {"macs_per_cycle", static_cast<int64_t>(cost.macs_per_cycle)},
                     {"frequency_mhz", static_cast<double>(cost.frequency_mhz)},
                     {"bandwidth_gbps", static_cast<double>(cost.bandwidth_gbps)},
                     {"bytes_per_cycle", static_cast<double>(bytes_per_cycle(cost))}};
  Json layers = Json::array();
  for (const LayerPerf& l : e.layers) {
    Json m = Json::object();
    m["index"] = l.index;
    m["name"] = l.name;
    m["op_type"] = l.op_type;
    m["placement"] = l.bpu ? "bpu" : "cpu";
    m["subgraph"] = l.subgraph < 0 ? Json(nullptr) : Json(l.subgraph);
    m["macs"] = optional_integer(l.macs);
    m["weight_bytes"] = optional_integer(l.weight_bytes);
    m["activation_read_bytes"] = optional_integer(l.activation_read_bytes);
    m["activation_write_bytes"] = optional_integer(l.activation_write_bytes);
    m["compute_cycles"] = optional_real(l.compute_cycles);
    m["memory_cycles"] = optional_real(l.memory_cycles);
    m["cycles"] = optional_real(l.cycles);
    m["bound"] = l.cycles ? Json(bound_of(l)) : Json(nullptr);
    layers.push_back(std::move(m));
  }
  doc["layers"] = std::move(layers);
  Json subgraphs = Json::array();
  for (const SubgraphPerf& s : e.subgraphs) {
    Json m = totals_value(s.totals, s.nodes.size(), &cost);
    m["id"] = s.id;
    m["node_indices"] = s.nodes;
    subgraphs.push_back(std::move(m));
  }
  doc["subgraphs"] = std::move(subgraphs);
  const auto bpu_nodes = static_cast<std::size_t>(std::count_if(e.layers.begin(), e.layers.end(), [](const LayerPerf& l) { return l.bpu; }));
  doc["bpu"] = totals_value(e.bpu, bpu_nodes, &cost);
  doc["cpu"] = totals_value(e.cpu, e.layers.size() - bpu_nodes, nullptr);
  return doc;
}

std::string perf_json_dump(const Json& value) {
  std::string out;
  dump(value, 0, out);
  return out + "\n";
}

std::string perf_report_json(const PerfEstimate& estimate) { return perf_json_dump(perf_report_value(estimate)); }

std::string perf_report_text(const PerfEstimate& e) {
  const BpuCost& cost = e.platform.cost;
  std::string out = "model: " + (e.model.empty() ? std::string("-") : e.model) + "\n";
  out += "platform: " + e.platform.name + (e.platform.summary.empty() ? "" : " (" + e.platform.summary + ")") + "\n";
  out += "cost: " + std::to_string(cost.macs_per_cycle) + " MACs/cycle, " + fixed3(cost.frequency_mhz) + " MHz, " +
         fixed3(cost.bandwidth_gbps) + " GB/s = " + fixed3(bytes_per_cycle(cost)) + " bytes/cycle\n";
  out += std::string("bytes: ") +
         (e.quantized ? "BPU tensors in the quantization table at their quantized size (int8 1, int16 2), others at their own type (float32 4)"
                      : "no quantization table: every tensor at its own type (float32 4)") +
         "\n";
  std::string symbolic;
  for (const std::string& s : e.symbolic_dimensions) symbolic += (symbolic.empty() ? "" : ", ") + s;
  out += "symbolic dimensions counted as 1: " + (symbolic.empty() ? std::string("none") : symbolic) + "\n\n";

  const std::vector<std::string> header = {"index", "node", "op type", "placement", "subgraph", "MACs", "weight B",
                                           "read B", "write B", "compute cyc", "memory cyc", "cycles", "bound"};
  std::vector<std::vector<std::string>> rows;
  for (const LayerPerf& l : e.layers) {
    const bool timed = l.cycles.has_value();
    const std::string none = l.bpu ? "?" : "-";
    rows.push_back({std::to_string(l.index), l.name.empty() ? "-" : l.name, l.op_type, l.bpu ? "BPU" : "CPU",
                    l.subgraph < 0 ? "-" : std::to_string(l.subgraph), count_text(l.macs), count_text(l.weight_bytes),
                    count_text(l.activation_read_bytes), count_text(l.activation_write_bytes),
                    timed ? fixed3(*l.compute_cycles) : none, timed ? fixed3(*l.memory_cycles) : none,
                    timed ? fixed3(*l.cycles) : none, timed ? bound_of(l) : none});
  }
  std::vector<std::size_t> width(header.size());
  for (std::size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& row : rows) width[c] = std::max(width[c], row[c].size());
  }
  auto line = [&](const std::vector<std::string>& cells) {
    std::string text;
    for (std::size_t c = 0; c < cells.size(); ++c) text += c + 1 < cells.size() ? pad(cells[c], width[c] + 2) : cells[c];
    while (!text.empty() && text.back() == ' ') text.pop_back();
    return text + "\n";
  };
  out += line(header);
  for (const auto& row : rows) out += line(row);

  out += "\nsubgraphs:\n";
  if (e.subgraphs.empty()) out += "  none\n";
  for (const SubgraphPerf& s : e.subgraphs)
    out += "  " + std::to_string(s.id) + ": " + std::to_string(s.nodes.size()) + " node" + (s.nodes.size() == 1 ? "" : "s") +
           ", " + totals_text(s.totals, &cost) + "\n";
  out += "\ntotals:\n";
  out += "  BPU: " + totals_text(e.bpu, &cost) + "\n";
  out += "  CPU: " + totals_text(e.cpu, nullptr) + " (not timed: the cost figures describe the BPU only)\n";
  out += "\nA BPU layer takes max(MACs / macs-per-cycle, bytes / bytes-per-cycle) cycles (a roofline);\n"
         "layers run one after another; boundary conversions and the CPU nodes are not included.\n";
  return out;
}

}  // namespace qflow
