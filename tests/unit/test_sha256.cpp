// SHA-256 against the FIPS 180-4 example vectors and the padding boundaries.
#include <doctest/doctest.h>

#include <cstdint>
#include <string>

#include "framework/core/sha256.h"

namespace qflow {

TEST_CASE("sha256: FIPS 180-4 vectors") {
  CHECK(sha256_hex("") == "e3b0c44298fc1c149afbf4c8996fb92427ae41e4649b934ca495991b7852b855");
  CHECK(sha256_hex("abc") == "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  CHECK(sha256_hex("abcdbcdecdefdefgefghfghighijhijkijkljklmklmnlmnomnopnopq") ==
        "248d6a61d20638b8e5c026930c3e6039a33ce45964ff2167f6ecedd419db06c1");
  CHECK(sha256_hex(std::string(1000000, 'a')) == "cdc76e5c9914fb9281a1c7e284d73e67f1809a48a497200e046d39ccc7112cd0");
}

TEST_CASE("sha256: lengths around the padding boundary") {
  // 55 bytes pad into one block, 56 need a second; 64 is exactly one full block.
  CHECK(sha256_hex(std::string(55, 'a')) == "9f4390f8d30c2dd92ec9f095b65e2b9ae9b0a925a5258e241c9f1e910f734318");
  CHECK(sha256_hex(std::string(56, 'a')) == "b35439a4ac6f0948b6d6f9e3c6af0f5f590ce20f1bde7090ef7970686ec6738a");
  CHECK(sha256_hex(std::string(64, 'a')) == "ffe054fe7ae0cb6dc65c3af9b61d5209f439851db43d0ba5997337df154668eb");
}

TEST_CASE("sha256: the SHA-extension block function equals the portable one") {
  CHECK(sha256_supported(Sha256Impl::Portable));
  if (!sha256_supported(Sha256Impl::ShaExtensions)) return;
  CHECK(sha256_hex("abc", Sha256Impl::ShaExtensions) ==
        "ba7816bf8f01cfea414140de5dae2223b00361a396177a9cb410ff61f20015ad");
  std::string bytes;
  uint32_t seed = 12345;
  for (std::size_t n = 0; n <= 1100; ++n) {
    CHECK(sha256_hex(bytes, Sha256Impl::ShaExtensions) == sha256_hex(bytes, Sha256Impl::Portable));
    seed = seed * 1664525u + 1013904223u;
    bytes.push_back(static_cast<char>(seed >> 24));
  }
  const std::string large(3 << 20, '\x5a');
  CHECK(sha256_hex(large, Sha256Impl::ShaExtensions) == sha256_hex(large, Sha256Impl::Portable));
}

TEST_CASE("sha256: binary bytes including NUL") {
  const std::string bytes("\x00\xff\x80", 3);
  CHECK(sha256_hex(bytes) == "f742b965f156c10374bc23aea96e3a8aff8facd6fc079defeaa30219ad86f211");
}

}  // namespace qflow
