// KernelRegistry lookup and the registry of built-in kernels.
#include "framework/interpreter/kernel_registry.h"

namespace qflow {

namespace {
std::string canonical_domain(const std::string& domain) {
  return domain == "ai.onnx" ? std::string() : domain;
}

// Adapts a stateless function to the Kernel interface.
class FunctionKernel final : public Kernel {
 public:
  explicit FunctionKernel(KernelFunction function) : function_(std::move(function)) {}
  Status compute(KernelContext& context) const override { return function_(context); }

 private:
  KernelFunction function_;
};
}  // namespace

void KernelRegistry::add(const std::string& domain, const std::string& op_type, int64_t since,
                         int64_t until, KernelFactory factory) {
  entries_[{canonical_domain(domain), op_type}].push_back({since, until, std::move(factory)});
}

void KernelRegistry::add_function(const std::string& domain, const std::string& op_type, int64_t since,
                                  int64_t until, KernelFunction function) {
  add(domain, op_type, since, until,
      [function = std::move(function)](const Node&, int64_t, const std::vector<const Tensor*>&)
          -> Expected<std::unique_ptr<Kernel>> { return std::unique_ptr<Kernel>(new FunctionKernel(function)); });
}

const KernelFactory* KernelRegistry::find(const std::string& domain, const std::string& op_type,
                                          int64_t opset) const {
  auto it = entries_.find({canonical_domain(domain), op_type});
  if (it == entries_.end()) return nullptr;
  for (auto e = it->second.rbegin(); e != it->second.rend(); ++e)
    if (opset >= e->since && opset <= e->until) return &e->factory;
  return nullptr;
}

std::vector<std::pair<std::string, std::string>> KernelRegistry::ops() const {
  std::vector<std::pair<std::string, std::string>> out;
  for (const auto& [key, entries] : entries_) out.push_back(key);
  return out;
}

const KernelRegistry& KernelRegistry::builtin() {
  static const KernelRegistry registry = [] {
    KernelRegistry r;
    register_conv_kernels(r);
    register_gemm_kernels(r);
    register_pool_kernels(r);
    register_normalization_kernels(r);
    register_resize_kernels(r);
    register_elementwise_kernels(r);
    register_shape_kernels(r);
    register_reduce_kernels(r);
    register_quant_kernels(r);
    register_contrib_kernels(r);
    register_sampling_kernels(r);
    register_signal_kernels(r);
    register_control_flow_kernels(r);
    register_rnn_kernels(r);
    register_loss_kernels(r);
    register_selection_kernels(r);
    register_linalg_kernels(r);
    register_window_kernels(r);
    register_text_kernels(r);
    register_optimizer_kernels(r);
    return r;
  }();
  return registry;
}

}  // namespace qflow
