// How a dataset feeds a model: which source each model input takes, the shape it is fed
// with, and the feeds (input name -> tensor) of one sample.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "framework/data/dataset.h"
#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

struct InputFeed {
  std::string input;       // the model input
  std::size_t source = 0;  // index into Dataset::sources
  Shape shape;             // feed_shape() of the source's samples for this input
};
using InputBinding = std::vector<InputFeed>;
using Feeds = std::map<std::string, Tensor>;

// Binds every runtime input of `graph` to a source: an unnamed source to the model's only
// input, named ones by name. Fails on a model input without samples, a source naming no
// model input, or samples whose dtype or static dimensions do not fit their input.
Expected<InputBinding> bind_inputs(const Graph& graph, const Dataset& dataset);

// The feeds of one sample (`samples` as for_each_sample hands them out).
Feeds make_feeds(const InputBinding& binding, const std::vector<Tensor>& samples);

// Calls `visit(index, feeds)` for samples [begin, end), as for_each_sample_in.
using FeedVisitor = std::function<Status(int64_t index, const Feeds& feeds)>;
Status for_each_feed_in(const Dataset& dataset, const InputBinding& binding, int64_t begin, int64_t end,
                        const FeedVisitor& visit);

// The feeds of the first `limit` samples (all with 0), kept in memory for analyses that run
// them many times.
Expected<std::vector<Feeds>> read_feeds(const Dataset& dataset, const InputBinding& binding, int64_t limit);

}  // namespace qflow
