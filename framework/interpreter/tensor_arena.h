// TensorArena: recycles the buffers of intermediate values within a run and across runs.
#pragma once

#include <cstddef>
#include <map>
#include <unordered_map>
#include <utility>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

// Buffers handed out by acquire() are counted while values hold them; when the last value
// holding one is released the buffer goes to a free list keyed by dtype and element count,
// and the next acquire() of that size takes it instead of allocating a new one. Values are
// released in the order the graph's liveness dictates, so the reuse pattern is the same on
// every run. An arena serves one run at a time; reclaim() at the end of a run readies it
// for the next, so a steady stream of runs allocates nothing.
class TensorArena {
 public:
  // An output tensor with unspecified contents (never zero-filled).
  Expected<Tensor> acquire(DType dtype, const Shape& shape);
  // A value now holds `tensor` (a no-op for buffers the arena did not hand out).
  void retain(const Tensor& tensor);
  // A value holding `tensor` (still in hand) died. Its buffer is free once no value holds it
  // and nobody but the arena and that handle shares it.
  void release(const Tensor& tensor);
  // The run is over and has dropped its own tensors. Every buffer nobody else shares goes
  // back to the free lists; a buffer still shared (a graph output returned to the caller)
  // is given up for good, so it is never handed out while the caller holds it. Free
  // buffers this run did not ask for are released, which bounds the arena by one run.
  void reclaim();
  // Whether `tensor` is a buffer handed out this run that no value holds yet: a kernel's
  // new output, which the arena's handle and the output's alone share when nobody kept it.
  bool handed_out_unheld(const Tensor& tensor) const;

  std::size_t buffer_count() const { return buffers_.size(); }

 private:
  struct Buffer {
    Tensor tensor;     // the arena's own handle
    int holders = 0;   // live values of the current run holding it
    bool used = false; // handed out since the last reclaim()
  };
  using SizeKey = std::pair<DType, int64_t>;
  std::vector<Buffer> buffers_;                              // in order of first allocation
  std::unordered_map<const std::byte*, std::size_t> index_;  // storage -> buffers_ index
  std::map<SizeKey, std::vector<std::size_t>> free_;         // buffers_ indices
};

}  // namespace qflow
