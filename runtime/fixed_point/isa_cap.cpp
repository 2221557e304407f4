// The process-wide instruction-set cap (QFLOW_ISA, `qflow --isa`); see qflow/runtime/isa_cap.h.
#include "qflow/runtime/isa_cap.h"

#include <atomic>
#include <cstdlib>

namespace qflow::isa {
namespace {

struct EnvCap {
  Level level = Level::native;
  Status status = Status::ok();
};

Status check(std::string_view name, std::string_view source, Level& level) {
  Expected<Level> parsed = parse_level(name);
  if (!parsed) return invalid_input(std::string(source) + "=" + std::string(name) + ": " + parsed.status().message());
  if (!cpu_has(*parsed))
    return invalid_input(std::string(source) + "=" + std::string(name) + ": this CPU lacks the instructions of " +
                         level_name(*parsed) + " (it has: " + cpu_levels() + ")");
  level = *parsed;
  return Status::ok();
}

const EnvCap& env_cap() {
  static const EnvCap cap = [] {
    EnvCap c;
    const char* env = std::getenv("QFLOW_ISA");
    if (env && *env) c.status = check(env, "QFLOW_ISA", c.level);
    return c;
  }();
  return cap;
}

// -1: QFLOW_ISA's cap; else the Level set_cap put in force.
std::atomic<int>& chosen() {
  static std::atomic<int> level{-1};
  return level;
}

}  // namespace

const char* level_name(Level level) {
  switch (level) {
    case Level::portable: return "portable";
    case Level::avx2: return "avx2";
    case Level::avxvnni: return "avxvnni";
    case Level::avx512: return "avx512";
    case Level::native: return "native";
  }
  return "?";
}

Expected<Level> parse_level(std::string_view name) {
  for (const Level l : {Level::portable, Level::avx2, Level::avxvnni, Level::avx512, Level::native})
    if (name == level_name(l)) return l;
  return invalid_input("unknown instruction set; expected portable, avx2, avxvnni, avx512 or native");
}

bool cpu_has(Level level) {
#if defined(__x86_64__) && defined(__GNUC__)
  __builtin_cpu_init();
  switch (level) {
    case Level::portable:
    case Level::native: return true;
    case Level::avx2: return __builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma");
#if defined(__clang__) && __clang_major__ < 16
    case Level::avxvnni: return false;  // no "avxvnni" feature name before clang 16
#else
    case Level::avxvnni: return cpu_has(Level::avx2) && __builtin_cpu_supports("avxvnni");
#endif
    case Level::avx512: return cpu_has(Level::avx2) && __builtin_cpu_supports("avx512f");
  }
  return false;
#else
  return level == Level::portable || level == Level::native;
#endif
}

Level cap() {
  const int level = chosen().load(std::memory_order_relaxed);
  return level >= 0 ? static_cast<Level>(level) : env_cap().level;
}

Status cap_status() { return chosen().load(std::memory_order_relaxed) >= 0 ? Status::ok() : env_cap().status; }

Status set_cap(std::string_view name, std::string_view source) {
  Level level = Level::native;
  if (Status s = check(name, source, level); !s.is_ok()) return s;
  chosen().store(static_cast<int>(level), std::memory_order_relaxed);
  return Status::ok();
}

void reset_cap() { chosen().store(-1, std::memory_order_relaxed); }

std::string cpu_levels() {
  std::string text;
  for (const Level l : {Level::portable, Level::avx2, Level::avxvnni, Level::avx512})
    if (cpu_has(l)) text += (text.empty() ? "" : ", ") + std::string(level_name(l));
  return text;
}

}  // namespace qflow::isa
