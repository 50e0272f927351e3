// libFuzzer target: the HTTP/1.1 request parser, as a connection drives it. The input is the
// byte stream a client sends. It is parsed twice: received whole, and received in pieces whose
// sizes come from a generator seeded by the input. Both must give the same requests (method,
// target, headers, body, keep-alive, bytes consumed) and end the same way (the same error
// status, or waiting for more); no request may exceed the limits.
#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <vector>

#include "server/http/http_message.h"

namespace {

using iw::http::RequestParser;

std::vector<std::string> Parse(std::string_view input, const std::vector<size_t>& pieces) {
  iw::http::Limits limits;
  limits.maxHeadBytes = 2048;
  limits.maxHeaders = 16;
  limits.maxBodyBytes = 8192;
  RequestParser parser(limits);
  std::vector<std::string> outcome;
  std::string received;
  size_t offset = 0;
  for (size_t piece : pieces) {
    received.append(input.substr(offset, piece));
    offset += piece;
    for (;;) {
      RequestParser::State state = parser.Feed(received);
      if (state == RequestParser::State::kError) {
        int status = parser.ErrorStatus();
        if (status < 400 || status > 505 || parser.ErrorMessage().empty()) __builtin_trap();
        outcome.push_back("error " + std::to_string(status));
        return outcome;
      }
      if (state == RequestParser::State::kNeedMore) break;
      const iw::http::Request& r = parser.Get();
      if (parser.Consumed() > received.size() || parser.Consumed() == 0) __builtin_trap();
      if (r.body.size() > limits.maxBodyBytes || r.method.empty() || r.target.empty()) {
        __builtin_trap();
      }
      std::string line(r.method);
      line += ' ';
      line += r.target;
      line += r.keepAlive ? " keep-alive" : " close";
      for (const auto& h : r.headers) {
        line += '|';
        line += h.name;
        line += '=';
        line += h.value;
      }
      line += " body=";
      line += r.body;
      line += " consumed=" + std::to_string(parser.Consumed());
      outcome.push_back(std::move(line));
      received.erase(0, parser.Consumed());
      parser.Reset();
    }
  }
  outcome.push_back(received.empty() ? "idle" : "incomplete");
  return outcome;
}

}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  std::string_view input(reinterpret_cast<const char*>(data), size);
  std::vector<std::string> whole = Parse(input, {input.size()});

  uint32_t seed = 2166136261u;
  for (size_t i = 0; i < std::min<size_t>(size, 16); ++i) seed = (seed ^ data[i]) * 16777619u;
  std::vector<size_t> pieces;
  for (size_t left = size; left > 0;) {
    seed = seed * 1103515245u + 12345u;
    size_t piece = std::min<size_t>(left, 1 + (seed >> 16) % 64);
    pieces.push_back(piece);
    left -= piece;
  }
  if (Parse(input, pieces) != whole) __builtin_trap();
  return 0;
}
