// .npy reading: the header parser alone (as the streaming dataset reader uses it) and the
// whole-file parser.
#include <string>
#include <string_view>

#include "framework/data/npy.h"
#include "fuzz/fuzz_targets.h"

namespace qflow::fuzz {

void fuzz_npy(const uint8_t* data, size_t size) {
  const std::string_view bytes(reinterpret_cast<const char*>(data), size);
  (void)parse_npy_header(bytes, "fuzz.npy");
  Expected<Tensor> tensor = parse_npy(bytes, "fuzz.npy", kMaxTensorBytes);
  // A tensor that parsed must serialize again (the round trip the CLI's writers rely on).
  if (tensor) (void)serialize_npy(*tensor);
}

}  // namespace qflow::fuzz
