// KernelRegistry: kernels keyed by (domain, op type, opset range).
#pragma once

#include <map>
#include <string>
#include <tuple>
#include <vector>

#include "framework/interpreter/kernel.h"

namespace qflow {

class KernelRegistry {
 public:
  // Registers a kernel for opsets [since, until] inclusive. Later registrations with an
  // overlapping range take precedence (a plugin may override a built-in kernel).
  void add(const std::string& domain, const std::string& op_type, int64_t since, int64_t until,
           KernelFactory factory);
  void add_function(const std::string& domain, const std::string& op_type, int64_t since,
                    int64_t until, KernelFunction function);

  // The factory for `op_type` at `opset`, or nullptr.
  const KernelFactory* find(const std::string& domain, const std::string& op_type,
                            int64_t opset) const;
  bool supports(const std::string& domain, const std::string& op_type, int64_t opset) const {
    return find(domain, op_type, opset) != nullptr;
  }
  // (domain, op type) pairs with at least one kernel, sorted.
  std::vector<std::pair<std::string, std::string>> ops() const;

  // The registry holding every kernel built into qflow.
  static const KernelRegistry& builtin();

 private:
  struct Entry {
    int64_t since;
    int64_t until;
    KernelFactory factory;
  };
  std::map<std::pair<std::string, std::string>, std::vector<Entry>> entries_;
};

// Open-ended upper bound for opset ranges.
inline constexpr int64_t kLatestOpset = 1 << 20;

// One per kernel family file (framework/interpreter/kernels/*.cpp); builtin() calls them all.
void register_conv_kernels(KernelRegistry& registry);
void register_gemm_kernels(KernelRegistry& registry);
void register_pool_kernels(KernelRegistry& registry);
void register_normalization_kernels(KernelRegistry& registry);
void register_resize_kernels(KernelRegistry& registry);
void register_elementwise_kernels(KernelRegistry& registry);
void register_shape_kernels(KernelRegistry& registry);
void register_reduce_kernels(KernelRegistry& registry);
void register_quant_kernels(KernelRegistry& registry);
void register_contrib_kernels(KernelRegistry& registry);
void register_sampling_kernels(KernelRegistry& registry);
void register_signal_kernels(KernelRegistry& registry);
void register_control_flow_kernels(KernelRegistry& registry);
void register_rnn_kernels(KernelRegistry& registry);
void register_loss_kernels(KernelRegistry& registry);
void register_selection_kernels(KernelRegistry& registry);
void register_linalg_kernels(KernelRegistry& registry);
void register_window_kernels(KernelRegistry& registry);
void register_text_kernels(KernelRegistry& registry);
void register_optimizer_kernels(KernelRegistry& registry);

}  // namespace qflow
