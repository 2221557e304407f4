// builtin_operators(): the SDK's view of the interpreter's kernel registry.
#include "qflow/ir/operators.h"

#include "framework/interpreter/kernel_registry.h"

namespace qflow {

std::vector<std::pair<std::string, std::string>> builtin_operators() { return KernelRegistry::builtin().ops(); }

}  // namespace qflow
