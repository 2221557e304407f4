// Pipeline files: toml11 parsing, ${var} substitution, resolution against the built-in
// components (options, ports, DAG order) and the canonical formatter.
#include <string_view>

#include "framework/pipeline/pipeline.h"
#include "fuzz/builtin_catalog.h"
#include "fuzz/fuzz_targets.h"

namespace qflow::fuzz {

void fuzz_pipeline_toml(const uint8_t* data, size_t size) {
  Expected<Pipeline> pipeline =
      parse_pipeline(std::string_view(reinterpret_cast<const char*>(data), size), "fuzz.toml");
  if (!pipeline) return;
  if (!resolve_pipeline(*pipeline, builtin_catalog())) return;
  (void)format_pipeline(*pipeline);
}

}  // namespace qflow::fuzz
