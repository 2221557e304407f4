// share_slices: each rank sends rank 0 its slice (or its failure); rank 0 answers every rank
// with the whole vector, or the failure of the lowest rank.
#include "framework/distributed/share_slices.h"

#include <string>

#include "framework/distributed/message.h"

namespace qflow {

namespace {

constexpr char kValues = 'V', kFailed = 'E';

}  // namespace

Status share_slices(const World& world, int tag, std::vector<double>& values, const Status& own) {
  if (!world.distributed()) return own;
  const auto n = static_cast<int64_t>(values.size());
  MessageWriter answer;
  if (world.is_root()) {
    Status failure = own;
    for (int rank = 1; rank < world.size(); ++rank) {
      const std::string message = world.receive(rank, tag);
      if (!failure.is_ok()) continue;  // the lowest failing rank's; the rest is only drained
      MessageReader in(message);
      const ShardRange theirs = shard_range(n, rank, world.size());
      char kind = 0;
      bool read = in.byte(kind);
      if (read && kind == kValues) read = in.doubles(values.data() + theirs.begin, static_cast<std::size_t>(theirs.end - theirs.begin));
      else if (read) read = in.status(failure);
      if (!read) failure = internal_error("rank " + std::to_string(rank) + " sent a short message");
    }
    answer.byte(failure.is_ok() ? kValues : kFailed);
    if (failure.is_ok()) answer.doubles(values.data(), values.size());
    else answer.status(failure);
  } else {
    MessageWriter mine;
    const ShardRange slice = my_slice(&world, n);
    mine.byte(own.is_ok() ? kValues : kFailed);
    if (own.is_ok()) mine.doubles(values.data() + slice.begin, static_cast<std::size_t>(slice.end - slice.begin));
    else mine.status(own);
    world.send(0, tag, mine.bytes());
  }
  world.broadcast_from_root(answer.bytes());
  MessageReader in(answer.bytes());
  char kind = 0;
  if (!in.byte(kind)) return internal_error("rank 0 sent no answer");
  if (kind == kFailed) {
    Status failure = Status::ok();
    if (!in.status(failure)) return internal_error("rank 0 sent a short answer");
    return failure;
  }
  if (!in.doubles(values.data(), values.size()) || !in.done()) return internal_error("rank 0 sent an answer of another size");
  return Status::ok();
}

}  // namespace qflow
