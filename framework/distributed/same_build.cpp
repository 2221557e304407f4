// The same-build check of a distributed run: identities gathered on rank 0, the verdict broadcast.
#include "framework/distributed/same_build.h"

#include <sstream>
#include <vector>

namespace qflow {

namespace {

constexpr int kIdentityTag = 7101;

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> lines;
  std::istringstream in(text);
  for (std::string line; std::getline(in, line);) lines.push_back(line);
  return lines;
}

// "" when equal; otherwise what rank `rank` has where rank 0 has something else.
std::string difference(int rank, const std::string& root, const std::string& other) {
  const std::vector<std::string> a = lines_of(root), b = lines_of(other);
  for (std::size_t i = 0; i < a.size() || i < b.size(); ++i) {
    const std::string mine = i < a.size() ? a[i] : "(nothing)";
    const std::string theirs = i < b.size() ? b[i] : "(nothing)";
    if (mine != theirs)
      return "rank " + std::to_string(rank) + " runs a different qflow build or plugin set than rank 0: rank 0 has '" +
             mine + "', rank " + std::to_string(rank) + " has '" + theirs + "'";
  }
  return "";
}

}  // namespace

Status check_same_build(const World& world, const std::string& identity) {
  if (!world.distributed()) return Status::ok();
  std::string verdict;
  if (world.is_root()) {
    for (int rank = 1; rank < world.size(); ++rank) {
      const std::string other = world.receive(rank, kIdentityTag);
      if (verdict.empty()) verdict = difference(rank, identity, other);
    }
  } else {
    world.send(0, kIdentityTag, identity);
  }
  world.broadcast_from_root(verdict);
  return verdict.empty() ? Status::ok() : invalid_input(verdict);
}

}  // namespace qflow
