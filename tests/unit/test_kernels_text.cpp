// TfIdfVectorizer: skip-grams, and the IDF and TFIDF weightings the node tests leave out.
#include <doctest/doctest.h>

#include <vector>

#include "tests/unit/node_runner.h"

using namespace qflow;
using qflow::testing::run_first_output;
using qflow::testing::run_single_node;
using qflow::testing::single_node;

namespace {

// Unigrams {7}, {8} in slots 0 and 1, the bigram {7, 8} in slot 2.
std::vector<float> vectorize(const std::string& mode, int64_t max_skip, std::vector<float> weights = {}) {
  std::vector<Attribute> attributes = {
      Attribute::make_int("min_gram_length", 1),          Attribute::make_int("max_gram_length", 2),
      Attribute::make_int("max_skip_count", max_skip),    Attribute::make_string("mode", mode),
      Attribute::make_ints("ngram_counts", {0, 2}),       Attribute::make_ints("ngram_indexes", {0, 1, 2}),
      Attribute::make_ints("pool_int64s", {7, 8, 7, 8}),
  };
  if (!weights.empty()) attributes.push_back(Attribute::make_floats("weights", weights));
  const Tensor x = Tensor::from_vector<int64_t>({5}, {7, 8, 7, 9, 8});
  const Tensor y = run_first_output(single_node("TfIdfVectorizer", {x}, attributes, 9));
  REQUIRE(y.shape() == Shape{3});
  return std::vector<float>(y.span<float>().begin(), y.span<float>().end());
}

}  // namespace

TEST_CASE("TfIdfVectorizer counts skip-grams once per distance and unigrams once") {
  CHECK(vectorize("TF", 0) == std::vector<float>{2, 2, 1});
  // Distance 2 adds the bigram at positions 2 and 4; unigrams are not counted again.
  CHECK(vectorize("TF", 1) == std::vector<float>{2, 2, 2});
}

TEST_CASE("TfIdfVectorizer IDF and TFIDF weigh the counts per output slot") {
  CHECK(vectorize("TFIDF", 1, {0.5f, 1.0f, 3.0f}) == std::vector<float>{1, 2, 6});
  CHECK(vectorize("IDF", 1, {0.5f, 1.0f, 3.0f}) == std::vector<float>{0.5f, 1, 3});
  CHECK(vectorize("IDF", 0) == std::vector<float>{1, 1, 1});
}

TEST_CASE("TfIdfVectorizer refuses a pool that does not split into n-grams") {
  const Tensor x = Tensor::from_vector<int64_t>({2}, {1, 2});
  auto out = run_single_node(single_node("TfIdfVectorizer", {x},
                                         {Attribute::make_int("min_gram_length", 1), Attribute::make_int("max_gram_length", 2),
                                          Attribute::make_string("mode", "TF"), Attribute::make_ints("ngram_counts", {0, 1}),
                                          Attribute::make_ints("ngram_indexes", {0, 1}), Attribute::make_ints("pool_int64s", {1, 2, 3, 4})},
                                         9));
  REQUIRE_FALSE(out.has_value());
  CHECK(out.status().message().find("length 2") != std::string::npos);
}
