// Elementwise chains as tables: see table_fusion.h. A PP-OCR activation block (a scale and a
// shift, hardswish as x * lut(x), another scale and shift) is six passes over an activation;
// as a function of the conv output before it, it is one lookup.
#include "lowered/table_fusion.h"

#include <string>

#include "lowered/op_common.h"

namespace qflow::lowered::detail {
namespace {

// 8- and 16-bit tensors: a table has one entry per value of the root's type (256 or 65536,
// 1 KiB or 256 KiB), which stays cheaper than the passes it replaces.
bool quantized(const Tensor& t) {
  fx::QType q;
  return to_qtype(t.type, q);
}

bool fusable_type(const std::string& type) {
  return type == "add" || type == "sub" || type == "mul" || type == "lut" || type == "requantize";
}

// A tensor as a function of a root: its values for each of the root type's values.
struct Derived {
  int32_t root = -1;
  std::vector<int32_t> table;
};

// The op's result as a function of one root, or false.
bool derive(const Model& m, const Op& op, const std::vector<Value>& constants, const std::vector<Derived>& derived,
            Derived& out) {
  if (!fusable_type(op.type) || op.outputs.size() != 1 || op.outputs[0] < 0) return false;
  const Tensor& y = m.tensors[static_cast<size_t>(op.outputs[0])];
  if (!quantized(y)) return false;
  int32_t root = -1;
  for (const int32_t t : op.inputs) {
    if (t < 0 || m.tensors[static_cast<size_t>(t)].constant) continue;
    const Tensor& x = m.tensors[static_cast<size_t>(t)];
    if (!quantized(x) || x.shape != y.shape) return false;
    const int32_t r = derived[static_cast<size_t>(t)].root >= 0 ? derived[static_cast<size_t>(t)].root : t;
    if (root >= 0 && r != root) return false;
    root = r;
  }
  if (root < 0) return false;
  fx::QType rq;
  to_qtype(m.tensors[static_cast<size_t>(root)].type, rq);
  const fx::Range range = fx::range_of(rq);
  const auto n = static_cast<size_t>(range.max - range.min + 1);
  std::vector<Value> values(op.inputs.size());
  std::vector<const Value*> ins(op.inputs.size(), nullptr);
  for (size_t i = 0; i < op.inputs.size(); ++i) {
    const int32_t t = op.inputs[i];
    if (t < 0) continue;
    const Tensor& x = m.tensors[static_cast<size_t>(t)];
    Value& v = values[i];
    v.type = x.type;
    if (x.constant) {
      const Value& c = constants[static_cast<size_t>(t)];
      if (op.type == "lut" && i == 1) {  // the lookup table itself
        ins[i] = &c;
        continue;
      }
      if (element_count(x.shape) != 1 || c.ints.size() != 1) return false;
      v.ints.assign(n, c.ints[0]);
    } else if (derived[static_cast<size_t>(t)].root >= 0) {
      const std::vector<int32_t>& table = derived[static_cast<size_t>(t)].table;
      v.ints.assign(table.begin(), table.end());
    } else {  // the root itself
      v.ints.resize(n);
      for (size_t k = 0; k < n; ++k) v.ints[k] = range.min + static_cast<int32_t>(k);
    }
    v.shape = {static_cast<int64_t>(n)};
    ins[i] = &v;
  }
  Value result;
  result.type = y.type;
  result.shape = {static_cast<int64_t>(n)};
  result.ints.resize(n);
  if (!run_reference_on(m, op, ins, result)) return false;
  out.root = root;
  out.table.assign(result.ints.begin(), result.ints.end());
  return true;
}

}  // namespace

std::vector<FusedOp> fuse_elementwise_tables(const Model& m, const std::vector<Value>& constants, fx::fast::Isa isa) {
  std::vector<const Op*> ops;
  for (const Segment& seg : m.segments)
    for (const Op& op : seg.ops) ops.push_back(&op);
  std::vector<Derived> derived(m.tensors.size());
  std::vector<char> is_derived(ops.size(), 0);
  for (size_t k = 0; k < ops.size(); ++k) {
    Derived d;
    if (!derive(m, *ops[k], constants, derived, d)) continue;
    derived[static_cast<size_t>(ops[k]->outputs[0])] = std::move(d);
    is_derived[k] = 1;
  }
  // A derived value is computed only where something reads its values rather than its table.
  std::vector<char> needed(m.tensors.size(), 0);
  for (const int32_t t : m.outputs) needed[static_cast<size_t>(t)] = 1;
  for (size_t k = 0; k < ops.size(); ++k)
    if (!is_derived[k])
      for (const int32_t t : ops[k]->inputs)
        if (t >= 0) needed[static_cast<size_t>(t)] = 1;
  std::vector<FusedOp> plan(ops.size());
  for (size_t k = 0; k < ops.size(); ++k) {
    if (!is_derived[k]) continue;
    const auto y = static_cast<size_t>(ops[k]->outputs[0]);
    if (!needed[y]) {
      plan[k].kind = FusedOp::Kind::Skipped;
      continue;
    }
    plan[k].kind = FusedOp::Kind::Table;
    plan[k].root = derived[y].root;
    plan[k].table.input = qparams(m.tensors[static_cast<size_t>(derived[y].root)]);
    plan[k].table.output = qparams(m.tensors[y]);
    plan[k].table.entries = std::move(derived[y].table);
    plan[k].isa = isa;
  }
  return plan;
}

}  // namespace qflow::lowered::detail
