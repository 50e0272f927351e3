#include "server/http/http_message.h"

#include <algorithm>
#include <cctype>
#include <charconv>

namespace iw::http {

namespace {

constexpr std::string_view kCrlf = "\r\n";

char Lower(char c) {
  return (c >= 'A' && c <= 'Z') ? static_cast<char>(c - 'A' + 'a') : c;
}

// RFC 9110 §5.6.2 tchar.
bool IsTokenChar(unsigned char c) {
  if (c >= '0' && c <= '9') return true;
  if ((c | 0x20) >= 'a' && (c | 0x20) <= 'z') return true;
  return std::string_view("!#$%&'*+-.^_`|~").find(static_cast<char>(c)) != std::string_view::npos;
}

bool IsToken(std::string_view s) {
  return !s.empty() && std::all_of(s.begin(), s.end(), [](char c) {
    return IsTokenChar(static_cast<unsigned char>(c));
  });
}

std::string_view TrimWhitespace(std::string_view s) {
  while (!s.empty() && (s.front() == ' ' || s.front() == '\t')) s.remove_prefix(1);
  while (!s.empty() && (s.back() == ' ' || s.back() == '\t')) s.remove_suffix(1);
  return s;
}

// Whether comma-separated `list` holds `token` (case-insensitive), as in `Connection: close`.
bool ListContains(std::string_view list, std::string_view token) {
  while (!list.empty()) {
    size_t comma = list.find(',');
    if (EqualsIgnoreCase(TrimWhitespace(list.substr(0, comma)), token)) return true;
    if (comma == std::string_view::npos) break;
    list.remove_prefix(comma + 1);
  }
  return false;
}

void AppendNumber(std::string& out, size_t n) {
  char buf[24];
  auto [end, ec] = std::to_chars(buf, buf + sizeof buf, n);
  out.append(buf, end);
}

}  // namespace

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (Lower(a[i]) != Lower(b[i])) return false;
  }
  return true;
}

std::string_view Request::HeaderValue(std::string_view name) const {
  for (const Header& h : headers) {
    if (EqualsIgnoreCase(h.name, name)) return h.value;
  }
  return {};
}

std::string_view ReasonPhrase(int status) {
  switch (status) {
    case 100:
      return "Continue";
    case 200:
      return "OK";
    case 400:
      return "Bad Request";
    case 404:
      return "Not Found";
    case 405:
      return "Method Not Allowed";
    case 408:
      return "Request Timeout";
    case 413:
      return "Content Too Large";
    case 415:
      return "Unsupported Media Type";
    case 431:
      return "Request Header Fields Too Large";
    case 500:
      return "Internal Server Error";
    case 501:
      return "Not Implemented";
    case 503:
      return "Service Unavailable";
    case 505:
      return "HTTP Version Not Supported";
    default:
      return status < 400 ? "OK" : status < 500 ? "Bad Request" : "Internal Server Error";
  }
}

void AppendResponse(const Response& response, bool close, std::string& out) {
  size_t extra = 0;
  for (const auto& [name, value] : response.headers) extra += name.size() + value.size() + 4;
  out.reserve(out.size() + 96 + response.contentType.size() + extra + response.body.size());
  out += "HTTP/1.1 ";
  AppendNumber(out, static_cast<size_t>(response.status));
  out += ' ';
  out += ReasonPhrase(response.status);
  out += "\r\nContent-Type: ";
  out += response.contentType;
  out += "\r\nContent-Length: ";
  AppendNumber(out, response.body.size());
  out += kCrlf;
  if (close) out += "Connection: close\r\n";
  for (const auto& [name, value] : response.headers) {
    out += name;
    out += ": ";
    out += value;
    out += kCrlf;
  }
  out += kCrlf;
  out += response.body;
}

RequestParser::State RequestParser::Fail(int status, std::string message) {
  errorStatus_ = status;
  errorMessage_ = std::move(message);
  return State::kError;
}

bool RequestParser::WantsContinue() const {
  return expectContinue_ && phase_ != Phase::kHead && phase_ != Phase::kDone;
}

size_t RequestParser::ExpectedBytes() const {
  return phase_ == Phase::kBody ? headEnd_ + contentLength_ : 0;
}

