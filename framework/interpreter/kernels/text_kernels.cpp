// Text kernels: TfIdfVectorizer over integer tokens, StringNormalizer over string tensors.
#include <algorithm>
#include <cctype>
#include <map>
#include <set>
#include <string>
#include <vector>

#include "framework/interpreter/kernel_registry.h"
#include "framework/interpreter/kernel_util.h"
#include "framework/interpreter/kernels/bound_kernel.h"
#include "framework/interpreter/kernels/shape_kernel_util.h"

namespace qflow {
namespace {

enum class Weighting { TF, IDF, TFIDF };

// The attributes, checked and turned into a lookup from n-gram to output slot.
struct TfIdfSpec {
  int64_t min_gram = 1, max_gram = 1, max_skip = 0;
  Weighting weighting = Weighting::TF;
  std::map<std::vector<int64_t>, int64_t> slots;
  int64_t output_size = 0;
  std::vector<float> weights;  // per output slot, empty: all 1
};

// pool_int64s holds the n-grams of length 1, 2, ... back to back; ngram_counts[k] is
// where those of length k + 1 start, and ngram_indexes gives each n-gram's output slot.
Expected<TfIdfSpec> read_spec(const Node& node) {
  TfIdfSpec spec;
  spec.min_gram = node.attr_int("min_gram_length", 0);
  spec.max_gram = node.attr_int("max_gram_length", 0);
  spec.max_skip = node.attr_int("max_skip_count", 0);
  if (spec.min_gram < 1 || spec.max_gram < spec.min_gram || spec.max_skip < 0)
    return invalid_input("needs 1 <= min_gram_length <= max_gram_length and max_skip_count >= 0, got " +
                         std::to_string(spec.min_gram) + ", " + std::to_string(spec.max_gram) + " and " +
                         std::to_string(spec.max_skip));
  const std::string mode = node.attr_string("mode", "");
  if (mode == "TF") {
    spec.weighting = Weighting::TF;
  } else if (mode == "IDF") {
    spec.weighting = Weighting::IDF;
  } else if (mode == "TFIDF") {
    spec.weighting = Weighting::TFIDF;
  } else {
    return invalid_input("mode must be TF, IDF or TFIDF, got '" + mode + "'");
  }
  if (node.find_attribute("pool_strings")) return unsupported("string n-gram pools are not supported");
  const std::vector<int64_t> pool = node.attr_ints("pool_int64s");
  const std::vector<int64_t> starts = node.attr_ints("ngram_counts");
  const std::vector<int64_t> indexes = node.attr_ints("ngram_indexes");
  std::size_t ngram = 0;
  for (std::size_t k = 0; k < starts.size(); ++k) {
    const int64_t begin = starts[k];
    const int64_t end = k + 1 < starts.size() ? starts[k + 1] : static_cast<int64_t>(pool.size());
    const int64_t length = static_cast<int64_t>(k) + 1;
    if (begin < 0 || end < begin || end > static_cast<int64_t>(pool.size()) || (end - begin) % length != 0)
      return invalid_input("ngram_counts " + std::to_string(begin) + ".." + std::to_string(end) +
                           " does not split pool_int64s into n-grams of length " + std::to_string(length));
    for (int64_t at = begin; at < end; at += length, ++ngram) {
      if (ngram >= indexes.size()) return invalid_input("ngram_indexes has fewer entries than the pool has n-grams");
      if (indexes[ngram] < 0) return invalid_input("ngram_indexes holds a negative slot");
      spec.slots[std::vector<int64_t>(pool.begin() + at, pool.begin() + at + length)] = indexes[ngram];
      spec.output_size = std::max(spec.output_size, indexes[ngram] + 1);
    }
  }
  if (ngram != indexes.size()) return invalid_input("ngram_indexes has more entries than the pool has n-grams");
  spec.weights = node.attr_floats("weights");
  if (!spec.weights.empty() && static_cast<int64_t>(spec.weights.size()) < spec.output_size)
    return invalid_input("weights has " + std::to_string(spec.weights.size()) + " entries for " +
                         std::to_string(spec.output_size) + " output slots");
  return spec;
}

// Counts, per row, the pool n-grams whose items lie `distance` apart for every distance
// 1 .. max_skip + 1; unigrams do not depend on the distance and count only once.
Status tf_idf(KernelContext& ctx, const TfIdfSpec& spec) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  if (x->dtype() != DType::Int32 && x->dtype() != DType::Int64)
    return ctx.error("the input must be int32 or int64, got " + std::string(dtype_name(x->dtype())));
  if (x->rank() != 1 && x->rank() != 2) return ctx.error("the input must be [C] or [N, C], got " + shape_to_string(x->shape()));
  const int64_t rows = x->rank() == 2 ? x->dim(0) : 1;
  const int64_t row_size = x->rank() == 2 ? x->dim(1) : x->dim(0);
  const Shape out_shape = x->rank() == 2 ? Shape{rows, spec.output_size} : Shape{spec.output_size};
  QFLOW_ASSIGN_OR_RETURN(Tensor y, shape_detail::make_output(ctx, DType::Float32, out_shape));
  const std::vector<int64_t> tokens = x->to_int64s();
  std::vector<int64_t> counts(static_cast<std::size_t>(spec.output_size));
  std::vector<int64_t> gram;
  for (int64_t r = 0; r < rows; ++r) {
    std::fill(counts.begin(), counts.end(), 0);
    const int64_t* row = tokens.data() + r * row_size;
    for (int64_t distance = 1; distance <= spec.max_skip + 1; ++distance) {
      const int64_t shortest = distance == 1 ? spec.min_gram : std::max<int64_t>(spec.min_gram, 2);
      for (int64_t start = 0; start < row_size; ++start)
        for (int64_t n = shortest; n <= spec.max_gram && start + (n - 1) * distance < row_size; ++n) {
          gram.clear();
          for (int64_t k = 0; k < n; ++k) gram.push_back(row[start + k * distance]);
          auto hit = spec.slots.find(gram);
          if (hit != spec.slots.end()) ++counts[static_cast<std::size_t>(hit->second)];
        }
    }
    float* out = y.data<float>() + r * spec.output_size;
    for (int64_t i = 0; i < spec.output_size; ++i) {
      const float count = static_cast<float>(counts[static_cast<std::size_t>(i)]);
      const float weight = spec.weights.empty() ? 1.0f : spec.weights[static_cast<std::size_t>(i)];
      switch (spec.weighting) {
        case Weighting::TF: out[i] = count; break;
        case Weighting::IDF: out[i] = count > 0 ? weight : 0.0f; break;
        case Weighting::TFIDF: out[i] = count * weight; break;
      }
    }
  }
  ctx.outputs[0] = std::move(y);
  return Status::ok();
}

KernelFactory tf_idf_kernel() {
  return [](const Node& node, int64_t, const std::vector<const Tensor*>&) -> Expected<std::unique_ptr<Kernel>> {
    auto spec = read_spec(node);
    if (!spec) return spec.status().with_context("TfIdfVectorizer '" + node.name() + "'");
    return std::unique_ptr<Kernel>(new BoundKernel([spec = std::move(*spec)](KernelContext& ctx) { return tf_idf(ctx, spec); }));
  };
}

// StringNormalizer's attributes. Case is changed and compared byte by byte in ASCII (the
// "en_US" locale's rule for ASCII text); other bytes, as of UTF-8 text, stay as they are.
struct NormalizerSpec {
  enum class Case { None, Lower, Upper } change = Case::None;
  bool case_sensitive = false;
  std::set<std::string> stopwords;  // lowered unless case_sensitive
};

std::string ascii_case(std::string text, bool upper) {
  for (char& c : text) c = static_cast<char>(upper ? std::toupper(static_cast<unsigned char>(c)) : std::tolower(static_cast<unsigned char>(c)));
  return text;
}

Expected<NormalizerSpec> read_normalizer(const Node& node) {
  NormalizerSpec spec;
  const std::string action = node.attr_string("case_change_action", "NONE");
  if (action == "LOWER") spec.change = NormalizerSpec::Case::Lower;
  else if (action == "UPPER") spec.change = NormalizerSpec::Case::Upper;
  else if (action != "NONE") return invalid_input("case_change_action must be LOWER, UPPER or NONE, got '" + action + "'");
  spec.case_sensitive = node.attr_int("is_case_sensitive", 0) != 0;
  if (const Attribute* words = node.find_attribute("stopwords"))
    for (const std::string& w : words->strings) spec.stopwords.insert(spec.case_sensitive ? w : ascii_case(w, false));
  return spec;
}

// Drops the stopwords from a [C] or [1, C] string tensor and changes the case of the rest; a
// row left empty holds one empty string, as the operator defines.
Status string_normalizer(KernelContext& ctx, const NormalizerSpec& spec) {
  QFLOW_ASSIGN_OR_RETURN(const Tensor* x, ctx.required_input(0));
  if (x->dtype() != DType::String) return ctx.error("input X must be string, got " + std::string(dtype_name(x->dtype())));
  const bool two_dim = x->rank() == 2;
  if (!(x->rank() == 1 || (two_dim && x->dim(0) == 1)))
    return ctx.error("input X must have shape [C] or [1, C], got " + shape_to_string(x->shape()));
  std::vector<std::string> kept;
  for (const std::string& text : x->strings()) {
    if (spec.stopwords.count(spec.case_sensitive ? text : ascii_case(text, false))) continue;
    switch (spec.change) {
      case NormalizerSpec::Case::None: kept.push_back(text); break;
      case NormalizerSpec::Case::Lower: kept.push_back(ascii_case(text, false)); break;
      case NormalizerSpec::Case::Upper: kept.push_back(ascii_case(text, true)); break;
    }
  }
  if (kept.empty()) kept.emplace_back();
  const auto count = static_cast<int64_t>(kept.size());
  ctx.outputs[0] = Tensor::from_strings(two_dim ? Shape{1, count} : Shape{count}, std::move(kept));
  return Status::ok();
}

KernelFactory string_normalizer_kernel() {
  return [](const Node& node, int64_t, const std::vector<const Tensor*>&) -> Expected<std::unique_ptr<Kernel>> {
    auto spec = read_normalizer(node);
    if (!spec) return spec.status().with_context("StringNormalizer '" + node.name() + "'");
    return std::unique_ptr<Kernel>(
        new BoundKernel([spec = std::move(*spec)](KernelContext& ctx) { return string_normalizer(ctx, spec); }));
  };
}

}  // namespace

void register_text_kernels(KernelRegistry& registry) {
  registry.add("", "TfIdfVectorizer", 9, kLatestOpset, tf_idf_kernel());
  registry.add("", "StringNormalizer", 10, kLatestOpset, string_normalizer_kernel());
}

}  // namespace qflow
