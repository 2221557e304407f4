// SHA-256 of a byte string, for artifact and plugin content hashes.
#pragma once

#include <string>
#include <string_view>

namespace qflow {

// The block function: portable C++, or the x86 SHA extensions (sha256rnds2 and friends).
enum class Sha256Impl { Portable, ShaExtensions };
bool sha256_supported(Sha256Impl impl);

// Lower-case hex digest (64 characters), on the SHA extensions where the CPU has them.
std::string sha256_hex(std::string_view bytes);
// The same with the block function `impl` (the portable one when `impl` is unsupported).
std::string sha256_hex(std::string_view bytes, Sha256Impl impl);

}  // namespace qflow