void RequestParser::Reset() {
  phase_ = Phase::kHead;
  started_ = false;
  scanned_ = skipped_ = headEnd_ = contentLength_ = chunkRemaining_ = 0;
  chunked_ = expectContinue_ = false;
  keepAlive_ = true;
  headerSpans_.clear();
  if (chunkedBody_.capacity() > 64 * 1024) {
    std::string().swap(chunkedBody_);
  } else {
    chunkedBody_.clear();
  }
  request_.headers.clear();
  request_.body = {};
  consumed_ = 0;
  errorStatus_ = 0;
  errorMessage_.clear();
  errorPath_.clear();
}

RequestParser::State RequestParser::Feed(std::string_view data) {
  if (!data.empty()) started_ = true;
  switch (phase_) {
    case Phase::kHead:
      return ParseHead(data);
    case Phase::kBody:
      if (data.size() - headEnd_ < contentLength_) return State::kNeedMore;
      return Finish(data, headEnd_ + contentLength_);
    case Phase::kDone:
      return State::kComplete;
    default:
      return ParseChunked(data);
  }
}

// The head as its steps: where it ends, the request line, each header field, the final checks.
RequestParser::State RequestParser::ParseHead(std::string_view data) {
  if (State s = FindHead(data); s != State::kComplete) return s;
  Framing framing;
  size_t lineEnd = data.find(kCrlf, skipped_);
  if (State s = ParseRequestLine(data, lineEnd, framing); s != State::kComplete) return s;
  for (size_t pos = lineEnd + 2; pos < headEnd_ - 2;) {
    size_t eol = data.find(kCrlf, pos);
    if (State s = ParseHeaderLine(data, pos, eol, framing); s != State::kComplete) return s;
    pos = eol + 2;
  }
  return FinishHead(data, framing);
}

// Skips leading empty lines; finds the blank line ending the head (headEnd_), limit maxHeadBytes.
RequestParser::State RequestParser::FindHead(std::string_view data) {
  // RFC 9112 §2.2: empty lines before the request line are ignored.
  while (data.size() >= skipped_ + 2 && data.substr(skipped_, 2) == kCrlf) {
    skipped_ += 2;
    if (skipped_ > limits_.maxHeadBytes) return Fail(400, "request starts with empty lines only");
  }
  size_t from = std::max(skipped_, scanned_ >= 3 ? scanned_ - 3 : 0);
  size_t blank = data.find("\r\n\r\n", from);
  if (blank == std::string_view::npos) {
    scanned_ = data.size();
    if (data.size() - skipped_ > limits_.maxHeadBytes) {
      return Fail(431, "request line and headers are over " + std::to_string(limits_.maxHeadBytes) +
                           " bytes");
    }
    return State::kNeedMore;
  }
  headEnd_ = blank + 4;
  if (headEnd_ - skipped_ > limits_.maxHeadBytes) {
    return Fail(431, "request line and headers are over " + std::to_string(limits_.maxHeadBytes) +
                         " bytes");
  }
  return State::kComplete;
}

// The request line (method SP target SP HTTP-version) up to lineEnd: method_, target_, errorPath_.
RequestParser::State RequestParser::ParseRequestLine(std::string_view data, size_t lineEnd,
                                                     Framing& framing) {
  std::string_view line = data.substr(skipped_, lineEnd - skipped_);
  size_t sp1 = line.find(' ');
  size_t sp2 = sp1 == std::string_view::npos ? sp1 : line.find(' ', sp1 + 1);
  if (sp2 == std::string_view::npos) return Fail(400, "malformed request line");
  std::string_view method = line.substr(0, sp1);
  std::string_view target = line.substr(sp1 + 1, sp2 - sp1 - 1);
  std::string_view version = line.substr(sp2 + 1);
  if (!IsToken(method)) return Fail(400, "malformed request method");
  if (target.empty() || std::any_of(target.begin(), target.end(), [](char c) {
        return static_cast<unsigned char>(c) <= ' ' || c == 0x7f;
      })) {
    return Fail(400, "malformed request target");
  }
  if (State s = ParseVersion(version, framing); s != State::kComplete) return s;
  errorPath_ = std::string(target.substr(0, target.find('?')));
  method_ = {static_cast<uint32_t>(skipped_), static_cast<uint32_t>(method.size())};
  target_ = {static_cast<uint32_t>(skipped_ + sp1 + 1), static_cast<uint32_t>(target.size())};
  return State::kComplete;
}

