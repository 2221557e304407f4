// JSON documents qflow reads back (calibration tables, manifests, statistics, reports) are
// nlohmann::json values. parse_json adds what every file qflow reads must meet: errors as one
// line naming the file, line and column; duplicate keys and deep nesting refused.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>

#include <nlohmann/json.hpp>

#include "qflow/core/status.h"

namespace qflow {

// Objects keep their keys sorted (std::map), so iterating a document is deterministic.
using Json = nlohmann::json;

// Parses one JSON document (RFC 8259; surrounding whitespace and a UTF-8 byte order mark
// allowed). Errors read "<source>:<line>:<column>: <what was found and expected>", columns
// counting characters. A key repeated in one object and nesting deeper than 256 levels are
// errors too.
Expected<Json> parse_json(std::string_view text, const std::string& source);

// The member `key` of `value`, or nullptr when it has none or is not an object.
const Json* json_member(const Json& value, std::string_view key);

// The number when it was written as an integer (no fraction or exponent) that fits int64;
// nullopt for any other number or value.
std::optional<int64_t> json_int64(const Json& value);

}  // namespace qflow
