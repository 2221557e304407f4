// .bc loading: protobuf decoding, the structural checks of decode_bc and lowered::validate;
// a model that loads is run once on zeros when it is small (run_bounded.h).
#include "fuzz/fuzz_targets.h"
#include "fuzz/run_bounded.h"
#include "plugins/backends/bpu/bc_codec.h"

namespace qflow::fuzz {

void fuzz_bc(const uint8_t* data, size_t size) {
  Expected<lowered::Model> model = decode_bc(std::span<const uint8_t>(data, size));
  if (model) run_on_zeros(*model);
}

}  // namespace qflow::fuzz
