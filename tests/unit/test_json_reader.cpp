// Unit tests for the JSON reader: values, numbers, strings and escapes, errors with positions,
// duplicate keys, the depth limit, and a round trip through JsonWriter.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "qflow/core/json_writer.h"
#include "qflow/core/json.h"

namespace qflow {
namespace {

JsonValue parse_ok(std::string_view text) {
  auto parsed = parse_json(text, "t.json");
  if (!parsed) FAIL_CHECK(parsed.status().message());
  REQUIRE(parsed.has_value());
  return std::move(parsed).value();
}

std::string parse_error(std::string_view text) {
  auto parsed = parse_json(text, "t.json");
  REQUIRE_FALSE(parsed.has_value());
  CHECK(parsed.status().code() == StatusCode::InvalidInput);
  const std::string message = parsed.status().message();
  CHECK(message.find('\n') == std::string::npos);
  return message;
}

TEST_CASE("json_reader: scalars, arrays and objects") {
  const JsonValue v = parse_ok(" \t\r\n{\"b\": [true, false, null], \"a\": {\"x\": \"y\"}, \"e\": [], \"o\": {}}\n");
  REQUIRE(v.is_object());
  CHECK(v.members().size() == 4);
  CHECK(v.members().begin()->first == "a");  // sorted
  const JsonValue* b = v.find("b");
  REQUIRE(b);
  REQUIRE(b->is_array());
  REQUIRE(b->items().size() == 3);
  CHECK(b->items()[0].is_bool());
  CHECK(b->items()[0].as_bool());
  CHECK_FALSE(b->items()[1].as_bool());
  CHECK(b->items()[2].is_null());
  CHECK(v.find("a")->find("x")->as_string() == "y");
  CHECK(v.find("e")->items().empty());
  CHECK(v.find("o")->members().empty());
  CHECK(v.find("missing") == nullptr);
  CHECK(b->find("x") == nullptr);  // not an object
  CHECK(parse_ok("42").as_int() == 42);
  CHECK(parse_ok("\"s\"").as_string() == "s");
}

TEST_CASE("json_reader: integers are exact within int64, other numbers are doubles") {
  const JsonValue max = parse_ok("9223372036854775807");
  CHECK(max.is_integer());
  CHECK(max.as_int() == std::numeric_limits<int64_t>::max());
  const JsonValue min = parse_ok("-9223372036854775808");
  CHECK(min.is_integer());
  CHECK(min.as_int() == std::numeric_limits<int64_t>::min());
  const JsonValue big = parse_ok("9223372036854775808");
  CHECK_FALSE(big.is_integer());
  CHECK(big.as_number() == 9223372036854775808.0);
  const JsonValue exact = parse_ok("9007199254740993");  // 2^53 + 1: not a double, still an exact int
  CHECK(exact.as_int() == 9007199254740993LL);
  CHECK_FALSE(parse_ok("1.0").is_integer());
  CHECK_FALSE(parse_ok("1e2").is_integer());
  CHECK(parse_ok("1e2").as_number() == 100.0);
  CHECK(parse_ok("-0").is_integer());
  CHECK(std::signbit(parse_ok("-0.0").as_number()));
  CHECK(parse_ok("0.1").as_number() == 0.1);
  CHECK(parse_ok("-12.5E-1").as_number() == -1.25);
  CHECK(parse_ok("2.5e+3").as_number() == 2500.0);
  CHECK(parse_ok("4.9406564584124654e-324").as_number() == std::numeric_limits<double>::denorm_min());
  CHECK(parse_ok("1e-400").as_number() == 0.0);  // underflow rounds to zero
  CHECK(std::signbit(parse_ok("-1e-400").as_number()));
  CHECK(parse_ok("1.7976931348623157e308").as_number() == std::numeric_limits<double>::max());
  CHECK(parse_error("1e400").find("t.json:1:1: expected a number within the range of a double") == 0);
  CHECK(parse_error("[0.001e312]").find("t.json:1:2: expected a number within") == 0);
}

TEST_CASE("json_reader: malformed numbers") {
  CHECK(parse_error("01") == "t.json:1:2: expected '.', 'e' or the end of the number after a leading 0, found '1'");
  CHECK(parse_error("-") == "t.json:1:2: expected a digit in a number, found end of input");
  CHECK(parse_error("1.") == "t.json:1:3: expected a digit after '.', found end of input");
  CHECK(parse_error("1.e5") == "t.json:1:3: expected a digit after '.', found 'e'");
  CHECK(parse_error("1e") == "t.json:1:3: expected a digit in the exponent, found end of input");
  CHECK(parse_error("+1") == "t.json:1:1: expected a value, found '+'");
  CHECK(parse_error(".5") == "t.json:1:1: expected a value, found '.'");
  CHECK(parse_error("NaN") == "t.json:1:1: expected a value, found 'N'");
  CHECK(parse_error("-Infinity") == "t.json:1:2: expected a digit in a number, found 'I'");
  CHECK(parse_error("0x10") == "t.json:1:2: expected end of input after the top-level value, found 'x'");
}

TEST_CASE("json_reader: strings, escapes, surrogate pairs and UTF-8") {
  CHECK(parse_ok(R"("a\"b\\c\/d\b\f\n\r\t")").as_string() == "a\"b\\c/d\b\f\n\r\t");
  CHECK(parse_ok(R"("\u0041\u00e9\u20AC")").as_string() == "A\xC3\xA9\xE2\x82\xAC");
  CHECK(parse_ok(R"("\ud83d\ude00")").as_string() == "\xF0\x9F\x98\x80");  // U+1F600
  CHECK(parse_ok(R"("\u0000")").as_string() == std::string(1, '\0'));
  CHECK(parse_ok("\"\xC3\xA9\xF0\x9F\x98\x80\"").as_string() == "\xC3\xA9\xF0\x9F\x98\x80");
  CHECK(parse_error(R"("\ud83d")") == "t.json:1:8: expected a \\uDC00-\\uDFFF low surrogate after high surrogate \\uD83D, found '\"'");
  CHECK(parse_error(R"("\ud83d\u0041")") ==
        "t.json:1:8: expected a \\uDC00-\\uDFFF low surrogate after high surrogate \\uD83D, found \\u0041");
  CHECK(parse_error(R"("\ude00")") == "t.json:1:2: expected a high surrogate before low surrogate \\uDE00");
  CHECK(parse_error(R"("\u12g4")") == "t.json:1:6: expected 4 hex digits after \\u, found 'g'");
  CHECK(parse_error(R"("\x")") == "t.json:1:3: expected an escape character (\" \\ / b f n r t u) after '\\', found 'x'");
  CHECK(parse_error("\"a\tb\"") == "t.json:1:3: expected an escape for control character U+0009 in a string");
  CHECK(parse_error("\"abc") == "t.json:1:5: expected '\"' to close the string, found end of input");
  CHECK(parse_error("\"\xC3\x28\"") == "t.json:1:2: expected valid UTF-8 in a string, found byte 0xC3");
  CHECK(parse_error("\"\xC0\xAF\"").find("expected valid UTF-8") != std::string::npos);      // overlong '/'
  CHECK(parse_error("\"\xED\xA0\x80\"").find("expected valid UTF-8") != std::string::npos);  // encoded surrogate
  CHECK(parse_error("\"\xF4\x90\x80\x80\"").find("expected valid UTF-8") != std::string::npos);  // above U+10FFFF
  CHECK(parse_error("\"\xE2\x82\"").find("expected valid UTF-8") != std::string::npos);  // truncated
}

TEST_CASE("json_reader: structural errors name line and column") {
  CHECK(parse_error("") == "t.json:1:1: expected a value, found end of input");
  CHECK(parse_error("  \n  ") == "t.json:2:3: expected a value, found end of input");
  CHECK(parse_error("{\n  \"a\": 1,\n}") == "t.json:3:1: expected a string key, found '}'");
  CHECK(parse_error("[1, 2,]") == "t.json:1:7: expected a value, found ']'");
  CHECK(parse_error("[1 2]") == "t.json:1:4: expected ',' or ']' in an array, found '2'");
  CHECK(parse_error("{\"a\" 1}") == "t.json:1:6: expected ':' after an object key, found '1'");
  CHECK(parse_error("{\"a\": 1 \"b\": 2}") == "t.json:1:9: expected ',' or '}' in an object, found '\"'");
  CHECK(parse_error("{'a': 1}") == "t.json:1:2: expected a string key, found '''");
  CHECK(parse_error("[tru]") == "t.json:1:2: expected a value, found 't'");
  CHECK(parse_error("{} {}") == "t.json:1:4: expected end of input after the top-level value, found '{'");
  CHECK(parse_error("[1] // c") == "t.json:1:5: expected end of input after the top-level value, found '/'");
  CHECK(parse_error("\xEF\xBB\xBF{}") == "t.json:1:1: expected a value, found byte 0xEF");
  // Columns count characters, not bytes.
  CHECK(parse_error("[\"\xC3\xA9\xC3\xA9\", x]") == "t.json:1:8: expected a value, found 'x'");
  CHECK(parse_error("[\n1,\n\x01]") == "t.json:3:1: expected a value, found U+0001");
}

TEST_CASE("json_reader: duplicate keys are refused, naming both places") {
  CHECK(parse_error("{\"a\": 1,\n \"b\": 2,\n \"a\": 3}") ==
        "t.json:3:2: expected unique keys, found a second 'a' (first at line 1, column 2)");
  // Keys equal after unescaping are duplicates too.
  CHECK(parse_error(R"({"a": 1, "\u0061": 2})").find("found a second 'a'") != std::string::npos);
  // The same key in different objects is fine.
  CHECK(parse_ok(R"({"a": {"a": 1}, "b": {"a": 2}})").find("b")->find("a")->as_int() == 2);
}

TEST_CASE("json_reader: nesting up to 256 levels") {
  const std::string ok = std::string(256, '[') + std::string(256, ']');
  const JsonValue deep = parse_ok(ok);
  CHECK(deep.is_array());
  const std::string too_deep = std::string(257, '[') + std::string(257, ']');
  CHECK(parse_error(too_deep) == "t.json:1:257: expected at most 256 levels of nesting");
  std::string objects;
  for (int i = 0; i < 257; ++i) objects += "{\"k\":";
  objects += "1" + std::string(257, '}');
  CHECK(parse_error(objects).find("expected at most 256 levels of nesting") != std::string::npos);
  // Far deeper input fails the same way instead of exhausting the stack.
  CHECK(parse_error(std::string(100000, '[')).find("levels of nesting") != std::string::npos);
}

TEST_CASE("json_reader: reads back what JsonWriter writes") {
  std::mt19937_64 rng(17);
  std::vector<double> doubles = {0.0, -0.0, 1.0, 0.1, -2.5e-300, 1.7976931348623157e308, 4.9406564584124654e-324,
                                 3.141592653589793, 1e21, 123456789.125};
  for (int i = 0; i < 200; ++i) {
    double d = std::bit_cast<double>(rng());
    if (std::isfinite(d)) doubles.push_back(d);
  }
  const std::vector<int64_t> ints = {0, -1, 42, std::numeric_limits<int64_t>::min(), std::numeric_limits<int64_t>::max()};
  const std::string text = std::string("plain \"quoted\" \\ / \b\f\n\r\t \x01\x1F\x7F ") + "\xC3\xA9 \xF0\x9F\x98\x80";
  for (int indent : {0, 2}) {
    JsonWriter w(indent);
    w.begin_object();
    w.key("doubles").begin_array();
    for (double d : doubles) w.value(d);
    w.end_array();
    w.key("ints").begin_array(true);
    for (int64_t n : ints) w.value(n);
    w.end_array();
    w.field("text", text);
    w.field(text, true);
    w.key("nothing").null();
    w.key("nested").begin_object().key("empty").begin_array().end_array().end_object();
    w.end_object();
    auto written = w.finish();
    REQUIRE(written.has_value());
    const JsonValue v = parse_ok(*written);
    const auto& ds = v.find("doubles")->items();
    REQUIRE(ds.size() == doubles.size());
    for (std::size_t i = 0; i < ds.size(); ++i)
      CHECK(std::bit_cast<uint64_t>(ds[i].as_number()) == std::bit_cast<uint64_t>(doubles[i]));
    const auto& is = v.find("ints")->items();
    REQUIRE(is.size() == ints.size());
    for (std::size_t i = 0; i < is.size(); ++i) {
      CHECK(is[i].is_integer());
      CHECK(is[i].as_int() == ints[i]);
    }
    CHECK(v.find("text")->as_string() == text);
    CHECK(v.find(text)->as_bool());
    CHECK(v.find("nothing")->is_null());
    CHECK(v.find("nested")->find("empty")->items().empty());
  }
}

}  // namespace
}  // namespace qflow
