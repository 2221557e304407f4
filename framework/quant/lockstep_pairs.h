// LockstepPairs: two runs of one sample (the float model and the QDQ model) that produce
// the same tensors, each compared the moment both runs have produced it. A tensor one run
// produced first waits for its partner; a run whose waiting tensors exceed a byte budget
// pauses until the other run catches up, so a sample never holds more than about the
// budget, however large its activations.
#pragma once

#include <condition_variable>
#include <cstddef>
#include <mutex>
#include <optional>
#include <unordered_map>

#include "qflow/core/status.h"
#include "qflow/ir/tensor.h"

namespace qflow {

class LockstepPairs {
 public:
  enum Side { Float = 0, Qdq = 1 };

  explicit LockstepPairs(std::size_t budget_bytes = std::size_t{256} << 20) : budget_(budget_bytes) {}

  // `side` produced pair `index`: returns the other side's tensor when it is already there
  // (the caller compares the two), otherwise keeps `tensor` and returns nothing.
  std::optional<Tensor> deposit(Side side, std::size_t index, const Tensor& tensor);
  // Pauses `side` while its waiting tensors exceed the budget and the other side can still
  // catch up (it is running and not paused itself: the two never pause together). Fails
  // when the other side failed, so a broken run stops its partner.
  Status wait_for_room(Side side);
  // `side` ran to its end (or failed): the other side never waits for it again.
  void finish(Side side, bool ok);
  // The side that failed first (the other then failed because of it), if any.
  std::optional<Side> first_failed() const;
  // A pair the QDQ run produced and the float run never did, if any.
  std::optional<std::size_t> unmatched_qdq_row() const;

 private:
  struct State {
    std::unordered_map<std::size_t, Tensor> waiting;
    std::size_t bytes = 0;
    bool paused = false;
    bool finished = false;
    bool failed = false;
  };

  std::size_t budget_;
  mutable std::mutex mutex_;
  std::condition_variable changed_;
  State sides_[2];
  std::optional<Side> first_failed_;
};

}  // namespace qflow
