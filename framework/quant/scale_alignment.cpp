// Scale alignment rules (Concat groups, pass-through ops) applied to a calibration table.
#include "framework/quant/scale_alignment.h"

#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <set>

#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

// Union-find over value names.
class Groups {
 public:
  std::string find(const std::string& name) {
    auto it = parent_.find(name);
    if (it == parent_.end()) {
      parent_.emplace(name, name);
      return name;
    }
    if (it->second == name) return name;
    std::string root = find(it->second);
    parent_[name] = root;
    return root;
  }
  void unite(const std::string& a, const std::string& b) {
    std::string ra = find(a), rb = find(b);
    if (ra == rb) return;
    // The smaller name becomes the root so the grouping does not depend on visit order.
    if (rb < ra) std::swap(ra, rb);
    parent_[rb] = ra;
  }
  const std::map<std::string, std::string>& members() const { return parent_; }

 private:
  std::map<std::string, std::string> parent_;
};

// The float range [lo, hi] a per-tensor parameter set represents.
std::pair<double, double> represented_range(const QuantParams& q) {
  const QuantRange range = grid_range(q);
  const double s = q.scale.front();
  const double zp = static_cast<double>(q.zero_point.front());
  return {(static_cast<double>(range.min) - zp) * s, (static_cast<double>(range.max) - zp) * s};
}

Expected<QuantParams> shared_params(const std::vector<std::string>& names, const QuantTable& table, bool power_of_two,
                                    const std::string& where) {
  const QuantParams* widest = nullptr;
  bool symmetric = true;
  for (const std::string& name : names) {
    const QuantParams& q = table.at(name);
    if (q.scale.size() != 1 || q.zero_point.size() != 1)
      return unsupported(where + ": tensor '" + name + "' has per-axis parameters; Concat alignment needs per-tensor ones");
    if (widest && q.dtype != widest->dtype)
      return invalid_input(where + ": tensors '" + names.front() + "' (" + std::string(dtype_name(table.at(names.front()).dtype)) +
                           ") and '" + name + "' (" + std::string(dtype_name(q.dtype)) +
                           ") must share one quantized type to share a scale");
    // One scale and zero point mean one set of values: members on grids of other widths
    // would clip differently.
    if (widest && q.bits != widest->bits) {
      const auto grid = [](const QuantParams& p) { return p.bits ? std::to_string(p.bits) + "-bit" : "full-range"; };
      return invalid_input(where + ": tensors '" + names.front() + "' (" + grid(table.at(names.front())) + ") and '" + name +
                           "' (" + grid(q) + ") must share one grid (activation-bits) to share a scale");
    }
    if (q.zero_point.front() != 0) symmetric = false;
    if (!widest || q.threshold > widest->threshold ||
        (q.threshold == widest->threshold && q.scale.front() > widest->scale.front()))
      widest = &q;
  }
  QuantParams shared = *widest;
  if (symmetric) {
    // All zero points are 0: the largest threshold (then scale) covers every member.
    for (const std::string& name : names) shared.scale[0] = std::max(shared.scale[0], table.at(name).scale.front());
    return shared;
  }
  double lo = 0.0, hi = 0.0;
  for (const std::string& name : names) {
    const auto [l, h] = represented_range(table.at(name));
    lo = std::min(lo, l);
    hi = std::max(hi, h);
  }
  const QuantRange range = grid_range(shared);
  double scale = (hi - lo) / static_cast<double>(range.max - range.min);
  if (power_of_two) scale = next_power_of_two(scale);
  const double zp = std::clamp(round_half_even(static_cast<double>(range.min) - lo / scale),
                               static_cast<double>(range.min), static_cast<double>(range.max));
  shared.scale = {static_cast<float>(scale)};
  shared.zero_point = {static_cast<int64_t>(zp)};
  shared.threshold = std::max(std::fabs(lo), std::fabs(hi));
  if (!(shared.scale[0] >= std::numeric_limits<float>::min()) || !std::isfinite(shared.scale[0]))
    return invalid_input(where + ": the shared range [" + std::to_string(lo) + ", " + std::to_string(hi) +
                         "] gives a scale float32 cannot hold");
  return shared;
}

// Rule 1's groups: every Concat's output united with its inputs, for tensors in `table`.
Groups concat_groups(const std::vector<Node*>& order, const QuantTable& table) {
  Groups groups;
  for (const Node* node : order) {
    if (node->domain() != "" || node->op_type() != "Concat" || !node->output(0)) continue;
    const std::string out = node->output(0)->name();
    if (!table.count(out)) continue;
    for (const Value* input : node->inputs())
      if (input && table.count(input->name())) groups.unite(out, input->name());
  }
  return groups;
}

}  // namespace

Expected<std::vector<std::string>> concat_group(const Graph& graph, const QuantTable& table, const std::string& tensor) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  Groups groups = concat_groups(order, table);
  const std::string root = groups.find(tensor);
  std::vector<std::string> members;
  for (const auto& [name, parent] : groups.members()) {
    (void)parent;
    if (groups.find(name) == root) members.push_back(name);
  }
  if (members.empty()) members.push_back(tensor);
  return members;
}

bool is_pass_through_op(const std::string& op_type) {
  static const std::set<std::string> kOps = {"Relu",    "MaxPool",   "Reshape",  "Transpose",
                                             "Flatten", "Squeeze",   "Unsqueeze", "Identity"};
  return kOps.count(op_type) > 0;
}

Expected<QuantTable> align_scales(const Graph& graph, const QuantTable& table, const QuantConfig* config) {
  QuantTable aligned = table;
  QFLOW_ASSIGN_OR_RETURN(std::vector<Node*> order, graph.topological_order());
  const QuantConfig defaults;
  const QuantConfig& cfg = config ? *config : defaults;

  // 1. Concat groups, from the calibrated entries.
  Groups groups = concat_groups(order, table);
  std::map<std::string, std::vector<std::string>> members;
  for (const auto& [name, parent] : groups.members()) {
    (void)parent;
    members[groups.find(name)].push_back(name);
  }
  std::set<std::string> in_group;
  for (const auto& [root, names] : members) {
    if (names.size() < 2) continue;
    // The settings of the first Concat (in execution order) whose output is in the group.
    const Node* concat = nullptr;
    for (const Node* node : order)
      if (node->op_type() == "Concat" && node->output(0) && groups.find(node->output(0)->name()) == root) {
        concat = node;
        break;
      }
    const std::string where = "Concat '" + (concat ? concat->name() : root) + "'";
    const QuantSpec spec = concat ? cfg.resolve(concat->name(), concat->op_type()) : cfg.resolve("", "");
    QFLOW_ASSIGN_OR_RETURN(QuantParams shared, shared_params(names, table, spec.power_of_two, where));
    for (const std::string& name : names) {
      QuantParams entry = shared;
      entry.method = table.at(name).method;
      aligned[name] = entry;
      in_group.insert(name);
    }
  }

  // 2. Pass-through ops, in execution order so chains propagate.
  for (const Node* node : order) {
    if (node->domain() != "" || !is_pass_through_op(node->op_type())) continue;
    const Value* in = node->input(0);
    const Value* out = node->output(0);
    if (!in || !out || !aligned.count(in->name()) || !aligned.count(out->name()) || in_group.count(out->name())) continue;
    QuantParams entry = aligned.at(in->name());
    entry.method = table.at(out->name()).method;
    aligned[out->name()] = entry;
  }
  return aligned;
}

}  // namespace qflow
