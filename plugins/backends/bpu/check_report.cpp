// The BPU check report: a table of nodes, the subgraphs with their boundary conversions, and a summary.
#include "check_report.h"

#include "bpu_cost.h"

#include <algorithm>
#include <charconv>
#include <map>
#include <vector>

namespace qflow {

namespace {

struct Summary {
  std::size_t bpu = 0;
  std::size_t cpu = 0;
  std::map<std::string, std::size_t> cpu_op_types;
  int64_t bpu_macs = 0;
  std::size_t unknown_macs = 0;  // BPU nodes whose MACs need shapes that are not known
};

Summary summarize(const PartitionPlan& plan, const std::vector<std::optional<int64_t>>& macs) {
  Summary s;
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    const NodeCapability& n = plan.nodes[i];
    if (n.supported) {
      ++s.bpu;
      const std::optional<int64_t> m = i < macs.size() ? macs[i] : std::optional<int64_t>();
      if (m) s.bpu_macs += *m;
      else ++s.unknown_macs;
    } else {
      ++s.cpu;
      ++s.cpu_op_types[n.op_type];
    }
  }
  return s;
}

// Microseconds with three decimals, fixed notation.
std::string microseconds(double ms) {
  char buf[64];
  const auto result = std::to_chars(buf, buf + sizeof(buf), ms * 1e3, std::chars_format::fixed, 3);
  return std::string(buf, result.ptr);
}

std::string pad(std::string text, std::size_t width) {
  if (text.size() < width) text.resize(width, ' ');
  return text;
}

// "0-8, 10, 12-13": node positions as runs.
std::string ranges(const std::vector<int64_t>& nodes) {
  std::string out;
  for (std::size_t i = 0; i < nodes.size();) {
    std::size_t j = i;
    while (j + 1 < nodes.size() && nodes[j + 1] == nodes[j] + 1) ++j;
    // Appended piece by piece: GCC 12 warns falsely (-Wrestrict) on "-" + std::to_string(...).
    if (!out.empty()) out += ", ";
    out += std::to_string(nodes[i]);
    if (j > i) {
      out += '-';
      out += std::to_string(nodes[j]);
    }
    i = j + 1;
  }
  return out;
}

std::string quant_text(const QuantTable& qparams, const std::string& name) {
  const auto it = qparams.find(name);
  if (it == qparams.end()) return "";
  const QuantParams& q = it->second;
  std::string out = ", " + std::string(dtype_name(q.dtype));
  if (q.scale.size() == 1) {
    out += " scale " + plan_json_float(q.scale[0]) + " zero point " + std::to_string(q.zero_point.empty() ? 0 : q.zero_point[0]);
  } else {
    out += " per-channel axis " + std::to_string(q.axis) + " (" + std::to_string(q.scale.size()) + " scales)";
  }
  return out;
}

std::string boundary_text(const std::vector<BpuBoundary>& boundary, const QuantTable& qparams) {
  std::string out;
  for (const BpuBoundary& b : boundary)
    out += (out.empty() ? "" : "; ") + b.name + " (" + std::string(boundary_conversion_name(b.conversion)) +
           quant_text(qparams, b.name) + ")";
  return out.empty() ? "-" : out;
}

}  // namespace

std::string check_report_text(const PartitionPlan& plan, const BpuPlatform& platform, const std::string& model_name,
                              const QuantTable& qparams, const std::vector<std::optional<int64_t>>& macs) {
  std::string out = "model: " + (model_name.empty() ? std::string("-") : model_name) + "\n";
  out += "platform: " + platform.name + (platform.summary.empty() ? "" : " (" + platform.summary + ")") + "\n\n";

  const std::vector<std::string> header = {"index", "node", "op type", "placement", "subgraph", "reason"};
  std::vector<std::vector<std::string>> rows;
  for (std::size_t i = 0; i < plan.nodes.size(); ++i) {
    const NodeCapability& n = plan.nodes[i];
    rows.push_back({std::to_string(i), n.node.empty() ? "-" : n.node, n.op_type, n.supported ? "BPU" : "CPU",
                    plan.subgraph_of[i] < 0 ? "-" : std::to_string(plan.subgraph_of[i]), n.reason});
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
  if (plan.subgraphs.empty()) out += "  none\n";
  for (const BpuSubgraph& sub : plan.subgraphs) {
    out += "  " + std::to_string(sub.id) + ": " + std::to_string(sub.nodes.size()) + " node" +
           (sub.nodes.size() == 1 ? "" : "s") + " [" + ranges(sub.nodes) + "]\n";
    out += "     in:  " + boundary_text(sub.inputs, qparams) + "\n";
    out += "     out: " + boundary_text(sub.outputs, qparams) + "\n";
  }

  const Summary s = summarize(plan, macs);
  out += "\nsummary:\n";
  out += "  nodes: " + std::to_string(plan.nodes.size()) + " (BPU " + std::to_string(s.bpu) + ", CPU " +
         std::to_string(s.cpu) + ")\n";
  out += "  subgraphs: " + std::to_string(plan.subgraphs.size()) + "\n";
  std::string types;
  for (const auto& [op, count] : s.cpu_op_types) types += (types.empty() ? "" : ", ") + op + " " + std::to_string(count);
  out += "  CPU op types: " + (types.empty() ? std::string("none") : types) + "\n";
  out += "  BPU MACs: " + std::to_string(s.bpu_macs) + " (" + microseconds(compute_milliseconds(platform.cost, s.bpu_macs)) +
         " us at " + std::to_string(platform.cost.macs_per_cycle) + " MACs/cycle and " +
         plan_json_float(static_cast<float>(platform.cost.frequency_mhz)) + " MHz, compute only, symbolic dimensions as 1";
  if (s.unknown_macs) out += "; " + std::to_string(s.unknown_macs) + " BPU nodes of unknown size not counted";
  out += ")\n";
  return out;
}

std::string check_report_json(const PartitionPlan& plan, const BpuPlatform& platform, const std::string& model_name,
                              const QuantTable& qparams, const std::vector<std::optional<int64_t>>& macs) {
  // The plan document with its own format name and a summary appended: one encoder for both.
  std::string out = partition_plan_json(plan, platform.name, model_name, qparams);
  const std::string from = "\"qflow-bpu-partition-plan\"";
  out.replace(out.find(from), from.size(), "\"qflow-bpu-check\",\n  \"target\": \"bpu\",\n  \"accelerator\": \"bpu\",\n  \"fallback\": \"cpu\"");
  out.resize(out.size() - 3);  // "\n}\n"
  const Summary s = summarize(plan, macs);
  out += ",\n  \"summary\": {\"nodes\": " + std::to_string(plan.nodes.size()) + ", \"bpu_nodes\": " +
         std::to_string(s.bpu) + ", \"cpu_nodes\": " + std::to_string(s.cpu) +
         ", \"subgraphs\": " + std::to_string(plan.subgraphs.size()) + ", \"cpu_op_types\": {";
  bool first = true;
  for (const auto& [op, count] : s.cpu_op_types) {
    out += std::string(first ? "" : ", ") + plan_json_string(op) + ": " + std::to_string(count);
    first = false;
  }
  out += "}, \"bpu_macs\": " + std::to_string(s.bpu_macs) + ", \"bpu_macs_unknown_nodes\": " +
         std::to_string(s.unknown_macs) + ", \"bpu_compute_us\": " +
         microseconds(compute_milliseconds(platform.cost, s.bpu_macs)) + "}\n}\n";
  return out;
}

}  // namespace qflow
