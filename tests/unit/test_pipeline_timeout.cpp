// Unit tests for a stage's `timeout` key: accepted forms, errors with file:line:column, and
// the canonical form that --dry-run prints and parses back.
#include <doctest/doctest.h>

#include <string>

#include "framework/pipeline/pipeline.h"

namespace qflow {

namespace {

std::string stage_with(const std::string& timeout_line) {
  return "[vars]\nt = \"2m\"\n[[stage]]\nid = \"i\"\nuse = \"import-onnx\"\n" + timeout_line + "\n";
}

// The stage's timeout in seconds, or -1 with the message in `error`.
double timeout_of(const std::string& timeout_line, std::string* error = nullptr) {
  Expected<Pipeline> pipeline = parse_pipeline(stage_with(timeout_line), "p.toml");
  if (!pipeline) {
    if (error) *error = pipeline.status().message();
    return -1.0;
  }
  return pipeline->stages.at(0).timeout;
}

std::string error_of(const std::string& timeout_line) {
  std::string error;
  timeout_of(timeout_line, &error);
  return error;
}

}  // namespace

TEST_CASE("pipeline timeout: numbers and durations with a unit") {
  CHECK(timeout_of("") == 0.0);
  CHECK(timeout_of("timeout = 90") == 90.0);
  CHECK(timeout_of("timeout = 1.5") == 1.5);
  CHECK(timeout_of("timeout = \"90s\"") == 90.0);
  CHECK(timeout_of("timeout = \"90\"") == 90.0);
  CHECK(timeout_of("timeout = \"0.5s\"") == 0.5);
  CHECK(timeout_of("timeout = \"1.5m\"") == 90.0);
  CHECK(timeout_of("timeout = \"2h\"") == 7200.0);
  CHECK(timeout_of("timeout = \"${t}\"") == 120.0);
}

TEST_CASE("pipeline timeout: bad values name the line and column") {
  CHECK(error_of("timeout = 0") == "p.toml:6:11: 'timeout' of stage 'i' must be a positive number of seconds, got 0");
  CHECK(error_of("timeout = -3") == "p.toml:6:11: 'timeout' of stage 'i' must be a positive number of seconds, got -3");
  CHECK(error_of("timeout = nan") == "p.toml:6:11: 'timeout' of stage 'i' must be a positive number of seconds, got nan");
  CHECK(error_of("timeout = inf") == "p.toml:6:11: 'timeout' of stage 'i' must be a positive number of seconds, got inf");
  CHECK(error_of("timeout = \"90x\"") ==
        "p.toml:6:11: 'timeout' of stage 'i': '90x' is not a duration (seconds, or a number with s, m or h: \"90s\")");
  CHECK(error_of("timeout = \"s\"") ==
        "p.toml:6:11: 'timeout' of stage 'i': 's' is not a duration (seconds, or a number with s, m or h: \"90s\")");
  CHECK(error_of("timeout = \"\"") ==
        "p.toml:6:11: 'timeout' of stage 'i': '' is not a duration (seconds, or a number with s, m or h: \"90s\")");
  CHECK(error_of("timeout = true") ==
        "p.toml:6:11: 'timeout' of stage 'i' must be a number of seconds or a string like \"90s\", got bool");
  CHECK(error_of("timeout = [1]") ==
        "p.toml:6:11: 'timeout' of stage 'i' must be a number of seconds or a string like \"90s\", got array");
  CHECK(error_of("timeout = \"${nope}\"") == "p.toml:6:11: unknown var 'nope' in 'timeout' of stage 'i' (vars: t)");
}

TEST_CASE("pipeline timeout: the canonical form keeps it and parses back to the same text") {
  for (const char* line : {"timeout = 90", "timeout = \"1.5m\"", "timeout = 0.1", "timeout = 1234567.25"}) {
    CAPTURE(line);
    Expected<Pipeline> pipeline = parse_pipeline(stage_with(line), "p.toml");
    REQUIRE(pipeline);
    pipeline->stages[0].output = "m.onnx";
    const std::string text = format_pipeline(*pipeline);
    Expected<Pipeline> again = parse_pipeline(text, "canonical.toml");
    REQUIRE(again);
    CHECK(again->stages.at(0).timeout == pipeline->stages[0].timeout);
    again->stages[0].output = "m.onnx";
    CHECK(format_pipeline(*again) == text);
  }
  Expected<Pipeline> plain = parse_pipeline(stage_with("timeout = 90"), "p.toml");
  REQUIRE(plain);
  CHECK(format_pipeline(*plain).find("timeout = 90\n") != std::string::npos);
}

}  // namespace qflow
