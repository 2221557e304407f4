// Test plugins that the host must refuse; QFLOW_TEST_FAULT selects the one fault each library has.
#include <stdexcept>

#include "qflow/plugin/entry.h"

namespace {

using namespace qflow;

#define FAULT_API_VERSION 1
#define FAULT_COMPILER 2
#define FAULT_SDK 3
#define FAULT_SMALL_STRUCT 4
#define FAULT_DUPLICATE_WITHIN 5
#define FAULT_DUPLICATE_OTHER 6
#define FAULT_BAD_NAME 7
#define FAULT_REGISTER_THROWS 8
#define FAULT_IGNORED_ERROR 9

class EmptyPass final : public Pass {
 private:
  Expected<PassResult> run_impl(Model& model) override {
    (void)model;
    return PassResult{};
  }
};

[[maybe_unused]] ComponentFactory<Pass> pass_factory() {
  return [](const Options&) -> Expected<std::unique_ptr<Pass>> { return std::unique_ptr<Pass>(std::make_unique<EmptyPass>()); };
}

Status register_components(ComponentRegistrar& registrar) {
#if QFLOW_TEST_FAULT == FAULT_DUPLICATE_WITHIN
  QFLOW_RETURN_IF_ERROR(registrar.add_pass({ComponentKind::Pass, "twice", "first", {}}, pass_factory()));
  return registrar.add_pass({ComponentKind::Pass, "twice", "second", {}}, pass_factory());
#elif QFLOW_TEST_FAULT == FAULT_DUPLICATE_OTHER
  // The first component is new; the second collides with test-good's pass, so neither may stay.
  QFLOW_RETURN_IF_ERROR(registrar.add_pass({ComponentKind::Pass, "fresh", "new", {}}, pass_factory()));
  return registrar.add_pass({ComponentKind::Pass, "noop", "collides", {}}, pass_factory());
#elif QFLOW_TEST_FAULT == FAULT_BAD_NAME
  return registrar.add_pass({ComponentKind::Pass, "Fold_BN", "bad name", {}}, pass_factory());
#elif QFLOW_TEST_FAULT == FAULT_REGISTER_THROWS
  (void)registrar;
  throw std::runtime_error("out of coffee");
#elif QFLOW_TEST_FAULT == FAULT_IGNORED_ERROR
  // Drops the refusal and reports success: the host must still fail the load.
  (void)registrar.add_pass({ComponentKind::Pass, "no-summary", "", {}}, pass_factory());
  return Status::ok();
#else
  return registrar.add_pass({ComponentKind::Pass, "never-seen", "the entry point is refused first", {}}, pass_factory());
#endif
}

}  // namespace

extern "C" __attribute__((visibility("default"))) const qflow_plugin_info* qflow_plugin_entry() {
  static const qflow_plugin_info info = {
#if QFLOW_TEST_FAULT == FAULT_API_VERSION
      QFLOW_PLUGIN_API_VERSION + 1,
#else
      QFLOW_PLUGIN_API_VERSION,
#endif
#if QFLOW_TEST_FAULT == FAULT_SMALL_STRUCT
      40,
#else
      static_cast<uint32_t>(sizeof(qflow_plugin_info)),
#endif
      "test-bad",
      "0.0.1",
#if QFLOW_TEST_FAULT == FAULT_COMPILER
      "gcc 4.8",
#else
      QFLOW_COMPILER_ID,
#endif
#if QFLOW_TEST_FAULT == FAULT_SDK
      "0.0.9",
#else
      QFLOW_VERSION_STRING,
#endif
      &::qflow::plugin_detail::register_trampoline<register_components>};
  return &info;
}
