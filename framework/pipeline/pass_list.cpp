// Pass lists: parsing, named-pipeline expansion and checks against the catalog.
#include "framework/pipeline/pass_list.h"

#include <algorithm>

#include "framework/pipeline/component_options.h"
#include "framework/pipeline/pipeline_text.h"
#include "qflow/core/suggest.h"

namespace qflow {

namespace {

struct RawItem {
  std::string name;
  std::vector<std::string> options;
};

std::string trimmed(std::string_view text) {
  const std::size_t begin = text.find_first_not_of(" \t\n");
  if (begin == std::string_view::npos) return {};
  const std::size_t end = text.find_last_not_of(" \t\n");
  return std::string(text.substr(begin, end - begin + 1));
}

// Splits on `separator` outside <...>.
Expected<std::vector<std::string>> split_top_level(std::string_view text, char separator, const std::string& where) {
  std::vector<std::string> parts;
  int depth = 0;
  std::size_t start = 0;
  for (std::size_t i = 0; i <= text.size(); ++i) {
    const char c = i < text.size() ? text[i] : separator;
    if (c == '<') ++depth;
    if (c == '>' && --depth < 0) return invalid_input(where + ": '>' without '<' in \"" + std::string(text) + "\"");
    if (c == separator && depth == 0) {
      parts.push_back(trimmed(text.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (depth != 0) return invalid_input(where + ": '<' without '>' in \"" + std::string(text) + "\"");
  return parts;
}

Expected<std::vector<RawItem>> parse_items(std::string_view text, const std::string& where) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<std::string> parts, split_top_level(text, ',', where));
  if (parts.size() == 1 && parts[0].empty()) return invalid_input(where + ": the pass list is empty");
  std::vector<RawItem> items;
  for (const std::string& part : parts) {
    if (part.empty()) return invalid_input(where + ": empty item in \"" + std::string(text) + "\" (two commas?)");
    RawItem item;
    const std::size_t open = part.find('<');
    item.name = trimmed(part.substr(0, open));
    if (open != std::string::npos) {
      if (part.back() != '>') return invalid_input(where + ": text after '>' in '" + part + "'");
      const std::string inner = part.substr(open + 1, part.size() - open - 2);
      QFLOW_ASSIGN_OR_RETURN(std::vector<std::string> options, split_top_level(inner, ';', where));
      for (std::string& option : options)
        if (!option.empty()) item.options.push_back(std::move(option));
    }
    if (item.name.empty()) return invalid_input(where + ": an item without a pass name: '" + part + "'");
    items.push_back(std::move(item));
  }
  return items;
}

std::string unknown_name_message(const std::string& name, const ComponentCatalog& catalog, const std::string& where) {
  std::vector<std::string> names;
  for (const ComponentInfo& info : catalog.components())
    if (info.kind == ComponentKind::Pass) names.push_back(info.name);
  for (const PassPipelineInfo& pipeline : catalog.pass_pipelines()) names.push_back(pipeline.name);
  std::string message = where + ": no pass or pass pipeline named '" + name + "'";
  const std::vector<std::string> similar = similar_names(name, names);
  if (!similar.empty()) return message + " (did you mean '" + join(similar, "', '") + "'?)";
  std::sort(names.begin(), names.end());
  return message + " (available: " + (names.empty() ? std::string("none") : join(names, ", ")) + ")";
}

Status expand(std::string_view text, const ComponentCatalog& catalog, const std::string& where,
              std::vector<std::string>& open_pipelines, const std::string& outermost, std::vector<PassInvocation>& out) {
  QFLOW_ASSIGN_OR_RETURN(std::vector<RawItem> items, parse_items(text, where));
  for (RawItem& item : items) {
    if (const PassPipelineInfo* pipeline = catalog.find_pass_pipeline(item.name)) {
      if (!item.options.empty())
        return invalid_input(where + ": pass pipeline '" + item.name + "' takes no options (give them to its passes)");
      if (std::find(open_pipelines.begin(), open_pipelines.end(), item.name) != open_pipelines.end())
        return invalid_input(where + ": pass pipeline '" + item.name + "' includes itself (" + join(open_pipelines, " -> ") +
                             " -> " + item.name + ")");
      open_pipelines.push_back(item.name);
      QFLOW_RETURN_IF_ERROR(expand(pipeline->passes, catalog, where + " (in pass pipeline '" + item.name + "')",
                                   open_pipelines, outermost.empty() ? item.name : outermost, out));
      open_pipelines.pop_back();
      continue;
    }
    const ComponentInfo* info = catalog.find(ComponentKind::Pass, item.name);
    if (!info) return invalid_input(unknown_name_message(item.name, catalog, where));
    QFLOW_ASSIGN_OR_RETURN(Options options, parse_component_options(*info, item.options, where));
    out.push_back({item.name, std::move(item.options), std::move(options), outermost});
  }
  return Status::ok();
}

void collect_pipelines(std::string_view text, const ComponentCatalog& catalog, std::vector<const PassPipelineInfo*>& out) {
  Expected<std::vector<RawItem>> items = parse_items(text, "");
  if (!items) return;
  for (const RawItem& item : *items) {
    const PassPipelineInfo* pipeline = catalog.find_pass_pipeline(item.name);
    if (!pipeline || std::find(out.begin(), out.end(), pipeline) != out.end()) continue;
    out.push_back(pipeline);
    collect_pipelines(pipeline->passes, catalog, out);
  }
}

}  // namespace

Expected<std::vector<PassInvocation>> expand_pass_list(std::string_view text, const ComponentCatalog& catalog,
                                                       const std::string& where) {
  std::vector<PassInvocation> passes;
  std::vector<std::string> open_pipelines;
  QFLOW_RETURN_IF_ERROR(expand(text, catalog, where, open_pipelines, "", passes));
  return passes;
}

std::vector<const PassPipelineInfo*> pass_pipelines_used(std::string_view text, const ComponentCatalog& catalog) {
  std::vector<const PassPipelineInfo*> used;
  collect_pipelines(text, catalog, used);
  return used;
}

std::string pass_invocation_text(const PassInvocation& pass) {
  return pass.items.empty() ? pass.name : pass.name + "<" + join(pass.items, ";") + ">";
}

}  // namespace qflow
