// Unit tests for JsonWriter: layout, key order, escaping, number round-trip and misuse.
#include <doctest/doctest.h>

#include <cmath>
#include <cstdlib>
#include <limits>

#include "qflow/core/json_writer.h"

namespace qflow {

TEST_CASE("json_writer: pretty layout keeps key order and inline scopes") {
  JsonWriter w;
  w.begin_object();
  w.field("zeta", 1);
  w.field("alpha", "a");
  w.key("shape").begin_array(true).value(1).value("N").null().end_array();
  w.key("empty").begin_object().end_object();
  w.key("list").begin_array().value(true).value(false).end_array();
  w.end_object();
  auto text = w.finish();
  REQUIRE(text.has_value());
  CHECK(*text ==
        "{\n"
        "  \"zeta\": 1,\n"
        "  \"alpha\": \"a\",\n"
        "  \"shape\": [1, \"N\", null],\n"
        "  \"empty\": {},\n"
        "  \"list\": [\n"
        "    true,\n"
        "    false\n"
        "  ]\n"
        "}\n");
}

TEST_CASE("json_writer: compact output has no whitespace") {
  JsonWriter w(0);
  w.begin_array().value(1).begin_object().field("k", -2).end_object().end_array();
  auto text = w.finish();
  REQUIRE(text.has_value());
  CHECK(*text == "[1,{\"k\":-2}]");
}

TEST_CASE("json_writer: strings are escaped and invalid UTF-8 replaced") {
  std::string out;
  append_json_string(out, std::string("q\"b\\n\n\t\x01\x7f", 9));
  CHECK(out == "\"q\\\"b\\\\n\\n\\t\\u0001\\u007f\"");
  out.clear();
  append_json_string(out, "caf\xc3\xa9");  // valid two-byte sequence kept as is
  CHECK(out == "\"caf\xc3\xa9\"");
  out.clear();
  append_json_string(out, "a\xff" "b\xc0\xaf");  // stray byte and an overlong '/'
  CHECK(out == "\"a\\ufffdb\\ufffd\\ufffd\"");
  out.clear();
  append_json_string(out, "\xed\xa0\x80");  // UTF-16 surrogate encoded in UTF-8
  CHECK(out == "\"\\ufffd\\ufffd\\ufffd\"");
}

TEST_CASE("json_writer: doubles round-trip and non-finite values become null") {
  const double values[] = {0.1, 1.0 / 3.0, 1e-300, -2.5e17, std::numeric_limits<double>::max()};
  for (double v : values) {
    JsonWriter w(0);
    w.value(v);
    auto text = w.finish();
    REQUIRE(text.has_value());
    CHECK(std::strtod(text->c_str(), nullptr) == v);
  }
  JsonWriter w(0);
  w.begin_array().value(std::numeric_limits<double>::infinity()).value(std::nan("")).value(0.5f).end_array();
  CHECK(*w.finish() == "[null,null,0.5]");
  JsonWriter big(0);
  big.begin_array().value(std::numeric_limits<int64_t>::min()).value(std::numeric_limits<uint64_t>::max()).end_array();
  CHECK(*big.finish() == "[-9223372036854775808,18446744073709551615]");
}

TEST_CASE("json_writer: misuse is reported, not written") {
  JsonWriter no_key;
  no_key.begin_object().value(1).end_object();
  CHECK_FALSE(no_key.finish().has_value());

  JsonWriter open;
  open.begin_array();
  CHECK_FALSE(open.finish().has_value());

  JsonWriter mismatched;
  mismatched.begin_array().end_object();
  CHECK_FALSE(mismatched.finish().has_value());

  JsonWriter two_roots;
  two_roots.value(1).value(2);
  CHECK_FALSE(two_roots.finish().has_value());

  JsonWriter dangling;
  dangling.begin_object().key("a").end_object();
  CHECK_FALSE(dangling.finish().has_value());

  JsonWriter empty;
  CHECK_FALSE(empty.finish().has_value());
}

}  // namespace qflow
