// RequestParser and AppendResponse: every framing decision of server/http/http_message.h, each
// input fed whole, one byte at a time and split in two at every point, which must all agree.
#include <doctest/doctest.h>

#include <memory>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

#include "server/http/http_message.h"

using namespace std::string_literals;
using iw::http::AppendResponse;
using iw::http::Limits;
using iw::http::ReasonPhrase;
using iw::http::Request;
using iw::http::RequestParser;
using iw::http::Response;
using State = RequestParser::State;
using Headers = std::vector<std::pair<std::string, std::string>>;

namespace {

// What one Feed produced, copied out of the parser's views.
struct Parsed {
  State state = State::kNeedMore;
  std::string method, target, path, body;
  Headers headers;
  bool keepAlive = false;
  size_t consumed = 0;
  int errorStatus = 0;
  std::string errorPath;

  bool operator==(const Parsed&) const = default;
};

doctest::String Describe(const Parsed& p) {
  std::string s = "state=" + std::to_string(static_cast<int>(p.state)) +
                  " status=" + std::to_string(p.errorStatus) + " method=" + p.method +
                  " target=" + p.target + " path=" + p.path + " body=" + p.body +
                  " keepAlive=" + std::to_string(p.keepAlive) +
                  " consumed=" + std::to_string(p.consumed) + " errorPath=" + p.errorPath;
  for (const auto& [n, v] : p.headers) s += " [" + n + ": " + v + "]";
  return s.c_str();
}

}  // namespace

namespace doctest {
template <>
struct StringMaker<Parsed> {
  static String convert(const Parsed& p) { return Describe(p); }
};
}  // namespace doctest

