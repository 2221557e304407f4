// Unit tests for the output cosine's two forms (framework/quant/output_cosine).
#include <doctest/doctest.h>

#include <cmath>
#include <cstring>
#include <vector>

#include "framework/interpreter/kernel_isa.h"
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

TEST_CASE("output cosine: the same bits under every instruction-set cap, close to one sequential sum") {
  struct Reset {
    ~Reset() { reset_kernel_isa_cap(); }
  } reset;
  const std::vector<float> a = wave(1017, 0.23, 0.4);
  const Tensor p1 = Tensor::from_vector<float>({1}, wave(1, 0.5, 0.2));
  const Tensor p3 = Tensor::from_vector<float>({3}, wave(3, 0.5, 0.9));
  const Tensor p13 = Tensor::from_vector<float>({13}, wave(13, 0.31, 0.7));
  const Tensor rest = Tensor::from_vector<float>({1000}, wave(1000, 0.19, 2.0));
  const std::vector<float> b = flatten_sample_outputs({p1, p3, p13, rest});
  std::vector<double> under;
  for (const char* cap : {"portable", "avx2", "avx512", "native"}) {
    if (!set_kernel_isa_cap(cap, "test").is_ok()) continue;  // a level this CPU lacks
    under.push_back(cosine_similarity(a, b));
    CHECK(cosine_similarity(a, Tensors{&p1, &p3, &p13, &rest}) == under.back());
  }
  REQUIRE(!under.empty());
  for (const double c : under) CHECK(std::memcmp(&c, &under[0], sizeof c) == 0);
  double dot = 0.0, na = 0.0, nb = 0.0;
  for (std::size_t i = 0; i < a.size(); ++i) {
    dot += static_cast<double>(a[i]) * b[i];
    na += static_cast<double>(a[i]) * a[i];
    nb += static_cast<double>(b[i]) * b[i];
  }
  CHECK(under[0] == doctest::Approx(dot / (std::sqrt(na) * std::sqrt(nb))).epsilon(1e-12));
}

}  // namespace qflow
