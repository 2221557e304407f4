// Sharded observation of a dataset: the interpreter runs every sample once per pass, one
// observer per float32 tensor, with shards whose boundaries depend only on the sample count,
// so the merged result is the same for any thread count and batch-size.
#pragma once

#include <cstdint>
#include <functional>
#include <map>
#include <memory>
#include <string>

#include "framework/data/dataset.h"
#include "framework/data/input_feeds.h"
#include "framework/data/progress_bar.h"
#include "framework/distributed/world.h"
#include "framework/interpreter/executor.h"
#include "qflow/core/status.h"
#include "qflow/plugin/observer.h"

namespace qflow {

using ObserverMap = std::map<std::string, std::shared_ptr<Observer>>;
// Makes one fresh observer (of the stage's component and options). Called one at a time.
using ObserverFactory = std::function<Expected<std::shared_ptr<Observer>>()>;

// Samples per shard: small enough that the workers finish a pass together. At 32, the 50
// calibration samples of a PP-OCR run were two shards of 32 and 18, and one of two workers
// sat idle for 14 samples of every pass.
inline constexpr int64_t kObserveShardSamples = 8;

struct ObserveOptions {
  int threads = 1;                  // shards observed at once
  ProgressBar* progress = nullptr;  // advanced by samples done (count * passes in total)
  // The ranks the shards are split over (docs/distributed.md); null: this process alone.
  const World* world = nullptr;
  // Called in pass 0 with each sample's index and the model's outputs of that sample (the
  // run the observers watched), from whichever thread ran it; may be empty.
  std::function<void(int64_t, const std::map<std::string, Tensor>&)> outputs;
};

// Feeds every sample to the model's inputs as `binding` says and observes the float32 graph
// inputs and node outputs. Shards of kObserveShardSamples samples are
// observed by fresh observers on one thread each, in dataset order, read dataset.spec
// .batch_size samples at a time, and merged in shard order. Multi-pass observers: after
// pass k-1 the shards are merged; every shard of pass k starts from a copy of that state
// (make + deserialize(serialize())), gets begin_pass(k), and the copies are merged again.
// An error names the file and sample; with several, the first shard's.
//
// In a distributed world rank r observes only shards [r*S/N, (r+1)*S/N) of the S shards
// (contiguous sample ranges in dataset order, on the same shard boundaries as one process),
// sends each shard's state to rank 0, which merges all S in shard order exactly as one
// process does, and broadcasts the merged state (or the first error in shard order) after
// every pass: every rank returns the same result as one process over all samples.
Expected<ObserverMap> observe_dataset(const Executor& executor, const InputBinding& binding, const Dataset& dataset,
                                      const ObserverFactory& make, const ObserveOptions& options);

}  // namespace qflow