namespace {

Parsed Capture(const RequestParser& parser, State state) {
  Parsed p;
  p.state = state;
  if (state == State::kComplete) {
    const Request& r = parser.Get();
    p.method = r.method;
    p.target = r.target;
    p.path = r.path;
    p.body = r.body;
    for (const auto& h : r.headers) p.headers.emplace_back(h.name, h.value);
    p.keepAlive = r.keepAlive;
    p.consumed = parser.Consumed();
  } else if (state == State::kError) {
    p.errorStatus = parser.ErrorStatus();
    p.errorPath = parser.ErrorPath();
  }
  return p;
}

// Feeds `input` in one call.
Parsed FeedWhole(std::string_view input, Limits limits) {
  RequestParser parser(limits);
  std::string data(input);
  return Capture(parser, parser.Feed(data));
}

// Feeds `input` as it arrives one byte at a time: each call sees every byte so far, in a fresh
// buffer (the bytes move between calls, as the contract allows; the old buffer is freed).
Parsed FeedBytewise(std::string_view input, Limits limits) {
  RequestParser parser(limits);
  std::unique_ptr<std::string> data;
  State state = State::kNeedMore;
  for (size_t n = 1; n <= input.size() && state == State::kNeedMore; ++n) {
    auto fresh = std::make_unique<std::string>(input.substr(0, n));
    state = parser.Feed(*fresh);
    data = std::move(fresh);
  }
  return Capture(parser, state);
}

// Feeds the first `split` bytes, then (if more are needed) all of `input` in a fresh buffer.
Parsed FeedSplit(std::string_view input, size_t split, Limits limits) {
  RequestParser parser(limits);
  auto first = std::make_unique<std::string>(input.substr(0, split));
  State state = parser.Feed(*first);
  if (state != State::kNeedMore) return Capture(parser, state);
  auto all = std::make_unique<std::string>(input);
  first.reset();
  return Capture(parser, parser.Feed(*all));
}

// Parses `input` whole, byte by byte and split at every point; checks they agree.
Parsed ParseEveryWay(std::string_view input, Limits limits = {}) {
  Parsed whole = FeedWhole(input, limits);
  CHECK(FeedBytewise(input, limits) == whole);
  for (size_t split = 1; split < input.size(); ++split) {
    Parsed parsed = FeedSplit(input, split, limits);
    if (!(parsed == whole)) {  // one report for the first split that disagrees
      INFO("split at " << split);
      CHECK(parsed == whole);
      break;
    }
  }
  return whole;
}

struct Accepted {
  const char* name = "";
  std::string input{};
  Limits limits{};
  std::string method{}, target{}, path{};
  Headers headers{};
  std::string body{};
  bool keepAlive = true;
  size_t consumed = 0;  // 0: all of `input`
};

std::string Repeat(std::string_view s, size_t n) {
  std::string out;
  for (size_t i = 0; i < n; ++i) out += s;
  return out;
}

const std::string kSimpleGet = "GET /healthz HTTP/1.1\r\nHost: a\r\n\r\n";
// Exactly 100 bytes of head.
const std::string kHead100 =
    "GET /x HTTP/1.1\r\nX-Fill: " + std::string(100 - 29, 'f') + "\r\n\r\n";

std::vector<Accepted> AcceptedCases() {
  return {
      {.name = "GET with a query",
       .input = "GET /mutate/pods?timeout=10s&x=1 HTTP/1.1\r\nHost: webhook.svc:443\r\n\r\n",
       .method = "GET",
       .target = "/mutate/pods?timeout=10s&x=1",
       .path = "/mutate/pods",
       .headers = {{"Host", "webhook.svc:443"}}},
      {.name = "POST with Content-Length",
       .input = "POST /validate HTTP/1.1\r\nHost: a\r\nContent-Type: application/json\r\n"
                "Content-Length: 13\r\n\r\nhello, world!",
       .method = "POST",
       .target = "/validate",
       .path = "/validate",
       .headers = {{"Host", "a"}, {"Content-Type", "application/json"}, {"Content-Length", "13"}},
       .body = "hello, world!"},
      {.name = "the bytes after the body belong to the next request",
       .input = "POST /a HTTP/1.1\r\nContent-Length: 3\r\n\r\nabcGET /b HTTP/1.1\r\n\r\n",
       .method = "POST",
       .target = "/a",
       .path = "/a",
       .headers = {{"Content-Length", "3"}},
       .body = "abc",
       .consumed = 42},
      {.name = "empty lines before the request line are skipped",
       .input = "\r\n\r\nGET / HTTP/1.1\r\n\r\n",
       .method = "GET",
       .target = "/",
       .path = "/"},
      {.name = "no header fields at all",
       .input = "DELETE /x HTTP/1.1\r\n\r\n",
       .method = "DELETE",
       .target = "/x",
       .path = "/x"},
      {.name = "asterisk target, other token methods",
       .input = "OPTIONS * HTTP/1.1\r\n\r\n",
       .method = "OPTIONS",
       .target = "*",
       .path = "*"},
      {.name = "a query with no path keeps an empty path",
       .input = "GET ?a=b HTTP/1.1\r\n\r\n",
       .method = "GET",
       .target = "?a=b",
       .path = ""},
      {.name =
           "values are trimmed of spaces and tabs, empty values kept, order and duplicates kept",
       .input = "GET / HTTP/1.1\r\nX-A:   spaced  value \t\r\nX-Empty:\r\nX-A:\tsecond\r\n"
                "X-Utf8: caf\xc3\xa9\r\n\r\n",
       .method = "GET",
       .target = "/",
       .path = "/",
       .headers = {{"X-A", "spaced  value"},
                   {"X-Empty", ""},
                   {"X-A", "second"},
                   {"X-Utf8", "caf\xc3\xa9"}}},
      {.name = "HTTP/1.0 closes by default",
       .input = "GET / HTTP/1.0\r\n\r\n",
       .method = "GET",
       .target = "/",
       .path = "/",
       .keepAlive = false},
      {.name = "HTTP/1.0 keeps alive when asked",
       .input = "GET / HTTP/1.0\r\nConnection: Keep-Alive\r\n\r\n",
       .method = "GET",
       .target = "/",
       .path = "/",
       .headers = {{"Connection", "Keep-Alive"}},
       .keepAlive = true},
      {.name = "HTTP/1.1 Connection: close",
       .input = "GET / HTTP/1.1\r\nConnection: close\r\n\r\n",
       .method = "GET",
       .target = "/",
       .path = "/",
       .headers = {{"Connection", "close"}},
       .keepAlive = false},
      {.name = "HTTP/1.1 close in a list, any case",
       .input = "GET / HTTP/1.1\r\nConnection: keep-alive , CLOSE\r\n\r\n",
       .method = "GET",
       .target = "/",
       .path = "/",
       .headers = {{"Connection", "keep-alive , CLOSE"}},
       .keepAlive = false},
      {.name = "HTTP/1.1 a token that only starts with close keeps alive",
       .input = "GET / HTTP/1.1\r\nConnection: closed, upgrade\r\n\r\n",
       .method = "GET",
       .target = "/",
       .path = "/",
       .headers = {{"Connection", "closed, upgrade"}},
       .keepAlive = true},
      {.name = "duplicate equal Content-Length",
       .input = "PUT /p HTTP/1.1\r\nContent-Length: 3\r\ncontent-length: 3\r\n\r\nabc",
       .method = "PUT",
       .target = "/p",
       .path = "/p",
       .headers = {{"Content-Length", "3"}, {"content-length", "3"}},
       .body = "abc"},
      {.name = "Content-Length with leading zeros and spaces",
       .input = "PUT /p HTTP/1.1\r\nContent-Length:  004 \r\n\r\nabcd",
       .method = "PUT",
       .target = "/p",
       .path = "/p",
       .headers = {{"Content-Length", "004"}},
       .body = "abcd"},
      {.name = "Content-Length: 0",
       .input = "POST /p HTTP/1.1\r\nContent-Length: 0\r\n\r\n",
       .method = "POST",
       .target = "/p",
       .path = "/p",
       .headers = {{"Content-Length", "0"}}},
      {.name = "body exactly at the limit",
       .input = "POST /p HTTP/1.1\r\nContent-Length: 10\r\n\r\n0123456789",
       .limits = {.maxBodyBytes = 10},
       .method = "POST",
       .target = "/p",
       .path = "/p",
       .headers = {{"Content-Length", "10"}},
       .body = "0123456789"},
      {.name = "a body of binary bytes",
       .input = "POST /p HTTP/1.1\r\nContent-Length: 6\r\n\r\n\r\n\0\r\n\xff"s,
       .method = "POST",
       .target = "/p",
       .path = "/p",
       .headers = {{"Content-Length", "6"}},
       .body = "\r\n\0\r\n\xff"s},
      {.name = "chunked: several chunks",
       .input = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                "5\r\nhello\r\n7\r\n, world\r\n1\r\n!\r\n0\r\n\r\n",
       .method = "POST",
       .target = "/c",
       .path = "/c",
       .headers = {{"Transfer-Encoding", "chunked"}},
       .body = "hello, world!"},
      {.name = "chunked: extensions are ignored",
       .input = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                "5;name=value\r\nhello\r\n6 ; ext\r\n world\r\n0;last=\"yes\"\r\n\r\n",
       .method = "POST",
       .target = "/c",
       .path = "/c",
       .headers = {{"Transfer-Encoding", "chunked"}},
       .body = "hello world"},
      {.name = "chunked: trailers are read and not added to the headers",
       .input = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                "3\r\nabc\r\n0\r\nX-Checksum: 1234\r\nX-Other: y\r\n\r\n",
       .method = "POST",
       .target = "/c",
       .path = "/c",
       .headers = {{"Transfer-Encoding", "chunked"}},
       .body = "abc"},
      {.name = "chunked: hex sizes in upper and lower case",
       .input = "POST /c HTTP/1.1\r\nTransfer-Encoding: Chunked\r\n\r\n"
                "A\r\n0123456789\r\na\r\nabcdefghij\r\n1F\r\n" +
                std::string(31, 'z') + "\r\n0\r\n\r\n",
       .method = "POST",
       .target = "/c",
       .path = "/c",
       .headers = {{"Transfer-Encoding", "Chunked"}},
       .body = "0123456789abcdefghij" + std::string(31, 'z')},
      {.name = "chunked: body exactly at the limit, then the next request",
       .input = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n"
                "4\r\n0123\r\n6\r\n456789\r\n0\r\n\r\nGET / HTTP/1.1\r\n\r\n",
       .limits = {.maxBodyBytes = 10},
       .method = "POST",
       .target = "/c",
       .path = "/c",
       .headers = {{"Transfer-Encoding", "chunked"}},
       .body = "0123456789",
       .consumed = 73},
      {.name = "Expect: 100-continue with the body already there",
       .input = "POST /p HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 2\r\n\r\nok",
       .method = "POST",
       .target = "/p",
       .path = "/p",
       .headers = {{"Expect", "100-continue"}, {"Content-Length", "2"}},
       .body = "ok"},
      {.name = "head exactly at maxHeadBytes",
       .input = kHead100,
       .limits = {.maxHeadBytes = 100},
       .method = "GET",
       .target = "/x",
       .path = "/x",
       .headers = {{"X-Fill", std::string(100 - 29, 'f')}}},
      {.name = "exactly maxHeaders header fields",
       .input = "GET / HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\n\r\n",
       .limits = {.maxHeaders = 3},
       .method = "GET",
       .target = "/",
       .path = "/",
       .headers = {{"A", "1"}, {"B", "2"}, {"C", "3"}}},
  };
}

struct Refused {
  const char* name;
  std::string input;
  int status;
  std::string errorPath;  // ErrorPath(): "" when the request line was not understood
  Limits limits{};
};

std::vector<Refused> RefusedCases() {
  const std::string post = "POST /p?q=1 HTTP/1.1\r\n";
  const std::string chunked = "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n";
  return {
      // Content-Length.
      {"duplicate different Content-Length",
       post + "Content-Length: 3\r\nContent-Length: 4\r\n\r\nabcd", 400, "/p"},
      {"Content-Length list", post + "Content-Length: 3, 3\r\n\r\nabc", 400, "/p"},
      {"negative Content-Length", post + "Content-Length: -1\r\n\r\n", 400, "/p"},
      {"Content-Length with a plus", post + "Content-Length: +3\r\n\r\nabc", 400, "/p"},
      {"Content-Length not digits", post + "Content-Length: abc\r\n\r\n", 400, "/p"},
      {"Content-Length digits then junk", post + "Content-Length: 3x\r\n\r\nabc", 400, "/p"},
      {"Content-Length in hex", post + "Content-Length: 0x3\r\n\r\nabc", 400, "/p"},
      {"Content-Length with inner space", post + "Content-Length: 1 2\r\n\r\n", 400, "/p"},
      {"empty Content-Length", post + "Content-Length: \r\n\r\n", 400, "/p"},
      {"Content-Length overflowing 64 bits",
       post + "Content-Length: 99999999999999999999999\r\n\r\n", 400, "/p"},
      {"Content-Length over the limit, before any body byte",
       post + "Content-Length: 11\r\n\r\n",
       413,
       "/p",
       {.maxBodyBytes = 10}},
      {"Content-Length over the default 7 MiB limit", post + "Content-Length: 7340033\r\n\r\n", 413,
       "/p"},
      // Chunked.
      {"chunk size not hex", chunked + "zz\r\nhello\r\n0\r\n\r\n", 400, "/c"},
      {"empty chunk size line", chunked + "\r\nhello\r\n0\r\n\r\n", 400, "/c"},
      {"negative chunk size", chunked + "-5\r\nhello\r\n0\r\n\r\n", 400, "/c"},
      {"chunk size with 0x", chunked + "0x5\r\nhello\r\n0\r\n\r\n", 400, "/c"},
      {"chunk size with junk after it", chunked + "5 5\r\nhello\r\n0\r\n\r\n", 400, "/c"},
      {"chunk size of 16 hex digits", chunked + "1000000000000000\r\n", 400, "/c"},
      {"chunk size line that never ends", chunked + "5;" + std::string(2000, 'e'), 400, "/c"},
      {"no CRLF after the chunk data", chunked + "5\r\nhelloXY0\r\n\r\n", 400, "/c"},
      {"bare LF after the chunk data", chunked + "5\r\nhello\n0\r\n\r\n", 400, "/c"},
      {"one chunk over the body limit, before its data",
       chunked + "b\r\n",
       413,
       "/c",
       {.maxBodyBytes = 10}},
      {"chunks adding up over the body limit",
       chunked + "6\r\nabcdef\r\n5\r\nabcde\r\n0\r\n\r\n",
       413,
       "/c",
       {.maxBodyBytes = 10}},
      {"chunked and Content-Length",
       "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nContent-Length: 5\r\n\r\n"
       "5\r\nhello\r\n0\r\n\r\n",
       400, "/c"},
      {"Content-Length and chunked",
       "POST /c HTTP/1.1\r\nContent-Length: 5\r\nTransfer-Encoding: chunked\r\n\r\n"
       "5\r\nhello\r\n0\r\n\r\n",
       400, "/c"},
      {"gzip transfer coding", "POST /c HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501, "/c"},
      {"gzip then chunked", "POST /c HTTP/1.1\r\nTransfer-Encoding: gzip, chunked\r\n\r\n", 501,
       "/c"},
      {"two Transfer-Encoding fields",
       "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\nTransfer-Encoding: chunked\r\n\r\n", 400,
       "/c"},
      {"chunked on HTTP/1.0",
       "POST /c HTTP/1.0\r\nTransfer-Encoding: chunked\r\n\r\n5\r\nhello\r\n0\r\n\r\n", 400, "/c"},
      // Head size and count.
      {"head one byte over maxHeadBytes",
       "GET /x HTTP/1.1\r\nX-Fill: " + std::string(101 - 29, 'f') + "\r\n\r\n",
       431,
       "",
       {.maxHeadBytes = 100}},
      {"head whose blank line never comes",
       "GET /x HTTP/1.1\r\nX-Fill: " + std::string(200, 'f'),
       431,
       "",
       {.maxHeadBytes = 100}},
      {"request line that never ends",
       "GET /" + std::string(200, 'a'),
       431,
       "",
       {.maxHeadBytes = 100}},
      {"more than maxHeaders fields",
       "GET /h HTTP/1.1\r\nA: 1\r\nB: 2\r\nC: 3\r\nD: 4\r\n\r\n",
       431,
       "/h",
       {.maxHeaders = 3}},
      {"nothing but empty lines", Repeat("\r\n", 60), 400, "", {.maxHeadBytes = 100}},
      // Header fields.
      {"obsolete line folding", "GET /f HTTP/1.1\r\nX-A: a\r\n  folded\r\n\r\n", 400, "/f"},
      {"folding with a tab", "GET /f HTTP/1.1\r\nX-A: a\r\n\tfolded\r\n\r\n", 400, "/f"},
      {"space before the colon", "GET /f HTTP/1.1\r\nHost : a\r\n\r\n", 400, "/f"},
      {"no colon", "GET /f HTTP/1.1\r\nHost a\r\n\r\n", 400, "/f"},
      {"empty field name", "GET /f HTTP/1.1\r\n: a\r\n\r\n", 400, "/f"},
      {"bare LF in a value", "GET /f HTTP/1.1\r\nX-A: a\nX-B: b\r\n\r\n", 400, "/f"},
      {"bare CR in a value", "GET /f HTTP/1.1\r\nX-A: a\rb\r\n\r\n", 400, "/f"},
      {"NUL in a value", "GET /f HTTP/1.1\r\nX-A: a\0b\r\n\r\n"s, 400, "/f"},
      {"NUL in a name", "GET /f HTTP/1.1\r\nX\0A: a\r\n\r\n"s, 400, "/f"},
      {"CR at the end of a value", "GET /f HTTP/1.1\r\nX-A: a\r\r\n\r\n", 400, "/f"},
      // Request line.
      {"no version", "GET /\r\n\r\n", 400, ""},
      {"only a method", "GET\r\n\r\n", 400, ""},
      {"two spaces before the target", "GET  / HTTP/1.1\r\n\r\n", 400, ""},
      {"space inside the target", "GET /a b HTTP/1.1\r\n\r\n", 400, ""},
      {"trailing text after the version", "GET / HTTP/1.1 x\r\n\r\n", 400, ""},
      {"bad character in the method", "GE(T / HTTP/1.1\r\n\r\n", 400, ""},
      {"control character in the target", "GET /a\x01 HTTP/1.1\r\n\r\n", 400, ""},
      {"DEL in the target", "GET /a\x7f HTTP/1.1\r\n\r\n", 400, ""},
      {"lower-case protocol name", "GET / http/1.1\r\n\r\n", 400, ""},
      {"version without minor", "GET / HTTP/1\r\n\r\n", 400, ""},
      {"not HTTP at all", "\x16\x03\x01\x02\x00\x01\x00\x01\xfc\x03\x03\r\n\r\n"s, 400, ""},
      {"bare LF ending the request line", "GET / HTTP/1.1\nHost: a\r\n\r\n", 400, ""},
      {"HTTP/2.0", "GET /v HTTP/2.0\r\n\r\n", 505, ""},
      {"HTTP/0.9 written as a version", "GET /v HTTP/0.9\r\n\r\n", 505, ""},
  };
}

}  // namespace

TEST_CASE("http parser: accepted requests, whole, byte by byte and split, give the same result") {
  for (const Accepted& c : AcceptedCases()) {
    INFO(c.name);
    Parsed p = ParseEveryWay(c.input, c.limits);
    REQUIRE(p.state == State::kComplete);
    CHECK(p.method == c.method);
    CHECK(p.target == c.target);
    CHECK(p.path == c.path);
    CHECK(p.headers == c.headers);
    CHECK(p.body == c.body);
    CHECK(p.keepAlive == c.keepAlive);
    CHECK(p.consumed == (c.consumed == 0 ? c.input.size() : c.consumed));
  }
}

TEST_CASE("http parser: refused requests give their status every way they are fed") {
  for (const Refused& c : RefusedCases()) {
    INFO(c.name);
    Parsed p = ParseEveryWay(c.input, c.limits);
    CHECK(p.state == State::kError);
    CHECK(p.errorStatus == c.status);
    CHECK(p.errorPath == c.errorPath);
  }
}

TEST_CASE("http parser: the error message says what was wrong") {
  RequestParser parser({.maxBodyBytes = 10});
  REQUIRE(parser.Feed("POST /p HTTP/1.1\r\nContent-Length: 11\r\n\r\n") == State::kError);
  CHECK(parser.ErrorStatus() == 413);
  CHECK(parser.ErrorMessage().find("10") != std::string::npos);
  CHECK(parser.ErrorPath() == "/p");
}

TEST_CASE("http parser: pipelined requests, one after another with Consumed and Reset") {
  std::string buffer =
      "GET /one?x HTTP/1.1\r\nHost: a\r\n\r\n"
      "POST /two HTTP/1.1\r\nContent-Length: 5\r\n\r\nhello"
      "\r\n"  // a stray CRLF after a body, as some clients send: skipped
      "POST /three HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n0\r\n\r\n"
      "GET /four HTTP/1.0\r\n\r\n"
      "GET /fi";
  struct Expected {
    std::string method, path, body;
    bool keepAlive;
  };
  const std::vector<Expected> expected = {{"GET", "/one", "", true},
                                          {"POST", "/two", "hello", true},
                                          {"POST", "/three", "abc", true},
                                          {"GET", "/four", "", false}};
  RequestParser parser;
  for (const Expected& e : expected) {
    CAPTURE(e.path);
    REQUIRE(parser.Feed(buffer) == State::kComplete);
    const Request& r = parser.Get();
    CHECK(r.method == e.method);
    CHECK(r.path == e.path);
    CHECK(r.body == e.body);
    CHECK(r.keepAlive == e.keepAlive);
    CHECK(parser.Consumed() <= buffer.size());
    buffer.erase(0, parser.Consumed());
    parser.Reset();
    CHECK_FALSE(parser.Started());
  }
  CHECK(buffer == "GET /fi");
  CHECK(parser.Feed(buffer) == State::kNeedMore);
  CHECK(parser.Started());
  buffer += "ve HTTP/1.1\r\n\r\n";
  REQUIRE(parser.Feed(buffer) == State::kComplete);
  CHECK(parser.Get().path == "/five");
  CHECK(parser.Consumed() == buffer.size());
}

TEST_CASE("http parser: a parser reset after an error parses the next request") {
  RequestParser parser;
  REQUIRE(parser.Feed("GET / HTTP/2.0\r\n\r\n") == State::kError);
  parser.Reset();
  CHECK(parser.ErrorStatus() == 0);
  REQUIRE(parser.Feed("GET /ok HTTP/1.1\r\n\r\n") == State::kComplete);
  CHECK(parser.Get().path == "/ok");
}

TEST_CASE("http parser: Started") {
  RequestParser parser;
  CHECK_FALSE(parser.Started());
  CHECK(parser.Feed("") == State::kNeedMore);
  CHECK_FALSE(parser.Started());
  CHECK(parser.Feed("G") == State::kNeedMore);
  CHECK(parser.Started());
}

TEST_CASE("http parser: WantsContinue and ExpectedBytes") {
  const std::string head = "POST /p HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n";
  SUBCASE("Content-Length body not yet sent") {
    RequestParser parser;
    REQUIRE(parser.Feed(head.substr(0, head.size() - 1)) == State::kNeedMore);
    CHECK_FALSE(parser.WantsContinue());  // the head is not complete yet
    CHECK(parser.ExpectedBytes() == 0);
    REQUIRE(parser.Feed(head) == State::kNeedMore);
    CHECK(parser.WantsContinue());
    CHECK(parser.ExpectedBytes() == head.size() + 5);
    REQUIRE(parser.Feed(head + "he") == State::kNeedMore);
    CHECK(parser.WantsContinue());
    CHECK(parser.ExpectedBytes() == head.size() + 5);
    const std::string whole = head + "hello";  // the request's views point into it
    REQUIRE(parser.Feed(whole) == State::kComplete);
    CHECK_FALSE(parser.WantsContinue());
    CHECK(parser.Get().body == "hello");
    parser.Reset();
    CHECK_FALSE(parser.WantsContinue());
    CHECK(parser.ExpectedBytes() == 0);
  }
  SUBCASE("ExpectedBytes counts skipped empty lines") {
    RequestParser parser;
    REQUIRE(parser.Feed("\r\n" + head) == State::kNeedMore);
    CHECK(parser.ExpectedBytes() == 2 + head.size() + 5);
  }
  SUBCASE("any case of 100-continue") {
    RequestParser parser;
    REQUIRE(parser.Feed("POST /p HTTP/1.1\r\nexpect: 100-Continue\r\nContent-Length: 1\r\n\r\n") ==
            State::kNeedMore);
    CHECK(parser.WantsContinue());
  }
  SUBCASE("no Expect") {
    RequestParser parser;
    REQUIRE(parser.Feed("POST /p HTTP/1.1\r\nContent-Length: 5\r\n\r\n") == State::kNeedMore);
    CHECK_FALSE(parser.WantsContinue());
    CHECK(parser.ExpectedBytes() == 39 + 5);
  }
  SUBCASE("another expectation") {
    RequestParser parser;
    REQUIRE(parser.Feed("POST /p HTTP/1.1\r\nExpect: x\r\nContent-Length: 5\r\n\r\n") ==
            State::kNeedMore);
    CHECK_FALSE(parser.WantsContinue());
  }
  SUBCASE("chunked: continue wanted, length unknown") {
    RequestParser parser;
    std::string chunkedHead =
        "POST /p HTTP/1.1\r\nExpect: 100-continue\r\nTransfer-Encoding: chunked\r\n\r\n";
    REQUIRE(parser.Feed(chunkedHead) == State::kNeedMore);
    CHECK(parser.WantsContinue());
    CHECK(parser.ExpectedBytes() == 0);
    REQUIRE(parser.Feed(chunkedHead + "2\r\nok\r\n") == State::kNeedMore);
    CHECK(parser.WantsContinue());
    REQUIRE(parser.Feed(chunkedHead + "2\r\nok\r\n0\r\n\r\n") == State::kComplete);
    CHECK_FALSE(parser.WantsContinue());
  }
  SUBCASE("an empty body needs no continue") {
    RequestParser parser;
    REQUIRE(parser.Feed("POST /p HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 0\r\n\r\n") ==
            State::kComplete);
    CHECK_FALSE(parser.WantsContinue());
  }
  SUBCASE("a body over the limit is refused instead") {
    RequestParser parser({.maxBodyBytes = 4});
    CHECK(parser.Feed(head) == State::kError);
    CHECK(parser.ErrorStatus() == 413);
  }
}

// RFC 9110 §10.1.1: "A server that receives a 100-continue expectation in an HTTP/1.0 request
// MUST ignore that expectation."
TEST_CASE("http parser: Expect: 100-continue is ignored on HTTP/1.0") {
  RequestParser parser;
  REQUIRE(parser.Feed("POST /p HTTP/1.0\r\nExpect: 100-continue\r\nContent-Length: 5\r\n\r\n") ==
          State::kNeedMore);
  CHECK_FALSE(parser.WantsContinue());
}

// RFC 9112 §9.3: when "close" is present the connection does not persist, whatever else is listed.
TEST_CASE("http parser: close wins over keep-alive on HTTP/1.0") {
  CHECK_FALSE(FeedWhole("GET / HTTP/1.0\r\nConnection: close, keep-alive\r\n\r\n", {}).keepAlive);
  CHECK_FALSE(FeedWhole("GET / HTTP/1.0\r\nConnection: close\r\nConnection: keep-alive\r\n\r\n", {})
                  .keepAlive);
}

TEST_CASE("http parser: HeaderValue is case-insensitive and gives the first value") {
  RequestParser parser;
  REQUIRE(parser.Feed("POST / HTTP/1.1\r\nContent-Type: application/json\r\nX-Dup: first\r\n"
                      "x-dup: second\r\nContent-Length: 0\r\n\r\n") == State::kComplete);
  const Request& r = parser.Get();
  CHECK(r.HeaderValue("content-type") == "application/json");
  CHECK(r.HeaderValue("CONTENT-TYPE") == "application/json");
  CHECK(r.HeaderValue("X-DUP") == "first");
  CHECK(r.HeaderValue("x-missing").empty());
  CHECK(r.HeaderValue("Content-Typ").empty());
  CHECK(r.HeaderValue("").empty());
}

TEST_CASE("http response: AppendResponse writes the exact bytes") {
  struct Case {
    const char* name;
    Response response;
    bool close;
    std::string expected;
  };
  const std::vector<Case> cases = {
      {"simple",
       {.body = "hi", .headers = {}},
       false,
       "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n\r\nhi"},
      {"Connection: close",
       {.body = "hi", .headers = {}},
       true,
       "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 2\r\n"
       "Connection: close\r\n\r\nhi"},
      {"empty body",
       {.status = 404, .body = "", .headers = {}},
       false,
       "HTTP/1.1 404 Not Found\r\nContent-Type: text/plain; charset=utf-8\r\n"
       "Content-Length: 0\r\n\r\n"},
      {"content type and extra headers after the framing ones",
       {.status = 413,
        .contentType = "application/json",
        .body = "{}",
        .headers = {{"Warning", "299 - \"x\""}, {"X-A", "1"}}},
       true,
       "HTTP/1.1 413 Content Too Large\r\nContent-Type: application/json\r\nContent-Length: 2\r\n"
       "Connection: close\r\nWarning: 299 - \"x\"\r\nX-A: 1\r\n\r\n{}"},
      {"Content-Length counts bytes",
       {.body = "caf\xc3\xa9\0\r\n"s, .headers = {}},
       false,
       "HTTP/1.1 200 OK\r\nContent-Type: text/plain; charset=utf-8\r\nContent-Length: 8\r\n\r\n"
       "caf\xc3\xa9\0\r\n"s},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    std::string out;
    AppendResponse(c.response, c.close, out);
    CHECK(out == c.expected);
  }
}

TEST_CASE("http response: AppendResponse appends after what is already there") {
  std::string out = "HTTP/1.1 100 Continue\r\n\r\n";
  AppendResponse({.status = 500, .body = std::string(5000, 'x'), .headers = {}}, false, out);
  CHECK(out ==
        "HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 500 Internal Server Error\r\nContent-Type: "
        "text/plain; charset=utf-8\r\nContent-Length: 5000\r\n\r\n" +
            std::string(5000, 'x'));
}

TEST_CASE("http response: reason phrases and the interim response") {
  const std::vector<std::pair<int, std::string_view>> cases = {
      {200, "OK"},
      {400, "Bad Request"},
      {404, "Not Found"},
      {405, "Method Not Allowed"},
      {408, "Request Timeout"},
      {413, "Content Too Large"},
      {415, "Unsupported Media Type"},
      {431, "Request Header Fields Too Large"},
      {500, "Internal Server Error"},
      {501, "Not Implemented"},
      {503, "Service Unavailable"},
      {505, "HTTP Version Not Supported"}};
  for (const auto& [status, phrase] : cases) {
    CAPTURE(status);
    CHECK(ReasonPhrase(status) == phrase);
  }
  CHECK_FALSE(ReasonPhrase(299).empty());
  CHECK_FALSE(ReasonPhrase(418).empty());
  CHECK_FALSE(ReasonPhrase(599).empty());
  CHECK(iw::http::kContinue == "HTTP/1.1 100 Continue\r\n\r\n");
}
