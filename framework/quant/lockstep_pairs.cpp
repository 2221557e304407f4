#include "framework/quant/lockstep_pairs.h"

namespace qflow {

std::optional<Tensor> LockstepPairs::deposit(Side side, std::size_t index, const Tensor& tensor) {
  std::lock_guard<std::mutex> lock(mutex_);
  State& other = sides_[1 - side];
  auto it = other.waiting.find(index);
  if (it == other.waiting.end()) {
    State& self = sides_[side];
    if (self.waiting.emplace(index, tensor).second) self.bytes += tensor.nbytes();
    return std::nullopt;
  }
  Tensor partner = std::move(it->second);
  other.bytes -= partner.nbytes();
  other.waiting.erase(it);
  changed_.notify_all();  // the other side may have room again
  return partner;
}

Status LockstepPairs::wait_for_room(Side side) {
  std::unique_lock<std::mutex> lock(mutex_);
  State& self = sides_[side];
  const State& other = sides_[1 - side];
  while (self.bytes > budget_ && !other.finished && !other.paused) {
    self.paused = true;
    changed_.notify_all();
    changed_.wait(lock);
    self.paused = false;
  }
  if (other.failed) return internal_error("the other run of the sample failed");
  return Status::ok();
}

void LockstepPairs::finish(Side side, bool ok) {
  std::lock_guard<std::mutex> lock(mutex_);
  sides_[side].finished = true;
  sides_[side].failed = !ok;
  if (!ok && !first_failed_) first_failed_ = side;
  changed_.notify_all();
}

std::optional<LockstepPairs::Side> LockstepPairs::first_failed() const {
  std::lock_guard<std::mutex> lock(mutex_);
  return first_failed_;
}

std::optional<std::size_t> LockstepPairs::unmatched_qdq_row() const {
  std::lock_guard<std::mutex> lock(mutex_);
  if (sides_[Qdq].waiting.empty()) return std::nullopt;
  return sides_[Qdq].waiting.begin()->first;
}

}  // namespace qflow
