// Writes the .bc and .hbm seeds of the fuzz corpus from the hand-built sample model of the
// runtime tests (tests/runtime/lowered_sample.h):
//   qflow_fuzz_make_seeds <corpus folder>   -> <folder>/bc/tiny_conv.bc, <folder>/hbm/tiny_conv.hbm
// The other targets' seeds are copies of repository fixtures (docs/fuzzing.md).
#include <cstdio>
#include <filesystem>
#include <fstream>
#include <string>

#include "plugins/backends/bpu/bc_codec.h"
#include "qflow/runtime/hbm_codec.h"
#include "tests/runtime/lowered_sample.h"

namespace {

bool write(const std::filesystem::path& path, const void* data, size_t size) {
  std::filesystem::create_directories(path.parent_path());
  std::ofstream out(path, std::ios::binary | std::ios::trunc);
  out.write(static_cast<const char*>(data), static_cast<std::streamsize>(size));
  out.close();
  if (!out) std::fprintf(stderr, "qflow_fuzz_make_seeds: cannot write %s\n", path.c_str());
  return static_cast<bool>(out);
}

}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) {
    std::fprintf(stderr, "usage: qflow_fuzz_make_seeds <corpus folder>\n");
    return 2;
  }
  const std::filesystem::path corpus = argv[1];
  const qflow::lowered::Model model = qflow::lowered::testing::sample_model();

  qflow::Expected<std::string> bc = qflow::encode_bc(model);
  if (!bc) {
    std::fprintf(stderr, "qflow_fuzz_make_seeds: %s\n", bc.status().message().c_str());
    return 1;
  }
  auto hbm = qflow::lowered::encode_hbm(model, "fuzz-seed");
  if (!hbm) {
    std::fprintf(stderr, "qflow_fuzz_make_seeds: %s\n", hbm.status().message().c_str());
    return 1;
  }
  const bool ok = write(corpus / "bc" / "tiny_conv.bc", bc->data(), bc->size()) &&
                  write(corpus / "hbm" / "tiny_conv.hbm", hbm->data(), hbm->size());
  return ok ? 0 : 1;
}
