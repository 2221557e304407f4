// The softmax exponentials: accuracy against std::exp, the edge values, the lane sum, and the
// same bits under every instruction-set cap.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdint>
#include <cstring>
#include <limits>
#include <vector>

#include "framework/interpreter/kernel_isa.h"
#include "framework/interpreter/kernels/softmax_exp.h"
#include "tests/unit/node_runner.h"
#include "tests/unit/test_model_util.h"

using namespace qflow;

namespace {

// Distance in units in the last place between two finite positive doubles.
int64_t ulps(double a, double b) {
  int64_t ia, ib;
  std::memcpy(&ia, &a, sizeof a);
  std::memcpy(&ib, &b, sizeof b);
  return ia > ib ? ia - ib : ib - ia;
}

struct CapReset {
  ~CapReset() { reset_kernel_isa_cap(); }
};

}  // namespace

TEST_CASE("Softmax exponentials: within 2 ulp of std::exp from 0 down to -700, and their sum") {
  std::vector<double> x;
  for (int i = 0; i < 700000; ++i) x.push_back(-0.001 * i - 1e-7 * (i % 97));  // not on a grid of ln 2
  x.push_back(-std::ldexp(1.0, -40));
  x.push_back(-0.34657359027997264);  // ln 2 / 2, where the reduction flips
  std::vector<double> y = x;
  const double sum = exp_in_place_sum(y.data(), static_cast<int64_t>(y.size()));
  int64_t worst = 0;
  double lanes[4] = {};
  for (std::size_t i = 0; i < x.size(); ++i) {
    const double want = std::exp(x[i]);
    REQUIRE(y[i] > 0.0);
    worst = std::max(worst, ulps(y[i], want));
    lanes[i % 4] += y[i];
  }
  CHECK(worst <= 2);
  double expected_sum = (lanes[0] + lanes[1]) + (lanes[2] + lanes[3]);
  CHECK(std::memcmp(&sum, &expected_sum, sizeof sum) == 0);

  std::vector<double> edges = {0.0, -0.0, -700.0, -700.5, -745.2, -1e300, -std::numeric_limits<double>::infinity(),
                               std::numeric_limits<double>::quiet_NaN(), -1.0};
  const double edge_sum = exp_in_place_sum(edges.data(), static_cast<int64_t>(edges.size()));
  CHECK(edges[0] == 1.0);  // exp(0) exactly: the row's maximum
  CHECK(edges[1] == 1.0);
  CHECK(ulps(edges[2], std::exp(-700.0)) <= 2);
  CHECK(edges[3] == 0.0);
  CHECK(edges[4] == 0.0);
  CHECK(edges[5] == 0.0);
  CHECK(edges[6] == 0.0);
  CHECK(std::isnan(edges[7]));
  CHECK(ulps(edges[8], std::exp(-1.0)) <= 2);
  CHECK(std::isnan(edge_sum));
}

