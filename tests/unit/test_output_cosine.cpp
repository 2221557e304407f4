// Unit tests for the output cosine's two forms (framework/quant/output_cosine).
#include <doctest/doctest.h>

#include <cmath>
#include <vector>

#include "framework/quant/output_cosine.h"

namespace qflow {

namespace {

using Tensors = std::vector<const Tensor*>;

std::vector<float> wave(std::size_t n, double step, double shift) {
  std::vector<float> v(n);
  for (std::size_t i = 0; i < n; ++i) v[i] = static_cast<float>(std::sin(step * static_cast<double>(i) + shift) * 3.7);
  return v;
}

}  // namespace

TEST_CASE("output cosine: the tensor form equals the flat form to the last bit") {
  const std::vector<float> a = wave(1000, 0.37, 0.1);
  const Tensor first = Tensor::from_vector<float>({3, 100}, wave(300, 0.41, 0.3));
  const Tensor second = Tensor::from_vector<float>({700}, wave(700, 0.29, 1.1));
  std::vector<double> halves(700);
  for (std::size_t i = 0; i < halves.size(); ++i) halves[i] = std::cos(0.013 * static_cast<double>(i)) * 1.3;
  const Tensor wide = Tensor::from_vector<double>({700}, halves);
  // Sums of a thousand products in double differ in the last bits when reordered: equality
  // here means the same order.
  CHECK(cosine_similarity(a, Tensors{&first, &second}) == cosine_similarity(a, flatten_sample_outputs({first, second})));
  CHECK(cosine_similarity(a, Tensors{&first, &wide}) == cosine_similarity(a, flatten_sample_outputs({first, wide})));
  // A size mismatch is 0, both zero is 1, one zero is 0: as the flat form.
  CHECK(cosine_similarity(a, Tensors{&first}) == 0.0);
  const Tensor zeros = Tensor::from_vector<float>({4}, {0.0f, 0.0f, 0.0f, 0.0f});
  CHECK(cosine_similarity(std::vector<float>(4, 0.0f), Tensors{&zeros}) == 1.0);
  CHECK(cosine_similarity(std::vector<float>{1.0f, 0.0f, 0.0f, 0.0f}, Tensors{&zeros}) == 0.0);
}

}  // namespace qflow
