// share_units: each rank sends rank 0 its units in unit order (values, or the failure); rank 0
// answers every rank with all values, or with the first failure in unit order.
#include "framework/distributed/share_units.h"

#include <cstdint>
#include <cstring>
#include <string>
#include <string_view>

namespace qflow {

namespace {

constexpr char kValues = 'V', kFailed = 'E';

// The bytes of the messages: doubles copied bit for bit (results must be identical on every
// rank), statuses, kind bytes.
class MessageWriter {
 public:
  void byte(char c) { bytes_.push_back(c); }
  void doubles(const double* values, std::size_t n) {
    bytes_.append(reinterpret_cast<const char*>(values), n * sizeof(double));
  }
  void status(const Status& status) {
    byte(static_cast<char>(status.code()));
    const uint64_t size = status.message().size();
    bytes_.append(reinterpret_cast<const char*>(&size), sizeof size);
    bytes_ += status.message();
  }
  std::string& bytes() { return bytes_; }

 private:
  std::string bytes_;
};

// Reads what MessageWriter wrote; every read returns false when the message ends early.
// `bytes` must outlive the reader.
class MessageReader {
 public:
  explicit MessageReader(std::string_view bytes) : bytes_(bytes) {}
  bool byte(char& c) {
    if (bytes_.empty()) return false;
    c = bytes_[0];
    bytes_.remove_prefix(1);
    return true;
  }
  bool doubles(double* values, std::size_t n) {
    if (bytes_.size() < n * sizeof(double)) return false;
    std::memcpy(values, bytes_.data(), n * sizeof(double));
    bytes_.remove_prefix(n * sizeof(double));
    return true;
  }
  bool status(Status& status) {
    char code = 0;
    uint64_t size = 0;
    if (!byte(code) || bytes_.size() < sizeof size) return false;
    std::memcpy(&size, bytes_.data(), sizeof size);
    bytes_.remove_prefix(sizeof size);
    if (bytes_.size() < size) return false;
    status = Status(static_cast<StatusCode>(code), std::string(bytes_.substr(0, size)));
    bytes_.remove_prefix(size);
    return true;
  }
  bool done() const { return bytes_.empty(); }

 private:
  std::string_view bytes_;
};

}  // namespace

Status share_units(const World& world, int tag, std::size_t width, const std::function<int(std::size_t)>& owner,
                   std::vector<double>& values, std::vector<Status>& failures) {
  const std::size_t units = failures.size();
  auto first_failure = [&]() -> Status {
    for (const Status& s : failures)
      if (!s.is_ok()) return s;
    return Status::ok();
  };
  if (!world.distributed()) return first_failure();
  auto write_unit = [&](MessageWriter& out, std::size_t i) { out.doubles(values.data() + i * width, width); };
  auto read_unit = [&](MessageReader& in, std::size_t i) { return in.doubles(values.data() + i * width, width); };
  MessageWriter answer;
  if (world.is_root()) {
    for (int rank = 1; rank < world.size(); ++rank) {
      const std::string message = world.receive(rank, tag);
      MessageReader in(message);
      for (std::size_t i = 0; i < units; ++i) {
        if (owner(i) != rank) continue;
        char kind = 0;
        bool read = in.byte(kind);
        if (read && kind == kValues) read = read_unit(in, i);
        else if (read) read = in.status(failures[i]);
        if (!read) {
          failures[i] = internal_error("rank " + std::to_string(rank) + " sent a short message");
          break;
        }
      }
    }
    const Status failure = first_failure();
    answer.byte(failure.is_ok() ? kValues : kFailed);
    if (failure.is_ok()) answer.doubles(values.data(), values.size());
    else answer.status(failure);
  } else {
    MessageWriter mine;
    for (std::size_t i = 0; i < units; ++i) {
      if (owner(i) != world.rank()) continue;
      mine.byte(failures[i].is_ok() ? kValues : kFailed);
      if (failures[i].is_ok()) write_unit(mine, i);
      else mine.status(failures[i]);
    }
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

namespace {

// share_units over `width` values per sample (failures.size() samples), each rank owning its
// my_slice.
Status share_sample_rows(const World& world, int tag, std::size_t width, std::vector<double>& values,
                         std::vector<Status>& failures) {
  const auto n = static_cast<int64_t>(failures.size());
  std::vector<int> owners(failures.size(), 0);
  if (world.distributed())
    for (int rank = 0; rank < world.size(); ++rank) {
      const ShardRange slice = shard_range(n, rank, world.size());
      for (int64_t i = slice.begin; i < slice.end; ++i) owners[static_cast<std::size_t>(i)] = rank;
    }
  return share_units(world, tag, width, [&](std::size_t i) { return owners[i]; }, values, failures);
}

}  // namespace

Status share_slices(const World& world, int tag, std::vector<double>& values, const Status& own) {
  if (!world.distributed()) return own;
  const auto n = static_cast<int64_t>(values.size());
  std::vector<Status> failures(values.size(), Status::ok());
  const ShardRange mine = my_slice(&world, n);
  // A rank without samples has run nothing that could fail on its own.
  if (!own.is_ok() && mine.begin < mine.end) failures[static_cast<std::size_t>(mine.begin)] = own;
  return share_sample_rows(world, tag, 1, values, failures);
}

SliceSweep::SliceSweep(const World* world, int64_t count)
    : world_(world && world->distributed() ? world : nullptr),
      slice_(my_slice(world_, count)),
      next_(slice_.begin),
      failures_(world_ ? static_cast<std::size_t>(count) : 0, Status::ok()) {}

void SliceSweep::failed(int64_t index, Status failure) {
  if (!own_.is_ok()) return;
  own_ = std::move(failure);
  if (world_) failures_[static_cast<std::size_t>(index)] = own_;
}

Status SliceSweep::finish(const Status& swept, int tag, std::size_t width, std::vector<double>& rows) {
  if (!world_) return own_.is_ok() ? swept : own_;
  if (!swept.is_ok() && own_.is_ok() && next_ < slice_.end) failed(next_, swept);
  return share_sample_rows(*world_, tag, width, rows, failures_);
}

}  // namespace qflow