TEST_CASE("Softmax exponentials and the Softmax node give the same bits under every cap") {
  CapReset reset;
  for (const int64_t n : {1, 3, 4, 7, 6625}) {
    INFO("n = " << n);
    std::vector<double> x(static_cast<std::size_t>(n));
    for (int64_t i = 0; i < n; ++i) x[static_cast<std::size_t>(i)] = -std::fabs(std::sin(0.7 * static_cast<double>(i)) * 30.0);
    std::vector<std::vector<double>> results;
    std::vector<double> sums;
    for (const char* cap : {"portable", "avx2", "native"}) {
      if (!set_kernel_isa_cap(cap, "test").is_ok()) continue;  // a level this CPU lacks
      std::vector<double> y = x;
      sums.push_back(exp_in_place_sum(y.data(), n));
      results.push_back(y);
    }
    REQUIRE(!results.empty());
    for (std::size_t k = 1; k < results.size(); ++k) {
      CHECK(std::memcmp(results[k].data(), results[0].data(), sizeof(double) * x.size()) == 0);
      CHECK(std::memcmp(&sums[k], &sums[0], sizeof(double)) == 0);
    }
  }

  // A recogniser's head: 40 steps of 6625 classes; the node's float outputs match a softmax
  // computed with std::exp and a sequential sum except in the last bit, and sum to 1.
  const int64_t steps = 40, classes = 6625;
  std::vector<float> logits(static_cast<std::size_t>(steps * classes));
  for (std::size_t i = 0; i < logits.size(); ++i)
    logits[i] = static_cast<float>(std::sin(0.013 * static_cast<double>(i)) * 9.0 + std::cos(0.31 * static_cast<double>(i)));
  testing::SingleNode spec;
  spec.op_type = "Softmax";
  spec.inputs = {test::floats({1, steps, classes}, logits)};
  std::vector<Tensor> outputs;
  for (const char* cap : {"portable", "avx2", "native"}) {
    if (!set_kernel_isa_cap(cap, "test").is_ok()) continue;
    auto out = testing::run_single_node(spec);
    REQUIRE(out.has_value());
    outputs.push_back(out->at(0));
  }
  for (const Tensor& t : outputs) CHECK(t.bitwise_equal(outputs[0]));
  const float* got = outputs[0].data<float>();
  int64_t differing = 0;
  for (int64_t s = 0; s < steps; ++s) {
    const float* row = logits.data() + s * classes;
    float mx = row[0];
    for (int64_t c = 1; c < classes; ++c) mx = std::max(mx, row[c]);
    double sum = 0.0, total = 0.0;
    for (int64_t c = 0; c < classes; ++c) sum += std::exp(static_cast<double>(row[c] - mx));
    for (int64_t c = 0; c < classes; ++c) {
      const float want = static_cast<float>(std::exp(static_cast<double>(row[c] - mx)) / sum);
      const float have = got[s * classes + c];
      total += have;
      if (have != want) {
        ++differing;
        CHECK(std::fabs(have - want) <= std::fabs(want) * 1.2e-7f);
      }
    }
    CHECK(total == doctest::Approx(1.0).epsilon(1e-5));
  }
  CHECK(differing < steps * classes / 1000);
}

TEST_CASE("Softmax: a contiguous row gives the bits of the same row laid out with a stride") {
  CapReset reset;
  const float nan = std::numeric_limits<float>::quiet_NaN(), inf = std::numeric_limits<float>::infinity();
  std::vector<std::vector<float>> rows = {
      {0.5f},
      {1.0f, -2.0f, 3.0f},
      {nan, 1.0f, 2.0f, 3.0f, 4.0f},                   // NaN first: every output NaN
      {1.0f, nan, 7.0f, 2.0f, 5.0f, 0.0f, -1.0f},       // NaN inside: skipped by the maximum
      {-inf, -inf, 0.0f, -0.0f, 2.5f, -inf, 1.0f, 2.5f, 2.5f},
      {inf, 1.0f, 2.0f, 3.0f, 4.0f, 5.0f},
      {-0.0f, 0.0f, -0.0f, 0.0f, -0.0f},
  };
  std::vector<float> wide(997);
  for (std::size_t i = 0; i < wide.size(); ++i) wide[i] = static_cast<float>(std::cos(0.05 * static_cast<double>(i)) * 40.0);
  rows.push_back(wide);
  for (const char* cap : {"portable", "avx2", "native"}) {
    if (!set_kernel_isa_cap(cap, "test").is_ok()) continue;
    for (const std::vector<float>& row : rows) {
      const auto n = static_cast<int64_t>(row.size());
      INFO(cap << ", row of " << n);
      testing::SingleNode contiguous;
      contiguous.op_type = "Softmax";
      contiguous.inputs = {test::floats({1, n}, row)};
      // The same values down axis 1 of [1, n, 2] (stride 2), the other column zeros.
      std::vector<float> strided(static_cast<std::size_t>(2 * n), 0.0f);
      for (int64_t i = 0; i < n; ++i) strided[static_cast<std::size_t>(2 * i)] = row[static_cast<std::size_t>(i)];
      testing::SingleNode spaced;
      spaced.op_type = "Softmax";
      spaced.inputs = {test::floats({1, n, 2}, strided)};
      spaced.attributes = {Attribute::make_int("axis", 1)};
      auto a = testing::run_single_node(contiguous);
      auto b = testing::run_single_node(spaced);
      REQUIRE(a.has_value());
      REQUIRE(b.has_value());
      const float* x = a->at(0).data<float>();
      const float* y = b->at(0).data<float>();
      for (int64_t i = 0; i < n; ++i) CHECK(std::memcmp(x + i, y + 2 * i, sizeof(float)) == 0);
    }
  }
}
