// TensorArena and the executor's arenas kept across runs: buffers come back only when
// nobody holds them, results handed to the caller are never overwritten by a later run.
#include <algorithm>
#include <cstdint>
#include <map>
#include <string>
#include <thread>
#include <vector>

#include <doctest/doctest.h>

#include "framework/interpreter/executor.h"
#include "framework/interpreter/tensor_arena.h"
#include "qflow/ir/graph.h"

namespace qflow {
namespace {

std::vector<float> noise(int64_t n, uint32_t seed) {
  std::vector<float> v(static_cast<std::size_t>(n));
  uint32_t s = seed;
  for (float& x : v) {
    s = s * 1664525u + 1013904223u;
    x = static_cast<float>(static_cast<int32_t>(s >> 8) % 2001 - 1000) / 500.0f;
  }
  return v;
}

std::map<std::string, Tensor> feed(uint32_t seed) {
  return {{"x", Tensor::from_vector<float>({2, 3, 4, 4}, noise(96, seed))}};
}

TEST_CASE("TensorArena: a released buffer is reused within a run and after reclaim") {
  TensorArena arena;
  auto a = arena.acquire(DType::Float32, {4, 8});
  REQUIRE(a.has_value());
  const std::byte* storage = a->raw_data();
  arena.retain(*a);
  // Live: another acquire of the same size gets new storage.
  auto b = arena.acquire(DType::Float32, {32});
  REQUIRE(b.has_value());
  CHECK(b->raw_data() != storage);
  arena.retain(*b);
  arena.release(*a);
  // Dead: the next acquire of that size takes it, whatever the shape.
  auto c = arena.acquire(DType::Float32, {2, 16});
  REQUIRE(c.has_value());
  CHECK(c->raw_data() == storage);
  CHECK(c->shape() == Shape{2, 16});
  // Another dtype or size never shares it.
  auto d = arena.acquire(DType::Int32, {32});
  REQUIRE(d.has_value());
  CHECK(d->raw_data() != storage);

  // End of the run: nobody but the arena holds the buffers any more.
  const std::byte* b_storage = b->raw_data();
  a = Tensor();
  b = Tensor();
  c = Tensor();
  d = Tensor();
  arena.reclaim();
  CHECK(arena.buffer_count() == 3);
  auto again = arena.acquire(DType::Float32, {32});
  REQUIRE(again.has_value());
  CHECK((again->raw_data() == storage || again->raw_data() == b_storage));
}

TEST_CASE("TensorArena: a buffer the caller still holds is never handed out again") {
  TensorArena arena;
  Tensor kept = arena.acquire(DType::Float32, {16}).value();
  arena.retain(kept);
  std::vector<float> before(kept.data<float>(), kept.data<float>() + 16);
  arena.reclaim();  // `kept` is still held here, as a graph output returned by run() is
  CHECK(arena.buffer_count() == 0);
  for (int run = 0; run < 3; ++run) {
    Tensor t = arena.acquire(DType::Float32, {16}).value();
    CHECK(t.raw_data() != kept.raw_data());
    arena.retain(t);
    arena.release(t);
    t = Tensor();
    arena.reclaim();
  }
  CHECK(arena.buffer_count() == 1);
}

TEST_CASE("TensorArena: free buffers no run asked for are dropped; sizes are still checked") {
  TensorArena arena;
  Tensor a = arena.acquire(DType::Float32, {16}).value();
  Tensor b = arena.acquire(DType::Float32, {8}).value();
  a = Tensor();
  b = Tensor();
  arena.reclaim();
  CHECK(arena.buffer_count() == 2);
  Tensor c = arena.acquire(DType::Float32, {16}).value();  // only the 16-element buffer is used
  c = Tensor();
  arena.reclaim();
  CHECK(arena.buffer_count() == 1);
  // The checks of Tensor::make apply: no allocation above the limit, no negative sizes.
  CHECK_FALSE(arena.acquire(DType::Float32, {int64_t{1} << 40}).has_value());
  CHECK_FALSE(arena.acquire(DType::Float32, {-1, 4}).has_value());
}

// x -> Relu -> Sigmoid -> Add(x) -> Neg -> Reshape -> y, every intermediate the same size
// so the arena recycles them; y is a view of the Neg output's buffer.
Model chain_model() {
  Model model;
  model.opset_imports.push_back({"", 17});
  Graph& g = *model.graph;
  auto value = [&](const char* name) { return g.get_or_create_value(name); };
  Value* x = value("x");
  g.inputs.push_back(x);
  Value* shape = value("shape");
  g.set_initializer(shape, Tensor::from_vector<int64_t>({2}, {6, 16}));
  g.add_node("Relu", {x}, {value("a")}, "relu");
  g.add_node("Sigmoid", {value("a")}, {value("b")}, "sigmoid");
  g.add_node("Add", {value("b"), x}, {value("c")}, "add");
  g.add_node("Neg", {value("c")}, {value("d")}, "neg");
  g.add_node("Reshape", {value("d"), shape}, {value("y")}, "reshape");
  g.add_node("Sigmoid", {value("d")}, {value("z")}, "sigmoid_z");
  g.outputs = {value("y"), value("z")};
  return model;
}

std::map<std::string, Tensor> run(const Executor& ex, const std::map<std::string, Tensor>& feeds) {
  auto out = ex.run(feeds);
  REQUIRE_MESSAGE(out.has_value(), out.status().message());
  return *out;
}

TEST_CASE("Executor: results of one run stay unchanged after the next runs") {
  const Model model = chain_model();
  for (int threads : {1, 2}) {
    ExecutorOptions options;
    options.threads = threads;
    auto ex = Executor::create(model, options);
    REQUIRE(ex.has_value());
    std::vector<std::map<std::string, Tensor>> results, copies;
    for (uint32_t seed = 1; seed <= 4; ++seed) {
      results.push_back(run(**ex, feed(seed)));
      copies.push_back({{"y", results.back().at("y").clone()}, {"z", results.back().at("z").clone()}});
    }
    for (std::size_t i = 0; i < results.size(); ++i) {
      CHECK(results[i].at("y").bitwise_equal(copies[i].at("y")));
      CHECK(results[i].at("z").bitwise_equal(copies[i].at("z")));
    }
    // Dropping one result does not disturb the others.
    results[1].clear();
    run(**ex, feed(9));
    CHECK(results[0].at("y").bitwise_equal(copies[0].at("y")));
    CHECK(results[2].at("z").bitwise_equal(copies[2].at("z")));
  }
}

TEST_CASE("Executor: runs on recycled, unzeroed buffers give the bytes of a fresh executor") {
  const Model model = chain_model();
  auto reused = Executor::create(model);
  REQUIRE(reused.has_value());
  for (uint32_t seed = 11; seed <= 16; ++seed) {
    auto fresh = Executor::create(model);
    REQUIRE(fresh.has_value());
    const auto expected = run(**fresh, feed(seed));
    // A result dropped at once returns its buffer, so the next run writes over old values.
    const auto got = run(**reused, feed(seed));
    CHECK(got.at("y").bitwise_equal(expected.at("y")));
    CHECK(got.at("z").bitwise_equal(expected.at("z")));
  }
}

TEST_CASE("Executor: a value a hook keeps is never reused; values it only reads are") {
  const Model model = chain_model();
  auto ex = Executor::create(model);
  REQUIRE(ex.has_value());
  for (uint32_t seed = 21; seed <= 23; ++seed) {
    // Keeps every value it sees, with a copy of its bytes at that moment.
    std::vector<std::pair<Tensor, Tensor>> kept;
    auto keep = [&](const Value&, const Tensor& t) {
      kept.emplace_back(t, t.clone());
      return Status::ok();
    };
    auto out = (*ex)->run(feed(seed), keep);
    REQUIRE_MESSAGE(out.has_value(), out.status().message());
    REQUIRE(kept.size() >= 6);
    for (const auto& [held, at_hook] : kept) CHECK(held.bitwise_equal(at_hook));
  }
  // A hook that only reads: the run recycles buffers as a hook-less one does, and a later
  // run with a keeping hook is still correct.
  std::vector<const std::byte*> storages;
  auto look = [&](const Value&, const Tensor& t) {
    storages.push_back(t.raw_data());
    return Status::ok();
  };
  REQUIRE((*ex)->run(feed(31), look).has_value());
  std::sort(storages.begin(), storages.end());
  const auto distinct = std::unique(storages.begin(), storages.end()) - storages.begin();
  CHECK(distinct < static_cast<std::ptrdiff_t>(storages.size()));
}

TEST_CASE("Executor: concurrent runs each use their own arena") {
  const Model model = chain_model();
  auto ex = Executor::create(model);
  REQUIRE(ex.has_value());
  std::vector<std::map<std::string, Tensor>> expected;
  for (uint32_t seed = 0; seed < 2; ++seed) expected.push_back(run(**ex, feed(100 + seed)));
  std::vector<int> mismatches(2, 0);
  auto worker = [&](uint32_t seed) {
    for (int i = 0; i < 200; ++i) {
      auto out = (*ex)->run(feed(100 + seed));
      if (!out || !out->at("y").bitwise_equal(expected[seed].at("y")) || !out->at("z").bitwise_equal(expected[seed].at("z")))
        ++mismatches[seed];
    }
  };
  std::thread a(worker, 0u), b(worker, 1u);
  a.join();
  b.join();
  CHECK(mismatches[0] == 0);
  CHECK(mismatches[1] == 0);
}

}  // namespace
}  // namespace qflow
