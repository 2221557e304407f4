// Unit tests for parse_json (nlohmann's parser with qflow's checks): values, numbers, strings
// and escapes, errors with positions, duplicate keys, the depth limit, and a round trip
// through JsonWriter.
#include <doctest/doctest.h>

#include <cmath>
#include <limits>
#include <random>
#include <string>

#include "qflow/core/json_writer.h"
#include "qflow/core/json.h"

namespace qflow {
namespace {

Json parse_ok(std::string_view text) {
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
  const Json v = parse_ok(" \t\r\n{\"b\": [true, false, null], \"a\": {\"x\": \"y\"}, \"e\": [], \"o\": {}}\n");
  REQUIRE(v.is_object());
  CHECK(v.size() == 4);
  CHECK(v.begin().key() == "a");  // sorted
  const Json* b = json_member(v, "b");
  REQUIRE(b);
  REQUIRE(b->is_array());
  REQUIRE(b->size() == 3);
  CHECK((*b)[0].is_boolean());
  CHECK((*b)[0].get<bool>());
  CHECK_FALSE((*b)[1].get<bool>());
  CHECK((*b)[2].is_null());
  CHECK(v.at("a").at("x") == "y");
  CHECK(v.at("e").empty());
  CHECK(v.at("o").empty());
  CHECK(json_member(v, "missing") == nullptr);
  CHECK(json_member(*b, "x") == nullptr);  // not an object
  CHECK(json_int64(parse_ok("42")) == 42);
  CHECK(parse_ok("\"s\"") == "s");
}

TEST_CASE("json_reader: integers are exact within int64, other numbers are doubles") {
  CHECK(json_int64(parse_ok("9223372036854775807")) == std::numeric_limits<int64_t>::max());
  CHECK(json_int64(parse_ok("-9223372036854775808")) == std::numeric_limits<int64_t>::min());
  const Json big = parse_ok("9223372036854775808");
  CHECK_FALSE(json_int64(big).has_value());
  CHECK(big.get<double>() == 9223372036854775808.0);
  CHECK(json_int64(parse_ok("9007199254740993")) == 9007199254740993LL);  // 2^53 + 1: not a double
  CHECK_FALSE(json_int64(parse_ok("1.0")).has_value());
  CHECK_FALSE(json_int64(parse_ok("1e2")).has_value());
  CHECK_FALSE(json_int64(parse_ok("\"1\"")).has_value());
  CHECK(parse_ok("1e2").get<double>() == 100.0);
  // "-0" (JsonWriter's spelling of -0.0) keeps its sign, as a double.
  CHECK(std::signbit(parse_ok("-0").get<double>()));
  CHECK(std::signbit(parse_ok("[-0]")[0].get<double>()));
  CHECK(std::signbit(parse_ok("{\"z\": -0 }").at("z").get<double>()));
  CHECK(json_int64(parse_ok("0")) == 0);
  CHECK(std::signbit(parse_ok("-0.0").get<double>()));
  CHECK(parse_ok("0.1").get<double>() == 0.1);
  CHECK(parse_ok("-12.5E-1").get<double>() == -1.25);
  CHECK(parse_ok("2.5e+3").get<double>() == 2500.0);
  CHECK(parse_ok("4.9406564584124654e-324").get<double>() == std::numeric_limits<double>::denorm_min());
  CHECK(parse_ok("1e-400").get<double>() == 0.0);  // underflow rounds to zero
  CHECK(std::signbit(parse_ok("-1e-400").get<double>()));
  CHECK(parse_ok("1.7976931348623157e308").get<double>() == std::numeric_limits<double>::max());
  CHECK(parse_error("1e400") == "t.json:1:5: number overflow parsing '1e400'");
  CHECK(parse_error("[0.001e312]") == "t.json:1:10: number overflow parsing '0.001e312'");
}

TEST_CASE("json_reader: malformed numbers") {
  CHECK(parse_error("01") == "t.json:1:2: syntax error while parsing value - unexpected number literal; expected end of input");
  CHECK(parse_error("-") ==
        "t.json:1:2: syntax error while parsing value - invalid number; expected digit after '-'; last read: '-'");
  CHECK(parse_error("1.") ==
        "t.json:1:3: syntax error while parsing value - invalid number; expected digit after '.'; last read: '1.'");
  CHECK(parse_error("1.e5").starts_with("t.json:1:3: "));
  CHECK(parse_error("1e").starts_with("t.json:1:3: "));
  CHECK(parse_error("+1") == "t.json:1:1: syntax error while parsing value - invalid literal; last read: '+'");
  CHECK(parse_error(".5").starts_with("t.json:1:1: "));
  CHECK(parse_error("NaN") == "t.json:1:1: syntax error while parsing value - invalid literal; last read: 'N'");
  CHECK(parse_error("-Infinity").starts_with("t.json:1:2: "));
  CHECK(parse_error("0x10").starts_with("t.json:1:2: "));
}

TEST_CASE("json_reader: strings, escapes, surrogate pairs and UTF-8") {
  CHECK(parse_ok(R"("a\"b\\c\/d\b\f\n\r\t")") == "a\"b\\c/d\b\f\n\r\t");
  CHECK(parse_ok(R"("\u0041\u00e9\u20AC")") == "A\xC3\xA9\xE2\x82\xAC");
  CHECK(parse_ok(R"("\ud83d\ude00")") == "\xF0\x9F\x98\x80");  // U+1F600
  CHECK(parse_ok(R"("\u0000")") == std::string(1, '\0'));
  CHECK(parse_ok("\"\xC3\xA9\xF0\x9F\x98\x80\"") == "\xC3\xA9\xF0\x9F\x98\x80");
  CHECK(parse_error(R"("\ud83d")").starts_with("t.json:1:8: "));
  CHECK(parse_error(R"("\ud83d\u0041")").find("must be followed by U+DC00..U+DFFF") != std::string::npos);
  CHECK(parse_error(R"("\ude00")").find("must follow U+D800..U+DBFF") != std::string::npos);
  CHECK(parse_error(R"("\u12g4")") ==
        "t.json:1:6: syntax error while parsing value - invalid string: '\\u' must be followed by 4 hex digits; last read: '\"\\u12g'");
  CHECK(parse_error(R"("\x")").starts_with("t.json:1:3: "));
  CHECK(parse_error("\"a\tb\"").find("control character U+0009 (HT) must be escaped") != std::string::npos);
  CHECK(parse_error("\"abc").starts_with("t.json:1:5: "));
  // Bytes that are not UTF-8 are named, never copied into the message.
  CHECK(parse_error("\"\xC3\x28\"") ==
        "t.json:1:3: syntax error while parsing value - invalid string: ill-formed UTF-8 byte; last read: '\"<0xC3>('");
  CHECK(parse_error("\"\xC0\xAF\"").find("ill-formed UTF-8") != std::string::npos);      // overlong '/'
  CHECK(parse_error("\"\xED\xA0\x80\"").find("ill-formed UTF-8") != std::string::npos);  // encoded surrogate
  CHECK(parse_error("\"\xF4\x90\x80\x80\"").find("ill-formed UTF-8") != std::string::npos);  // above U+10FFFF
  CHECK(parse_error("\"\xE2\x82\"").find("ill-formed UTF-8") != std::string::npos);  // truncated
}

TEST_CASE("json_reader: structural errors name line and column") {
  CHECK(parse_error("") ==
        "t.json:1:1: syntax error while parsing value - unexpected end of input; expected '[', '{', or a literal");
  CHECK(parse_error("  \n  ").starts_with("t.json:2:3: "));
  CHECK(parse_error("{\n  \"a\": 1,\n}") ==
        "t.json:3:1: syntax error while parsing object key - unexpected '}'; expected string literal");
  CHECK(parse_error("[1, 2,]").starts_with("t.json:1:7: "));
  CHECK(parse_error("[1 2]") == "t.json:1:4: syntax error while parsing array - unexpected number literal; expected ']'");
  CHECK(parse_error("{\"a\" 1}").find("expected ':'") != std::string::npos);
  CHECK(parse_error("{\"a\": 1 \"b\": 2}").find("expected '}'") != std::string::npos);
  CHECK(parse_error("{'a': 1}").starts_with("t.json:1:2: "));
  CHECK(parse_error("[tru]").find("invalid literal") != std::string::npos);
  CHECK(parse_error("{} {}") == "t.json:1:4: syntax error while parsing value - unexpected '{'; expected end of input");
  CHECK(parse_error("[1] // c").find("expected end of input") != std::string::npos);  // no comments
  // Columns count characters, not bytes.
  CHECK(parse_error("[\"\xC3\xA9\xC3\xA9\", x]").starts_with("t.json:1:8: "));
  CHECK(parse_error("[\n1,\n\x01]").starts_with("t.json:3:1: "));
  // A UTF-8 byte order mark is skipped (RFC 8259 lets a parser ignore it).
  CHECK(parse_ok("\xEF\xBB\xBF{}").empty());
}

TEST_CASE("json_reader: duplicate keys are refused, naming both places") {
  CHECK(parse_error("{\"a\": 1,\n \"b\": 2,\n \"a\": 3}") ==
        "t.json:3:2: expected unique keys, found a second 'a' (first at line 1, column 2)");
  // Keys equal after unescaping are duplicates too; escaped quotes do not hide where a key starts.
  CHECK(parse_error(R"({"a": 1, "\u0061": 2})") == "t.json:1:10: expected unique keys, found a second 'a' (first at line 1, column 2)");
  CHECK(parse_error(R"({"x\\": 1, "x\\": 2})").starts_with("t.json:1:12: "));
  CHECK(parse_error(R"({"q\"": 1, "q\"": 2})").starts_with("t.json:1:12: "));
  // The same key in different objects is fine.
  CHECK(parse_ok(R"({"a": {"a": 1}, "b": {"a": 2}})").at("b").at("a") == 2);
}

TEST_CASE("json_reader: nesting up to 256 levels") {
  const std::string ok = std::string(256, '[') + std::string(256, ']');
  const Json deep = parse_ok(ok);
  CHECK(deep.is_array());
  const std::string too_deep = std::string(257, '[') + std::string(257, ']');
  CHECK(parse_error(too_deep) == "t.json:1:257: expected at most 256 levels of nesting");
  std::string objects;
  for (int i = 0; i < 257; ++i) objects += "{\"k\":";
  objects += "1" + std::string(257, '}');
  CHECK(parse_error(objects) == "t.json:1:1281: expected at most 256 levels of nesting");
  // Far deeper input fails the same way, early.
  CHECK(parse_error(std::string(100000, '[')) == "t.json:1:257: expected at most 256 levels of nesting");
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
    const Json v = parse_ok(*written);
    const Json& ds = v.at("doubles");
    REQUIRE(ds.size() == doubles.size());
    for (std::size_t i = 0; i < ds.size(); ++i)
      CHECK(std::bit_cast<uint64_t>(ds[i].get<double>()) == std::bit_cast<uint64_t>(doubles[i]));
    const Json& is = v.at("ints");
    REQUIRE(is.size() == ints.size());
    for (std::size_t i = 0; i < is.size(); ++i) CHECK(json_int64(is[i]) == ints[i]);
    CHECK(v.at("text") == text);
    CHECK(v.at(text) == true);
    CHECK(v.at("nothing").is_null());
    CHECK(v.at("nested").at("empty").empty());
  }
}

}  // namespace
}  // namespace qflow
