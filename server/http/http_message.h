// HTTP/1.1 messages as the webhook server sees them: an incremental request parser (RFC 9112
// framing: Content-Length or chunked, keep-alive, Expect: 100-continue, size limits) and the
// serializer of responses. Pure: no sockets, so every framing decision is unit-tested.
#pragma once

#include <cstddef>
#include <cstdint>
#include <string>
#include <string_view>
#include <utility>
#include <vector>

namespace iw::http {

struct Header {
  std::string_view name, value;
};

struct Request {
  std::string_view method;
  std::string_view target;  // as sent: path and query
  std::string_view path;    // target without the query
  std::vector<Header> headers;
  std::string_view body;
  bool keepAlive = true;
  std::string_view remoteAddress;  // set by the server

  // The first value of header `name` (compared case-insensitively), or "".
  std::string_view HeaderValue(std::string_view name) const;
};

struct Response {
  int status = 200;
  std::string_view contentType = "text/plain; charset=utf-8";  // a literal: it is not copied
  std::string body;
  std::vector<std::pair<std::string, std::string>> headers;  // besides the framing ones
};

// ASCII case-insensitive equality, as HTTP compares field names and most tokens.
bool EqualsIgnoreCase(std::string_view a, std::string_view b);

// The reason phrase for `status` ("OK", "Not Found", ...).
std::string_view ReasonPhrase(int status);

// Appends `response` to `out`: status line, Content-Type, Content-Length, `Connection: close`
// when `close`, the extra headers, and the body.
void AppendResponse(const Response& response, bool close, std::string& out);

// The interim response sent to a client that asked for `Expect: 100-continue`.
inline constexpr std::string_view kContinue = "HTTP/1.1 100 Continue\r\n\r\n";

struct Limits {
  size_t maxHeadBytes = 64 * 1024;        // request line and headers (larger: 431)
  size_t maxHeaders = 100;                // (more: 431)
  size_t maxBodyBytes = 7 * 1024 * 1024;  // decoded body (larger: 413)
};

// Parses one request at a time from the bytes a connection has received. Feed it everything
// received and not yet consumed, starting with the request; it remembers how far it got, so each
// call looks only at new bytes (the bytes may move between calls, their content may not). After
// kComplete, the caller answers, drops `Consumed()` bytes and calls Reset() for the next request.
class RequestParser {
 public:
  enum class State { kNeedMore, kComplete, kError };

  explicit RequestParser(Limits limits = {}) : limits_(limits) {}

  State Feed(std::string_view data);

  // After kComplete: the request. Views into the data of the last Feed (and, for a chunked
  // body, into the parser), valid until that data changes or the next Feed/Reset.
  const Request& Get() const { return request_; }
  Request& Get() { return request_; }
  // After kComplete: how many bytes of the data the request took.
  size_t Consumed() const { return consumed_; }

  // After kError: the status to answer with (400, 413, 431, 501, 505) and why.
  int ErrorStatus() const { return errorStatus_; }
  const std::string& ErrorMessage() const { return errorMessage_; }
  // The request path when the request line was understood before the error, else "".
  std::string_view ErrorPath() const { return errorPath_; }

  // The head is parsed and the body incomplete, and the client waits for `100 Continue`.
  bool WantsContinue() const;
  // Whether any byte of the current request has been seen.
  bool Started() const { return started_; }
  // Whether the request line and headers have all arrived (the body may still be coming).
  bool HeadComplete() const { return phase_ != Phase::kHead; }
  // Bytes the current request will take when its length is known from Content-Length (head +
  // body), else 0: lets the connection size its buffer once.
  size_t ExpectedBytes() const;
  // Whether the head is parsed and says the body is chunked (decoded into the parser's buffer).
  bool Chunked() const { return chunked_ && phase_ != Phase::kHead; }
  // Memory the parser holds for a decoded chunked body (0 otherwise).
  size_t BodyCapacity() const { return chunkedBody_.capacity(); }
  // Lets the decoded chunked body grow to `bytes` without reallocating (the connection sizes it
  // to its receive buffer: the decoded body is never larger than the bytes received).
  void ReserveBody(size_t bytes) {
    if (Chunked()) chunkedBody_.reserve(bytes);
  }

  void Reset();

 private:
  enum class Phase { kHead, kBody, kChunkSize, kChunkData, kChunkEnd, kTrailers, kDone };

  // What the request line and the header fields say about framing, while the head is parsed.
  struct Framing {
    bool http10 = false;
    bool haveLength = false, haveEncoding = false;
    bool sawClose = false, sawKeepAlive = false;
  };

  State Fail(int status, std::string message);
  // The head, as its steps: FindHead, ParseRequestLine (with ParseVersion), ParseHeaderLine for
  // each field (with ApplyFramingHeader), FinishHead. A step returns kComplete when its part is
  // done, kNeedMore when bytes are missing, kError through Fail.
  State ParseHead(std::string_view data);
  State FindHead(std::string_view data);
  State ParseRequestLine(std::string_view data, size_t lineEnd, Framing& framing);
  State ParseVersion(std::string_view version, Framing& framing);
  State ParseHeaderLine(std::string_view data, size_t pos, size_t eol, Framing& framing);
  State ApplyFramingHeader(std::string_view name, std::string_view value, Framing& framing);
  State FinishHead(std::string_view data, const Framing& framing);
  State ParseChunked(std::string_view data);
  State Finish(std::string_view data, size_t end);

  struct Span {
    uint32_t offset = 0, size = 0;
    std::string_view In(std::string_view data) const { return data.substr(offset, size); }
  };

  Limits limits_;
  Phase phase_ = Phase::kHead;
  bool started_ = false;
  size_t scanned_ = 0;  // head: bytes already searched for the blank line; chunks: parse position
  size_t skipped_ = 0;  // empty lines before the request line
  size_t headEnd_ = 0;
  size_t contentLength_ = 0;
  size_t chunkRemaining_ = 0;
  bool chunked_ = false;
  bool expectContinue_ = false;
  bool keepAlive_ = true;
  Span method_, target_;
  std::vector<std::pair<Span, Span>> headerSpans_;
  std::string chunkedBody_;

  Request request_;
  size_t consumed_ = 0;
  int errorStatus_ = 0;
  std::string errorMessage_;
  std::string errorPath_;
};

}  // namespace iw::http
