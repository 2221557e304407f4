// Tensor::make refuses sizes above the process-wide --max-memory before allocating, so run-time
// sizes (kernel outputs, arena buffers) are bounded like sizes read from files.
#include <doctest/doctest.h>

#include "framework/core/memory_limit.h"
#include "qflow/ir/tensor.h"

namespace qflow {

namespace {

// Sets the limit for one test and restores "not set" (the default) afterwards.
struct ScopedMemoryLimit {
  explicit ScopedMemoryLimit(int64_t bytes) { set_memory_limit(bytes); }
  ~ScopedMemoryLimit() { set_memory_limit(0); }
};

}  // namespace

TEST_CASE("Tensor::make: the memory limit bounds every checked allocation") {
  ScopedMemoryLimit limit(1024);
  auto fits = Tensor::make(DType::Float32, {16, 16});
  REQUIRE(fits);
  CHECK(fits->nbytes() == 1024);
  auto over = Tensor::make(DType::Float32, {16, 17});
  REQUIRE_FALSE(over);
  CHECK(over.status().message() ==
        "tensor shape [16, 17] of float needs 1088 bytes, more than the memory limit of 1024 bytes (--max-memory)");
  auto huge = Tensor::make(DType::Int64, {int64_t{1} << 20, int64_t{1} << 20});
  REQUIRE_FALSE(huge);
  CHECK(huge.status().message() == "tensor shape [1048576, 1048576] of int64 needs 8796093022208 bytes, more than the "
                                   "memory limit of 1024 bytes (--max-memory)");
}

TEST_CASE("Tensor::make: a caller's lower bound keeps its own message") {
  ScopedMemoryLimit limit(int64_t{1} << 30);
  auto over = Tensor::make(DType::UInt8, {100}, 64);
  REQUIRE_FALSE(over);
  CHECK(over.status().message() == "tensor shape [100] needs 100 bytes, more than the limit of 64");
  CHECK(Tensor::make(DType::UInt8, {64}, 64));
}

}  // namespace qflow
