// Rewrite rules and the greedy driver that applies them (ONNX Runtime's RewriteRule, MLIR's
// greedy pattern rewrite driver): a rule matches cheaply at one node and rewrites once; the
// driver owns the loop, the node order, the cleanup and the counts.
#pragma once

#include <concepts>
#include <cstdint>
#include <map>
#include <memory>
#include <optional>
#include <string>
#include <utility>
#include <vector>

#include "qflow/core/status.h"
#include "qflow/ir/graph.h"

namespace qflow {

// What a rule's match object must carry: the nodes of the matched pattern. After the
// rewrite the driver erases those of them left without a reader, then the initializers and
// Constant nodes that only the pattern's nodes read.
template <typename M>
concept PatternMatch = requires(const M& match) {
  { match.nodes } -> std::convertible_to<std::vector<Node*>>;
};

// The driver's view of a rule, whatever its match type. Write rules as RewriteRule<M>.
class AnyRewriteRule {
 public:
  virtual ~AnyRewriteRule() = default;
  // Kebab-case; the key of the rule's count in RewriteReport.
  virtual std::string name() const = 0;

 private:
  friend class GreedyRewriter;
  // Matches at `node` and keeps the match for rewrite_pending; returns the pattern's nodes.
  virtual std::optional<std::vector<Node*>> match_pending(const Model& model, Node& node) = 0;
  virtual Status rewrite_pending(Model& model) = 0;
};

// A rule: `match` inspects one node as the root (or anchor) of its pattern and changes
// nothing; `rewrite` is applied once to a match that `match` just returned.
template <PatternMatch M>
class RewriteRule : public AnyRewriteRule {
 public:
  using Match = M;
  virtual std::optional<M> match(const Model& model, Node& node) const = 0;
  virtual Status rewrite(Model& model, M& match) const = 0;

 private:
  std::optional<std::vector<Node*>> match_pending(const Model& model, Node& node) final {
    pending_ = match(model, node);
    if (!pending_) return std::nullopt;
    return std::vector<Node*>(pending_->nodes.begin(), pending_->nodes.end());
  }
  Status rewrite_pending(Model& model) final {
    Status status = rewrite(model, *pending_);
    pending_.reset();
    return status;
  }
  std::optional<M> pending_;
};

// Turns `node` into `op_type`/`domain` with the given inputs and no attributes, keeping its
// name, outputs and place in the node order (so the graph stays topologically sorted).
void replace_op(Node& node, const std::string& op_type, const std::string& domain, const std::vector<Value*>& inputs);

struct RewriteOptions {
  // Sweeps over the graph at most; a sweep that rewrites nothing ends the run earlier.
  int max_iterations = 8;
};

struct RewriteReport {
  std::map<std::string, int64_t> rewrites;  // per rule name, rules that never matched at 0
  int iterations = 0;                        // sweeps run
  bool converged = false;                    // the last sweep rewrote nothing
  int64_t total() const;
};

// Applies rules greedily until nothing matches. A sweep visits the nodes in topological
// order (stable: ties keep the insertion order) and, at each node still in the graph, tries
// the rules in the order they were added; the first that matches rewrites, and the sweep
// moves on. Nodes a rewrite creates are visited from the next sweep on. Deterministic: the
// same graph and rules give the same rewrites in the same order.
class GreedyRewriter {
 public:
  explicit GreedyRewriter(RewriteOptions options = {}) : options_(options) {}

  template <typename Rule, typename... Args>
  Rule& add(Args&&... args) {
    auto rule = std::make_unique<Rule>(std::forward<Args>(args)...);
    Rule& added = *rule;
    rules_.push_back(std::move(rule));
    return added;
  }

  // Fails on a cycle in the graph or when a rewrite fails; unused values are pruned when
  // anything was rewritten.
  Expected<RewriteReport> run(Model& model);

 private:
  RewriteOptions options_;
  std::vector<std::unique_ptr<AnyRewriteRule>> rules_;
};

}  // namespace qflow
