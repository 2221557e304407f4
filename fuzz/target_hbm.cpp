// .hbm loading as the device runtime does it: the container reader (header, section table,
// CRCs, offsets), the op-stream codec, lowered::validate, then one run on zeros when the
// model is small (run_bounded.h).
#include <span>

#include "fuzz/fuzz_targets.h"
#include "fuzz/run_bounded.h"
#include "qflow/runtime/hbm_reader.h"
#include "qflow/runtime/hbm_codec.h"

namespace qflow::fuzz {

void fuzz_hbm(const uint8_t* data, size_t size) {
  Expected<hbm::HbmFile> file = hbm::parse(std::span<const uint8_t>(data, size));
  if (!file) return;
  Expected<lowered::Model> model = lowered::from_hbm(*file);
  if (model) run_on_zeros(*model);
}

}  // namespace qflow::fuzz
