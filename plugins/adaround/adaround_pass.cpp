// AdaRound pass: options, the per-layer scale and grid of the QDQ builder, the weight rewrite.
#include "adaround_pass.h"

#include <algorithm>
#include <cmath>
#include <string>

#include "layer_inputs.h"
#include "qflow/quant/quant_math.h"

namespace qflow {

namespace {

// The QDQ builder's weight scale per output channel (framework/quant/qdq_builder.cpp,
// quantize_weight): max|w| / qmax rounded to float32, 2^-60 at least, 1 / qmax for a zero channel.
std::vector<double> builder_scales(const adaround::Matrix& w, double qmax, bool per_channel) {
  constexpr double kMinWeightScale = 0x1p-60;
  const auto scale_of = [&](double m) {
    return static_cast<double>(static_cast<float>(std::max((m > 0.0 ? m : 1.0) / qmax, kMinWeightScale)));
  };
  std::vector<double> out(static_cast<std::size_t>(w.rows()));
  if (!per_channel) {
    std::fill(out.begin(), out.end(), scale_of(w.cwiseAbs().maxCoeff()));
    return out;
  }
  for (Eigen::Index r = 0; r < w.rows(); ++r) out[static_cast<std::size_t>(r)] = scale_of(w.row(r).cwiseAbs().maxCoeff());
  return out;
}

}  // namespace

ComponentInfo AdaRound::info() {
  ComponentInfo info;
  info.kind = ComponentKind::Pass;
  info.name = "adaround";
  info.summary = "Learn each weight's rounding direction on calibration samples (AdaRound, Nagel et al. 2020)";
  info.needs_samples = true;
  info.options = {
      {"iterations", OptionType::Int, int64_t{1000}, "Adam steps per layer"},
      {"lambda", OptionType::Float, 0.01, "weight of the rounding regulariser sum(1 - |2h - 1|^beta)"},
      {"beta-start", OptionType::Float, 20.0, "regulariser exponent after the warm-up, annealed linearly to beta-end"},
      {"beta-end", OptionType::Float, 2.0, "regulariser exponent at the last step"},
      {"warmup", OptionType::Float, 0.2, "fraction of the steps without the regulariser"},
      {"learning-rate", OptionType::Float, 0.05, "Adam's step size on the rounding variables"},
      {"samples", OptionType::Int, int64_t{256}, "calibration samples whose layer inputs are fitted (0: all)"},
      {"weight-bits", OptionType::Int, int64_t{0}, "grid of 2 to 16 bits; 0: each node's [quantization] settings"},
      {"min-vectors", OptionType::Float, 4.0,
       "a layer is rounded only when its calibration input vectors number at least this many times the weights "
       "per output channel; others keep round-to-nearest",
       OptionLimits{.min = 0.0}},
      {"inputs", OptionType::String, std::string("rounded"),
       "layer inputs the rounding is fitted on: rounded (those of the model whose earlier layers are rounded, "
       "fitted to the float output) or float (the float model's; one run, less memory)",
       OptionLimits{.one_of = {"rounded", "float"}}},
  };
  return info;
}

Expected<std::unique_ptr<Pass>> AdaRound::create(const Options& options) {
  adaround::SoftRoundingOptions soft;
  soft.iterations = options.get_int("iterations");
  soft.lambda = options.get_float("lambda");
  soft.beta_start = options.get_float("beta-start");
  soft.beta_end = options.get_float("beta-end");
  soft.warmup = options.get_float("warmup");
  soft.learning_rate = options.get_float("learning-rate");
  const int64_t samples = options.get_int("samples"), bits = options.get_int("weight-bits");
  if (soft.iterations < 0) return invalid_input("adaround: iterations must be >= 0, got " + std::to_string(soft.iterations));
  if (!(soft.lambda >= 0.0) || !std::isfinite(soft.lambda)) return invalid_input("adaround: lambda must be >= 0");
  if (!(soft.beta_end >= 1.0) || !(soft.beta_start >= soft.beta_end) || !std::isfinite(soft.beta_start))
    return invalid_input("adaround: beta must anneal from beta-start down to beta-end >= 1");
  if (!(soft.warmup >= 0.0 && soft.warmup <= 1.0)) return invalid_input("adaround: warmup must lie in [0, 1]");
  if (!(soft.learning_rate > 0.0) || !std::isfinite(soft.learning_rate))
    return invalid_input("adaround: learning-rate must be positive");
  if (samples < 0) return invalid_input("adaround: samples must be >= 0, got " + std::to_string(samples));
  if (bits != 0 && (bits < 2 || bits > 16))
    return invalid_input("adaround: weight-bits must be 0 or from 2 to 16, got " + std::to_string(bits));
  return std::unique_ptr<Pass>(std::make_unique<AdaRound>(soft, samples, bits, options.get_string("inputs") == "rounded",
                                                          options.get_float("min-vectors")));
}

Expected<PassResult> AdaRound::run_impl(Model& model) {
  (void)model;
  return invalid_input("adaround reads calibration samples: give its stage a dataset input");
}

Expected<PassResult> AdaRound::run_with_context(Model& model, const PassContext& context) {
  if (!context.samples) return run_impl(model);
  Graph& graph = *model.graph;
  QFLOW_ASSIGN_OR_RETURN(std::vector<adaround::Layer> layers, adaround::find_layers(graph));
  const QuantConfig defaults;
  const QuantConfig& config = context.quantization ? *context.quantization : defaults;
  // Nodes left float by the [quantization] table keep their weights.
  std::erase_if(layers, [&](const adaround::Layer& l) { return !config.resolve(l.node->name(), l.node->op_type()).quantize; });
  PassResult result;
  if (layers.empty()) return result;
  const int64_t available = context.samples->count();
  const int64_t count = samples_ > 0 ? std::min(samples_, available) : available;
  if (count == 0) return invalid_input("adaround: the dataset has no samples");
  int64_t rounded_away = 0;
  const auto round = [&](adaround::Layer& layer) -> Status {
    if (layer.vectors == 0) return Status::ok();
    // Fewer input vectors than weights per output channel (a squeeze-excitation FC on pooled
    // features, a classifier head): the gram is singular and a rounding fitted to it fits the
    // calibration samples, not the data. Those layers keep round-to-nearest.
    const int64_t k = layer.grams.empty() ? 0 : layer.grams.front().rows();
    if (static_cast<double>(layer.vectors) < min_vectors_ * static_cast<double>(k)) {
      ++result.counters["layers-underdetermined"];
      return Status::ok();
    }
    const QuantSpec spec = config.resolve(layer.node->name(), layer.node->op_type());
    const int bits = weight_bits_ > 0 ? static_cast<int>(weight_bits_) : spec.weight_bits;
    const DType container = weight_bits_ > 0 ? (bits <= 8 ? DType::Int8 : DType::Int16) : spec.weight_dtype;
    adaround::LayerProblem problem;
    problem.weight = adaround::weight_matrix(graph, layer);
    problem.qmax = weight_qmax(container, spec.reduce_range, bits);
    problem.scale = builder_scales(problem.weight, problem.qmax, spec.per_channel);
    problem.grams = std::move(layer.grams);
    problem.cross = std::move(layer.cross);
    const int64_t per_group = problem.weight.rows() / layer.groups;
    for (Eigen::Index r = 0; r < problem.weight.rows(); ++r) problem.group_of.push_back(r / per_group);
    const adaround::Matrix learned = adaround::learned_integers(problem, options_);
    rounded_away += (learned.array() != adaround::nearest_integers(problem).array()).count();
    adaround::Matrix snapped(learned.rows(), learned.cols());
    for (Eigen::Index r = 0; r < learned.rows(); ++r)
      snapped.row(r) = learned.row(r) * problem.scale[static_cast<std::size_t>(r)];
    graph.set_initializer(layer.node->input(1), adaround::weight_tensor(graph, layer, snapped));
    ++result.counters["layers-rounded"];
    return Status::ok();
  };
  if (rounded_inputs_) {
    QFLOW_RETURN_IF_ERROR(adaround::round_in_sequence(model, *context.samples, count, layers, round));
  } else {
    QFLOW_RETURN_IF_ERROR(adaround::collect_grams(model, *context.samples, count, layers));
    for (adaround::Layer& layer : layers) QFLOW_RETURN_IF_ERROR(round(layer));
  }
  result.counters["weights-rounded-away"] = rounded_away;
  result.changed = result.counters["layers-rounded"] > 0;
  return result;
}

}  // namespace qflow
