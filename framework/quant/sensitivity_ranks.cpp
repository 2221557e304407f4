// Sharing the output ranking's cosines between ranks: each rank sends rank 0 its candidates'
// results in candidate order; rank 0 answers every rank with all of them, or with the first
// failure in candidate order.
#include "framework/quant/sensitivity_ranks.h"

#include <string>

#include "framework/distributed/message.h"

namespace qflow {

namespace {

constexpr int kCosinesTag = 7201;
constexpr char kCosines = 'C', kFailed = 'E';

}  // namespace

Status share_candidate_cosines(const World& world, CandidateCosines cosines) {
  if (!world.distributed()) return Status::ok();
  const std::size_t count = cosines.status.size();
  const auto ranks = static_cast<std::size_t>(world.size());
  auto put = [&](MessageWriter& out, std::size_t i) {
    out.doubles(cosines.weight[i].data(), cosines.weight[i].size());
    out.doubles(cosines.activation[i].data(), cosines.activation[i].size());
  };
  auto get = [&](MessageReader& in, std::size_t i) {
    return in.doubles(cosines.weight[i].data(), cosines.weight[i].size()) &&
           in.doubles(cosines.activation[i].data(), cosines.activation[i].size());
  };
  MessageWriter answer;
  if (world.is_root()) {
    for (int rank = 1; rank < world.size(); ++rank) {
      const std::string message = world.receive(rank, kCosinesTag);
      MessageReader in(message);
      for (std::size_t i = static_cast<std::size_t>(rank); i < count; i += ranks) {
        char kind = 0;
        bool read = in.byte(kind);
        if (read && kind == kCosines) read = get(in, i);
        else if (read) read = in.status(cosines.status[i]);
        if (!read) {
          cosines.status[i] = internal_error("rank " + std::to_string(rank) + " sent a short sensitivity message");
          break;
        }
      }
    }
    std::size_t failed = count;
    for (std::size_t i = 0; i < count && failed == count; ++i)
      if (!cosines.status[i].is_ok()) failed = i;
    if (failed < count) {
      answer.byte(kFailed);
      answer.status(cosines.status[failed]);
    } else {
      answer.byte(kCosines);
      for (std::size_t i = 0; i < count; ++i) put(answer, i);
    }
  } else {
    MessageWriter mine;
    for (std::size_t i = static_cast<std::size_t>(world.rank()); i < count; i += ranks) {
      mine.byte(cosines.status[i].is_ok() ? kCosines : kFailed);
      if (cosines.status[i].is_ok()) put(mine, i);
      else mine.status(cosines.status[i]);
    }
    world.send(0, kCosinesTag, mine.bytes());
  }
  world.broadcast_from_root(answer.bytes());
  MessageReader in(answer.bytes());
  char kind = 0;
  if (!in.byte(kind)) return internal_error("rank 0 sent no sensitivity answer");
  if (kind == kFailed) {
    Status failure = Status::ok();
    if (!in.status(failure)) return internal_error("rank 0 sent a short sensitivity answer");
    return failure;
  }
  for (std::size_t i = 0; i < count; ++i)
    if (!get(in, i)) return internal_error("rank 0 sent a short sensitivity answer");
  return in.done() ? Status::ok() : internal_error("rank 0 sent a long sensitivity answer");
}

}  // namespace qflow
