// HbmCommand: `qflow hbm info|run FILE`, the bpu plugin's CLI subcommand (a command component).
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "qflow/plugin/command.h"
#include "qflow/plugin/component.h"

namespace qflow {

class HbmCommand final : public Command {
 public:
  static ComponentInfo info();
  static Expected<std::unique_ptr<Command>> create(const Options& options);
  Status run(const std::vector<std::string>& args) const override;
};

}  // namespace qflow