// HTTP/1.0 (framing.http10) or HTTP/1.1 to 1.9 (taken as 1.1); kError 505 for other HTTP/x.y.
RequestParser::State RequestParser::ParseVersion(std::string_view version, Framing& framing) {
  // HTTP/1.x with x > 1 is answered as 1.1 (RFC 9110 §6.2).
  if (version == "HTTP/1.0") {
    framing.http10 = true;
  } else if (version.size() != 8 || version.substr(0, 7) != "HTTP/1." || version[7] < '1' ||
             version[7] > '9') {
    if (version.size() == 8 && version.substr(0, 5) == "HTTP/") {
      return Fail(505, "HTTP version " + std::string(version.substr(5)) + " is not supported");
    }
    return Fail(400, "malformed HTTP version");
  }
  return State::kComplete;
}

// One header field (pos to eol): checked, recorded in headerSpans_, then ApplyFramingHeader.
RequestParser::State RequestParser::ParseHeaderLine(std::string_view data, size_t pos, size_t eol,
                                                    Framing& framing) {
  std::string_view field = data.substr(pos, eol - pos);
  if (field.front() == ' ' || field.front() == '\t') {
    return Fail(400, "obsolete header line folding is not accepted");
  }
  size_t colon = field.find(':');
  if (colon == std::string_view::npos || !IsToken(field.substr(0, colon))) {
    return Fail(400, "malformed header field");
  }
  std::string_view name = field.substr(0, colon);
  std::string_view value = TrimWhitespace(field.substr(colon + 1));
  if (std::any_of(value.begin(), value.end(),
                  [](char c) { return c == '\0' || c == '\r' || c == '\n'; })) {
    return Fail(400, "malformed header value");
  }
  if (headerSpans_.size() == limits_.maxHeaders) {
    return Fail(431, "more than " + std::to_string(limits_.maxHeaders) + " header fields");
  }
  size_t valueOffset = static_cast<size_t>(value.data() - data.data());
  headerSpans_.push_back(
      {Span{static_cast<uint32_t>(pos), static_cast<uint32_t>(name.size())},
       Span{static_cast<uint32_t>(valueOffset), static_cast<uint32_t>(value.size())}});
  return ApplyFramingHeader(name, value, framing);
}

// What a Content-Length, Transfer-Encoding, Connection or Expect field says about framing.
RequestParser::State RequestParser::ApplyFramingHeader(std::string_view name,
                                                       std::string_view value, Framing& framing) {
  if (EqualsIgnoreCase(name, "Content-Length")) {
    size_t n = 0;
    auto [end, ec] = std::from_chars(value.data(), value.data() + value.size(), n);
    if (value.empty() || ec != std::errc() || end != value.data() + value.size() ||
        value.front() == '+' || value.front() == '-' ||
        (framing.haveLength && n != contentLength_)) {
      return Fail(400, "malformed Content-Length");
    }
    framing.haveLength = true;
    contentLength_ = n;
  } else if (EqualsIgnoreCase(name, "Transfer-Encoding")) {
    if (framing.haveEncoding) return Fail(400, "more than one Transfer-Encoding field");
    framing.haveEncoding = true;
    if (!EqualsIgnoreCase(value, "chunked")) {
      return Fail(501, "transfer coding \"" + std::string(value) + "\" is not supported");
    }
    chunked_ = true;
  } else if (EqualsIgnoreCase(name, "Connection")) {
    framing.sawClose = framing.sawClose || ListContains(value, "close");
    framing.sawKeepAlive = framing.sawKeepAlive || ListContains(value, "keep-alive");
  } else if (EqualsIgnoreCase(name, "Expect")) {
    // HTTP/1.0 clients cannot ask for 100 Continue (RFC 9110 §10.1.1).
    expectContinue_ = !framing.http10 && EqualsIgnoreCase(value, "100-continue");
  }
  return State::kComplete;
}

// The checks once every field is read (keep-alive, framing, body size), then parses the body.
RequestParser::State RequestParser::FinishHead(std::string_view data, const Framing& framing) {
  // `close` wins over `keep-alive` (RFC 9112 §9.3); HTTP/1.0 closes unless asked not to.
  keepAlive_ = !framing.sawClose && (!framing.http10 || framing.sawKeepAlive);
  if (chunked_ && framing.haveLength) {
    return Fail(400, "both Content-Length and Transfer-Encoding are set");
  }
  if (chunked_) {
    if (framing.http10) return Fail(400, "chunked transfer coding needs HTTP/1.1");
    phase_ = Phase::kChunkSize;
    scanned_ = headEnd_;
    return ParseChunked(data);
  }
  if (contentLength_ > limits_.maxBodyBytes) {
    return Fail(413, "request body of " + std::to_string(contentLength_) +
                         " bytes is too large; limit is " + std::to_string(limits_.maxBodyBytes) +
                         " bytes");
  }
  phase_ = Phase::kBody;
  return Feed(data);
}

