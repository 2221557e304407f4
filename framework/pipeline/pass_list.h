// Pass lists: the textual form a `passes` stage runs ("constant-folding,fold-batchnorm<...>"),
// with named pass pipelines expanded in place, checked against the loaded passes.
#pragma once

#include <string>
#include <string_view>
#include <vector>

#include "framework/pipeline/pipeline.h"
#include "qflow/core/status.h"
#include "qflow/plugin/options.h"

namespace qflow {

// One pass of an expanded list.
struct PassInvocation {
  std::string name;                // the pass component
  std::vector<std::string> items;  // its options as written: "key=value"
  Options options;                 // the items parsed with the declared types (no defaults)
  std::string pipeline;            // the named pipeline it came from, outermost; "" if written directly
};

// Grammar: list := item ("," item)*; item := name ["<" key=value (";" key=value)* ">"].
// Spaces around names, items and options are ignored; a name is a pass or a named pass
// pipeline (which takes no options), expanded recursively. Errors name the list (`where`) and
// the item: unknown names with a did-you-mean, bad options, a pipeline that includes itself.
Expected<std::vector<PassInvocation>> expand_pass_list(std::string_view text, const ComponentCatalog& catalog,
                                                       const std::string& where);

// The named pipelines `text` uses, directly or through others, in first-use order.
std::vector<const PassPipelineInfo*> pass_pipelines_used(std::string_view text, const ComponentCatalog& catalog);

// "fold-batchnorm", "cross-layer-equalization<iterations=4>".
std::string pass_invocation_text(const PassInvocation& pass);

}  // namespace qflow
