// SHA-256 of a byte string, for artifact and plugin content hashes.
#pragma once

#include <string>
#include <string_view>

namespace qflow {

// Lower-case hex digest (64 characters).
std::string sha256_hex(std::string_view bytes);

}  // namespace qflow