RequestParser::State RequestParser::ParseChunked(std::string_view data) {
  constexpr size_t kMaxChunkLine = 1024;
  size_t pos = scanned_;
  for (;;) {
    if (pos - headEnd_ > 2 * limits_.maxBodyBytes + limits_.maxHeadBytes) {
      return Fail(413, "chunked request body is too large; limit is " +
                           std::to_string(limits_.maxBodyBytes) + " bytes");
    }
    switch (phase_) {
      case Phase::kChunkSize: {
        size_t eol = data.find(kCrlf, pos);
        if (eol == std::string_view::npos) {
          // Too long already, even if the CRLF comes next (the same answer as when it is there).
          if (data.size() - pos >= kMaxChunkLine + 2) return Fail(400, "malformed chunk size line");
          scanned_ = pos;
          return State::kNeedMore;
        }
        std::string_view line = data.substr(pos, eol - pos);
        size_t digits = 0;
        while (digits < line.size() && std::isxdigit(static_cast<unsigned char>(line[digits]))) {
          ++digits;
        }
        std::string_view rest = TrimWhitespace(line.substr(digits));
        if (digits == 0 || digits > 15 || eol - pos > kMaxChunkLine ||
            (!rest.empty() && rest.front() != ';')) {
          return Fail(400, "malformed chunk size line");
        }
        size_t size = 0;
        std::from_chars(line.data(), line.data() + digits, size, 16);
        pos = eol + 2;
        if (size == 0) {
          phase_ = Phase::kTrailers;
        } else {
          if (size > limits_.maxBodyBytes - chunkedBody_.size()) {
            return Fail(413, "chunked request body is too large; limit is " +
                                 std::to_string(limits_.maxBodyBytes) + " bytes");
          }
          chunkRemaining_ = size;
          phase_ = Phase::kChunkData;
        }
        break;
      }
      case Phase::kChunkData: {
        size_t take = std::min(chunkRemaining_, data.size() - pos);
        chunkedBody_.append(data.substr(pos, take));
        pos += take;
        chunkRemaining_ -= take;
        if (chunkRemaining_ > 0) {
          scanned_ = pos;
          return State::kNeedMore;
        }
        phase_ = Phase::kChunkEnd;
        break;
      }
      case Phase::kChunkEnd:
        if (data.size() - pos < 2) {
          scanned_ = pos;
          return State::kNeedMore;
        }
        if (data.substr(pos, 2) != kCrlf) return Fail(400, "malformed chunk: no CRLF after data");
        pos += 2;
        phase_ = Phase::kChunkSize;
        break;
      case Phase::kTrailers: {
        size_t eol = data.find(kCrlf, pos);
        if ((eol == std::string_view::npos && data.size() - pos >= limits_.maxHeadBytes + 2) ||
            (eol != std::string_view::npos && eol - pos > limits_.maxHeadBytes)) {
          return Fail(431,
                      "a trailer field is over " + std::to_string(limits_.maxHeadBytes) + " bytes");
        }
        if (eol == std::string_view::npos) {
          scanned_ = pos;
          return State::kNeedMore;
        }
        if (eol == pos) return Finish(data, pos + 2);
        pos = eol + 2;  // trailer fields are ignored
        break;
      }
      default:
        return Fail(400, "malformed chunked body");
    }
  }
}

RequestParser::State RequestParser::Finish(std::string_view data, size_t end) {
  request_.method = method_.In(data);
  request_.target = target_.In(data);
  request_.path = request_.target.substr(0, request_.target.find('?'));
  request_.headers.clear();
  for (const auto& [name, value] : headerSpans_) {
    request_.headers.push_back({name.In(data), value.In(data)});
  }
  request_.body = chunked_ ? std::string_view(chunkedBody_) : data.substr(headEnd_, contentLength_);
  request_.keepAlive = keepAlive_;
  consumed_ = end;
  phase_ = Phase::kDone;
  return State::kComplete;
}

}  // namespace iw::http
