// Edit distance and the closeness rule behind every "did you mean" hint.
#include "qflow/core/suggest.h"

#include <algorithm>

namespace qflow {

std::size_t edit_distance(std::string_view a, std::string_view b) {
  std::vector<std::size_t> row(b.size() + 1);
  for (std::size_t j = 0; j <= b.size(); ++j) row[j] = j;
  for (std::size_t i = 1; i <= a.size(); ++i) {
    std::size_t diagonal = row[0];
    row[0] = i;
    for (std::size_t j = 1; j <= b.size(); ++j) {
      const std::size_t above = row[j];
      row[j] = std::min({row[j] + 1, row[j - 1] + 1, diagonal + (a[i - 1] == b[j - 1] ? 0 : 1)});
      diagonal = above;
    }
  }
  return row[b.size()];
}

bool is_similar_name(std::string_view name, std::string_view candidate) {
  return edit_distance(candidate, name) <= std::max<std::size_t>(2, name.size() / 3);
}

std::vector<std::string> similar_names(std::string_view name, const std::vector<std::string>& candidates) {
  std::vector<std::string> close;
  for (const std::string& candidate : candidates)
    if (is_similar_name(name, candidate)) close.push_back(candidate);
  std::sort(close.begin(), close.end());
  close.erase(std::unique(close.begin(), close.end()), close.end());
  return close;
}

}  // namespace qflow
