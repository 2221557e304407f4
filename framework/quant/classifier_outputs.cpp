// Classifier outputs compared at a reference confidence (see classifier_outputs.h).
#include "framework/quant/classifier_outputs.h"

#include <algorithm>
#include <cmath>

#include "framework/quant/output_cosine.h"

namespace qflow {

namespace {

// Whether the declared shape of `v` holds one distribution (length >= 2) along `axis` (every
// axis from it on when `coerce_2d`): every other dimension is 1, or the symbolic batch. An
// output of several distributions per sample (a sequence's [1, T, C]) holds positions of
// every confidence already, and is compared as it is.
bool declared_one_distribution(const Value& v, int64_t axis, bool coerce_2d) {
  if (!v.type || !v.type->shape) return false;
  const std::vector<Dim>& dims = *v.type->shape;
  const auto rank = static_cast<int64_t>(dims.size());
  if (axis < 0) axis += rank;
  if (axis < 0 || axis >= rank) return false;
  int64_t len = 1;
  for (int64_t d = 0; d < rank; ++d) {
    const Dim& dim = dims[static_cast<std::size_t>(d)];
    const bool in_distribution = d == axis || (coerce_2d && d > axis);
    if (in_distribution) {
      if (!dim.is_static()) return false;
      len *= *dim.value;
    } else if (dim.is_static() ? *dim.value != 1 : d != 0) {
      return false;
    }
  }
  return len >= 2;
}

}  // namespace

ClassifierOutputs ClassifierOutputs::expose(Model& model) {
  Graph& g = *model.graph;
  ClassifierOutputs found;
  found.outputs_ = g.outputs.size();
  const int64_t opset = model.opset();
  for (std::size_t i = 0; i < found.outputs_; ++i) {
    const Node* softmax = g.outputs[i]->producer();
    if (!softmax || softmax->op_type() != "Softmax" || (!softmax->domain().empty() && softmax->domain() != "ai.onnx") ||
        softmax->inputs().empty())
      continue;
    Value* logits = softmax->inputs()[0];
    if (!logits || g.is_initializer(logits)) continue;
    if (logits->type && logits->type->dtype != DType::Undefined && logits->type->dtype != DType::Float32) continue;
    Entry e;
    e.output = i;
    e.coerce_2d = opset > 0 && opset < 13;
    e.axis = softmax->attr_int("axis", e.coerce_2d ? 1 : -1);
    if (!declared_one_distribution(*g.outputs[i], e.axis, e.coerce_2d)) continue;
    auto it = std::find(g.outputs.begin(), g.outputs.end(), logits);
    if (it == g.outputs.end()) {
      g.outputs.push_back(logits);
      it = g.outputs.end() - 1;
    }
    e.logits = static_cast<std::size_t>(it - g.outputs.begin());
    found.entries_.push_back(e);
    found.names_.push_back(g.outputs[i]->name());
  }
  return found;
}

bool ClassifierOutputs::one_distribution(const Entry& e, const Tensor& t) const {
  const auto rank = static_cast<int64_t>(t.shape().size());
  const int64_t axis = e.axis < 0 ? e.axis + rank : e.axis;
  if (rank == 0 || axis < 0 || axis >= rank || t.dtype() != DType::Float32) return false;
  int64_t len = 1;
  for (int64_t d = axis; d < (e.coerce_2d ? rank : axis + 1); ++d) len *= t.dim(d);
  return len >= 2 && len == t.numel();
}

namespace {

// softmax(x) in double, as float.
std::vector<float> softmax_of(const std::vector<double>& x) {
  const double top = *std::max_element(x.begin(), x.end());
  std::vector<double> e(x.size());
  double sum = 0.0;
  for (std::size_t i = 0; i < x.size(); ++i) sum += e[i] = std::exp(x[i] - top);
  std::vector<float> p(x.size());
  for (std::size_t i = 0; i < x.size(); ++i) p[i] = static_cast<float>(e[i] / sum);
  return p;
}

void append(std::vector<float>& flat, const Tensor& t) {
  if (t.dtype() == DType::Float32) {
    flat.insert(flat.end(), t.data<float>(), t.data<float>() + t.numel());
  } else {
    for (const double v : t.to_doubles()) flat.push_back(static_cast<float>(v));
  }
}

bool all_finite(const Tensor& t) {
  return std::all_of(t.data<float>(), t.data<float>() + t.numel(), [](float v) { return std::isfinite(v); });
}

}  // namespace

std::vector<float> ClassifierOutputs::compared(const std::vector<const Tensor*>& run,
                                               const std::vector<const Tensor*>& reference) const {
  std::vector<float> flat;
  for (std::size_t i = 0; i < outputs_ && i < run.size(); ++i) {
    const auto entry = std::find_if(entries_.begin(), entries_.end(), [&](const Entry& e) { return e.output == i; });
    if (entry == entries_.end() || entry->logits >= run.size() || entry->logits >= reference.size()) {
      append(flat, *run[i]);
      continue;
    }
    const Tensor& q = *run[entry->logits];
    const Tensor& f = *reference[entry->logits];
    if (!one_distribution(*entry, q) || !one_distribution(*entry, f) || q.numel() != f.numel() || !all_finite(q) ||
        !all_finite(f)) {
      append(flat, *run[i]);
      continue;
    }
    const float* fl = f.data<float>();
    const auto n = static_cast<std::size_t>(f.numel());
    const auto top = static_cast<std::size_t>(std::max_element(fl, fl + n) - fl);
    double runner_up = -INFINITY;
    for (std::size_t c = 0; c < n; ++c)
      if (c != top) runner_up = std::max(runner_up, double{fl[c]});
    const double lower = std::max(0.0, double{fl[top]} - runner_up - kClassifierReferenceMargin);
    std::vector<double> logits(q.data<float>(), q.data<float>() + n);
    logits[top] -= lower;
    const std::vector<float> p = softmax_of(logits);
    flat.insert(flat.end(), p.begin(), p.end());
  }
  return flat;
}

std::vector<float> ClassifierOutputs::reference_values(const std::vector<const Tensor*>& reference) const {
  if (!empty()) return compared(reference, reference);
  std::vector<float> flat;
  for (const Tensor* t : reference) append(flat, *t);
  return flat;
}

double ClassifierOutputs::cosine(const std::vector<float>& reference_values, const std::vector<const Tensor*>& run,
                                 const std::vector<const Tensor*>& reference) const {
  if (empty()) return cosine_similarity(reference_values, run);
  return cosine_similarity(reference_values, compared(run, reference));
}

}  // namespace qflow
