// http::Server over real sockets on 127.0.0.1 (plain HTTP, and TLS where the eviction order reads
// the handshake; TLS requests are covered by the Python suites, which have the dev certificates),
// driven by a small blocking client. No timing assertions: every wait is for a condition, with a
// deadline of several seconds.
#include <doctest/doctest.h>
#include <openssl/bio.h>
#include <openssl/err.h>
#include <openssl/pem.h>
#include <openssl/ssl.h>

#include <arpa/inet.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <atomic>
#include <cctype>
#include <cerrno>
#include <chrono>
#include <cstdio>
#include <memory>
#include <mutex>
#include <optional>
#include <stdexcept>
#include <string>
#include <string_view>
#include <thread>
#include <tuple>
#include <vector>

#include "server/certs/cert_crypto.h"
#include "server/http/http_server.h"

namespace http = iw::http;
using namespace std::chrono_literals;
using Clock = std::chrono::steady_clock;
using std::chrono::milliseconds;

namespace {

// Waits up to `limit` for `condition()` to hold; returns whether it did.
template <class Condition>
bool WaitFor(Condition condition, milliseconds limit = 10s) {
  auto deadline = Clock::now() + limit;
  while (!condition()) {
    if (Clock::now() >= deadline) return false;
    std::this_thread::sleep_for(5ms);
  }
  return true;
}

bool EqualsIgnoreCase(std::string_view a, std::string_view b) {
  if (a.size() != b.size()) return false;
  for (size_t i = 0; i < a.size(); ++i) {
    if (std::tolower(static_cast<unsigned char>(a[i])) !=
        std::tolower(static_cast<unsigned char>(b[i]))) {
      return false;
    }
  }
  return true;
}

struct SslFree {
  void operator()(SSL_CTX* c) const { SSL_CTX_free(c); }
  void operator()(SSL* s) const { SSL_free(s); }
  void operator()(BIO* b) const { BIO_free(b); }
  void operator()(X509* x) const { X509_free(x); }
  void operator()(EVP_PKEY* k) const { EVP_PKEY_free(k); }
};
template <class T>
using Ssl = std::unique_ptr<T, SslFree>;

// A TLS server context with a serving certificate made for the test.
Ssl<SSL_CTX> ServerTlsContext() {
  const int64_t now = static_cast<int64_t>(std::chrono::duration_cast<std::chrono::seconds>(
                                               std::chrono::system_clock::now().time_since_epoch())
                                               .count());
  iw::certs::Pem ca, serving;
  REQUIRE(iw::certs::GenerateCa("test CA", now - 60, now + 3600, ca).ok());
  REQUIRE(iw::certs::IssueServing(ca, {"svc.ns.svc"}, now - 60, now + 3600, serving).ok());
  Ssl<BIO> cb(BIO_new_mem_buf(serving.cert.data(), static_cast<int>(serving.cert.size())));
  Ssl<X509> cert(PEM_read_bio_X509(cb.get(), nullptr, nullptr, nullptr));
  Ssl<BIO> kb(BIO_new_mem_buf(serving.key.data(), static_cast<int>(serving.key.size())));
  Ssl<EVP_PKEY> key(PEM_read_bio_PrivateKey(kb.get(), nullptr, nullptr, nullptr));
  Ssl<SSL_CTX> ctx(SSL_CTX_new(TLS_server_method()));
  REQUIRE((ctx && cert && key));
  REQUIRE(SSL_CTX_use_certificate(ctx.get(), cert.get()) == 1);
  REQUIRE(SSL_CTX_use_PrivateKey(ctx.get(), key.get()) == 1);
  return ctx;
}

// The first bytes a TLS client sends: its ClientHello.
std::string ClientHello() {
  Ssl<SSL_CTX> ctx(SSL_CTX_new(TLS_client_method()));
  Ssl<SSL> ssl(SSL_new(ctx.get()));
  BIO* in = BIO_new(BIO_s_mem());
  BIO* out = BIO_new(BIO_s_mem());
  SSL_set_bio(ssl.get(), in, out);  // owned by ssl from here
  SSL_set_connect_state(ssl.get());
  SSL_do_handshake(ssl.get());  // wants the server's answer; the hello is written
  ERR_clear_error();
  char* data = nullptr;
  long size = BIO_get_mem_data(out, &data);
  REQUIRE(size > 0);
  return std::string(data, static_cast<size_t>(size));
}

// One response as the client read it.
struct Reply {
  int status = 0;
  std::string statusLine;
  std::vector<std::pair<std::string, std::string>> headers;
  std::string body;

  std::string Header(std::string_view name) const {
    for (const auto& [n, v] : headers) {
      if (EqualsIgnoreCase(n, name)) return v;
    }
    return {};
  }
  bool Closes() const { return EqualsIgnoreCase(Header("Connection"), "close"); }
};

// A blocking TCP client on one connection to 127.0.0.1:`port`, from `source` (another loopback
// address stands for another pod) or 127.0.0.1.
class Client {
 public:
  explicit Client(int port, const char* source = nullptr) {
    fd_ = ::socket(AF_INET, SOCK_STREAM | SOCK_CLOEXEC, 0);
    if (source != nullptr) {
      sockaddr_in from{};
      from.sin_family = AF_INET;
      inet_pton(AF_INET, source, &from.sin_addr);
      if (::bind(fd_, reinterpret_cast<sockaddr*>(&from), sizeof from) != 0) {
        connectError_ = errno;
        Close();
        return;
      }
    }
    timeval tv{10, 0};  // a send never blocks the test for ever
    setsockopt(fd_, SOL_SOCKET, SO_SNDTIMEO, &tv, sizeof tv);
    int on = 1;
    setsockopt(fd_, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
    sockaddr_in addr{};
    addr.sin_family = AF_INET;
    addr.sin_port = htons(static_cast<uint16_t>(port));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (::connect(fd_, reinterpret_cast<sockaddr*>(&addr), sizeof addr) != 0) {
      connectError_ = errno;
      Close();
    }
  }
  ~Client() { Close(); }
  Client(const Client&) = delete;
  Client& operator=(const Client&) = delete;

  bool Connected() const { return fd_ >= 0; }
  int ConnectError() const { return connectError_; }

  // Sends all of `data`; false when the connection fails.
  bool Send(std::string_view data) {
    while (!data.empty()) {
      ssize_t n = ::send(fd_, data.data(), data.size(), MSG_NOSIGNAL);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) return false;
      data.remove_prefix(static_cast<size_t>(n));
    }
    return true;
  }

  // The next response (the body framed by Content-Length), or nullopt when the connection closes
  // or no full response comes within `wait`.
  std::optional<Reply> Read(milliseconds wait = 10s) {
    auto deadline = Clock::now() + wait;
    for (;;) {
      if (auto reply = TakeReply()) return reply;
      if (!Fill(deadline)) return std::nullopt;
    }
  }

  // Whether the server closes the connection (end of stream or reset) within `wait`. Bytes that
  // come first are kept for Read.
  bool WaitClosed(milliseconds wait = 10s) {
    auto deadline = Clock::now() + wait;
    while (!closed_) {
      if (!Fill(deadline) && !closed_) return false;
    }
    return true;
  }

  // Bytes received and not yet taken by Read.
  const std::string& Pending() const { return buffer_; }

  // Closes the connection; with `reset`, with a TCP reset instead of a FIN.
  void Close(bool reset = false) {
    if (fd_ < 0) return;
    if (reset) {
      linger l{1, 0};
      setsockopt(fd_, SOL_SOCKET, SO_LINGER, &l, sizeof l);
    }
    ::close(fd_);
    fd_ = -1;
  }

 private:
  // Receives more bytes until `deadline`. False on timeout, end of stream or error.
  bool Fill(Clock::time_point deadline) {
    if (closed_ || fd_ < 0) return false;
    for (;;) {
      auto left = std::chrono::duration_cast<milliseconds>(deadline - Clock::now()).count();
      if (left < 0) return false;
      pollfd p{fd_, POLLIN, 0};
      int r = ::poll(&p, 1, static_cast<int>(left));
      if (r < 0 && errno == EINTR) continue;
      if (r <= 0) return false;
      char chunk[65536];
      ssize_t n = ::recv(fd_, chunk, sizeof chunk, 0);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        closed_ = true;
        return false;
      }
      buffer_.append(chunk, static_cast<size_t>(n));
      return true;
    }
  }

  std::optional<Reply> TakeReply() {
    size_t headEnd = buffer_.find("\r\n\r\n");
    if (headEnd == std::string::npos) return std::nullopt;
    Reply reply;
    std::string_view head(buffer_.data(), headEnd + 2);
    size_t eol = head.find("\r\n");
    reply.statusLine = std::string(head.substr(0, eol));
    if (reply.statusLine.size() >= 12) reply.status = std::stoi(reply.statusLine.substr(9, 3));
    for (size_t pos = eol + 2; pos < head.size();) {
      size_t end = head.find("\r\n", pos);
      std::string_view field = head.substr(pos, end - pos);
      size_t colon = field.find(':');
      std::string_view value = colon == std::string_view::npos ? "" : field.substr(colon + 1);
      while (!value.empty() && value.front() == ' ') value.remove_prefix(1);
      reply.headers.emplace_back(field.substr(0, colon), value);
      pos = end + 2;
    }
    std::string length = reply.Header("Content-Length");
    size_t bodySize = length.empty() ? 0 : std::stoul(length);
    if (buffer_.size() < headEnd + 4 + bodySize) return std::nullopt;
    reply.body = buffer_.substr(headEnd + 4, bodySize);
    buffer_.erase(0, headEnd + 4 + bodySize);
    return reply;
  }

  int fd_ = -1;
  int connectError_ = 0;
  bool closed_ = false;
  std::string buffer_;
};

// A server on 127.0.0.1 whose default handler echoes the request, and whose ErrorResponder
// records each refusal and marks its answer with X-Refused.
class TestServer {
 public:
  struct Refusal {
    int status;
    std::string message, path;
  };

  explicit TestServer(http::ServerOptions options, http::Handler handler = nullptr) {
    options.name = "test";
    options.bindAddress = "127.0.0.1";
    options.port = 0;
    if (options.workerThreads == 0) options.workerThreads = 2;
    if (!handler) {
      handler = [this](const http::Request& r, http::Response& response) { Echo(r, response); };
    }
    server_ = std::make_unique<http::Server>(
        options, std::move(handler),
        [this](int status, std::string_view message, std::string_view path, http::Response& out) {
          {
            std::lock_guard lock(mu_);
            refusals_.push_back({status, std::string(message), std::string(path)});
          }
          out.status = status;
          out.body = "refused " + std::to_string(status) + " at [" + std::string(path) + "]";
          out.headers.emplace_back("X-Refused", std::to_string(status));
        });
    startStatus_ = server_->Start();
  }

  // The default handler: "<method> <target> <body size>\n<body>"; /throw and /throw-int throw;
  // /big answers
  // `bigBody`.
  void Echo(const http::Request& r, http::Response& response) {
    handled_.fetch_add(1);
    if (r.path == "/throw") throw std::runtime_error("handler failure for the test");
    if (r.path == "/throw-int") throw 42;  // not a std::exception
    if (r.path == "/big") {
      response.body = BigBody();
      return;
    }
    response.body = std::string(r.method) + " " + std::string(r.target) + " " +
                    std::to_string(r.body.size()) + "\n" + std::string(r.body);
    response.headers.emplace_back("X-Remote", std::string(r.remoteAddress));
  }

  static std::string BigBody() {
    std::string body;
    for (size_t i = 0; body.size() < (4u << 20); ++i) body += std::to_string(i) + ",";
    return body;
  }

  http::Server& operator*() { return *server_; }
  http::Server* operator->() { return server_.get(); }
  const iw::Status& StartStatus() const { return startStatus_; }
  int Port() const { return server_->Port(); }
  int Handled() const { return handled_.load(); }
  std::vector<Refusal> Refusals() {
    std::lock_guard lock(mu_);
    return refusals_;
  }

 private:
  std::mutex mu_;
  std::vector<Refusal> refusals_;
  std::atomic<int> handled_{0};
  iw::Status startStatus_;
  std::unique_ptr<http::Server> server_;  // last: stopped before the rest is destroyed
};

http::ServerOptions DefaultOptions() {
  return {};
}

std::string Get(std::string_view target, std::string_view extra = "") {
  return "GET " + std::string(target) + " HTTP/1.1\r\nHost: test\r\n" + std::string(extra) + "\r\n";
}

std::string Post(std::string_view target, std::string_view body, std::string_view extra = "") {
  return "POST " + std::string(target) +
         " HTTP/1.1\r\nHost: test\r\nContent-Length: " + std::to_string(body.size()) + "\r\n" +
         std::string(extra) + "\r\n" + std::string(body);
}

std::string EchoOf(std::string_view method, std::string_view target, std::string_view body) {
  return std::string(method) + " " + std::string(target) + " " + std::to_string(body.size()) +
         "\n" + std::string(body);
}

// The client's answer is the budget's refusal: 503 with Retry-After, then the connection closes.
void CheckShed(Client& client) {
  auto shed = client.Read();
  REQUIRE(shed.has_value());
  CHECK(shed->status == 503);
  CHECK(shed->Header("Retry-After") == "1");
  CHECK(shed->Closes());
  CHECK(client.WaitClosed());
}

}  // namespace

TEST_CASE("http server: keep-alive serves many requests on one connection") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  CHECK(server->Accepting());
  CHECK(server.Port() > 0);
  Client client(server.Port());
  REQUIRE(client.Connected());
  for (int i = 0; i < 200; ++i) {
    CAPTURE(i);
    std::string target = "/n?i=" + std::to_string(i);
    std::string body = i % 2 == 0 ? "" : std::string(static_cast<size_t>(i), 'b');
    REQUIRE(client.Send(i % 2 == 0 ? Get(target) : Post(target, body)));
    auto reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == 200);
    CHECK(reply->statusLine == "HTTP/1.1 200 OK");
    CHECK(reply->body == EchoOf(i % 2 == 0 ? "GET" : "POST", target, body));
    CHECK_FALSE(reply->Closes());
    CHECK(reply->Header("X-Remote").starts_with("127.0.0.1:"));
  }
  CHECK(server.Handled() == 200);
  CHECK(server->OpenConnections() == 1);
  client.Close();
  CHECK(WaitFor([&] { return server->OpenConnections() == 0; }));
}

TEST_CASE("http server: pipelined requests in one send are answered in order") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client client(server.Port());
  std::string requests;
  std::vector<std::string> expected;
  for (int i = 0; i < 30; ++i) {
    std::string target = "/p" + std::to_string(i);
    if (i % 3 == 0) {
      requests += Get(target);
      expected.push_back(EchoOf("GET", target, ""));
    } else if (i % 3 == 1) {
      std::string body = "body of " + std::to_string(i);
      requests += Post(target, body);
      expected.push_back(EchoOf("POST", target, body));
    } else {
      requests += "POST " + target +
                  " HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\n3\r\nabc\r\n2\r\nde\r\n0\r\n\r\n";
      expected.push_back(EchoOf("POST", target, "abcde"));
    }
  }
  requests += Get("/last", "Connection: close\r\n");
  expected.push_back(EchoOf("GET", "/last", ""));
  REQUIRE(client.Send(requests));
  for (size_t i = 0; i < expected.size(); ++i) {
    CAPTURE(i);
    auto reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == 200);
    CHECK(reply->body == expected[i]);
    CHECK(reply->Closes() == (i + 1 == expected.size()));
  }
  CHECK(client.WaitClosed());
  CHECK(client.Pending().empty());
}

TEST_CASE("http server: a request arriving one byte at a time") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client client(server.Port());
  std::string request = Post("/slow?x=1", "{\"a\":1}", "Content-Type: application/json\r\n");
  for (size_t i = 0; i < request.size(); ++i) {
    REQUIRE(client.Send(request.substr(i, 1)));
    if (i % 8 == 0) std::this_thread::sleep_for(1ms);  // let some bytes arrive alone
  }
  auto reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK(reply->body == EchoOf("POST", "/slow?x=1", "{\"a\":1}"));
  // The connection still serves the next request.
  REQUIRE(client.Send(Get("/after")));
  reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->body == EchoOf("GET", "/after", ""));
  CHECK(server.Handled() == 2);
}

TEST_CASE("http server: Expect: 100-continue gets 100 Continue before the body is sent") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  for (bool chunked : {false, true}) {
    CAPTURE(chunked);
    Client client(server.Port());
    std::string head = chunked ? "POST /review HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                                 "Transfer-Encoding: chunked\r\n\r\n"
                               : "POST /review HTTP/1.1\r\nHost: t\r\nExpect: 100-continue\r\n"
                                 "Content-Length: 11\r\n\r\n";
    REQUIRE(client.Send(head));
    auto interim = client.Read();
    REQUIRE(interim.has_value());
    CHECK(interim->status == 100);
    CHECK(interim->statusLine == "HTTP/1.1 100 Continue");
    CHECK(interim->headers.empty());
    CHECK(client.Pending().empty());
    REQUIRE(client.Send(chunked ? "b\r\nhello world\r\n0\r\n\r\n" : "hello world"));
    auto reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == 200);
    CHECK(reply->body == EchoOf("POST", "/review", "hello world"));
    // No second interim answer for the next request without the expectation.
    REQUIRE(client.Send(Post("/again", "x")));
    reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == 200);
    CHECK(reply->body == EchoOf("POST", "/again", "x"));
  }
}

TEST_CASE("http server: a chunked request body reaches the handler decoded") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client client(server.Port());
  std::string body;
  std::string request = "POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
  for (int i = 1; i <= 40; ++i) {
    std::string chunk(static_cast<size_t>(i * 97), static_cast<char>('a' + i % 26));
    body += chunk;
    char size[16];
    std::snprintf(size, sizeof size, i % 2 == 0 ? "%x" : "%X", static_cast<unsigned>(chunk.size()));
    request += std::string(size) + (i % 5 == 0 ? ";ext=1" : "") + "\r\n" + chunk + "\r\n";
  }
  request += "0\r\nX-Trailer: t\r\n\r\n";
  REQUIRE(client.Send(request));
  auto reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK(reply->body == EchoOf("POST", "/chunked", body));
}

TEST_CASE("http server: large bodies both ways") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client client(server.Port());
  std::string body(3u << 20, 'q');
  for (size_t i = 0; i < body.size(); i += 4093) body[i] = static_cast<char>('a' + i % 26);
  REQUIRE(client.Send(Post("/upload", body)));
  auto reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK(reply->body == EchoOf("POST", "/upload", body));
  REQUIRE(client.Send(Get("/big")));
  reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK(reply->body == TestServer::BigBody());
}

TEST_CASE("http server: HTTP/1.0 and Connection: close end the connection after the answer") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  struct Case {
    const char* name;
    std::string request;
    bool closes;
  };
  const std::vector<Case> cases = {
      {"HTTP/1.0", "GET /ten HTTP/1.0\r\n\r\n", true},
      {"HTTP/1.0 keep-alive", "GET /ten HTTP/1.0\r\nConnection: keep-alive\r\n\r\n", false},
      {"HTTP/1.1 Connection: close", Get("/eleven", "Connection: close\r\n"), true},
      {"HTTP/1.1", Get("/eleven"), false},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    Client client(server.Port());
    REQUIRE(client.Send(c.request));
    auto reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == 200);
    CHECK(reply->Closes() == c.closes);
    if (c.closes) {
      CHECK(client.WaitClosed());
    } else {
      REQUIRE(client.Send(c.request));
      reply = client.Read();
      REQUIRE(reply.has_value());
      CHECK(reply->status == 200);
    }
  }
}

TEST_CASE("http server: a refused request gets the ErrorResponder's answer, then the close") {
  http::ServerOptions options;
  options.limits.maxHeadBytes = 2048;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  struct Case {
    const char* name;
    std::string request;
    int status;
    std::string path;
  };
  const std::vector<Case> cases = {
      {"malformed header", "GET /bad?q=1 HTTP/1.1\r\nHost: t\r\nNo colon here\r\n\r\n", 400,
       "/bad"},
      {"malformed request line", "GARBAGE\r\n\r\n", 400, ""},
      {"HTTP/2.0", "GET /v2 HTTP/2.0\r\n\r\n", 505, ""},
      {"unknown transfer coding", "POST /gz HTTP/1.1\r\nTransfer-Encoding: gzip\r\n\r\n", 501,
       "/gz"},
      {"head too large", "GET /h HTTP/1.1\r\nX-Big: " + std::string(4000, 'x') + "\r\n\r\n", 431,
       ""},
      {"bad chunk", "POST /c HTTP/1.1\r\nTransfer-Encoding: chunked\r\n\r\nzz\r\n", 400, "/c"},
  };
  for (const Case& c : cases) {
    INFO(c.name);
    size_t refusalsBefore = server.Refusals().size();
    Client client(server.Port());
    REQUIRE(client.Send(c.request));
    auto reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == c.status);
    CHECK(reply->Header("X-Refused") == std::to_string(c.status));
    CHECK(reply->body == "refused " + std::to_string(c.status) + " at [" + c.path + "]");
    CHECK(reply->Closes());
    CHECK(client.WaitClosed());
    CHECK(client.Pending().empty());
    auto refusals = server.Refusals();
    REQUIRE(refusals.size() == refusalsBefore + 1);
    CHECK(refusals.back().status == c.status);
    CHECK(refusals.back().path == c.path);
    CHECK_FALSE(refusals.back().message.empty());
  }
  CHECK(server.Handled() == 0);
  CHECK(WaitFor([&] { return server->OpenConnections() == 0; }));
}

TEST_CASE("http server: an oversized body gets 413 while the client is still sending it") {
  http::ServerOptions options;
  options.limits.maxBodyBytes = 1u << 20;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  for (bool expectContinue : {false, true}) {
    CAPTURE(expectContinue);
    Client client(server.Port());
    const size_t size = 2u << 20;
    REQUIRE(
        client.Send("POST /upload HTTP/1.1\r\nHost: t\r\nContent-Length: " + std::to_string(size) +
                    "\r\n" + (expectContinue ? "Expect: 100-continue\r\n" : "") + "\r\n"));
    // A client that does not wait for an answer sends the whole body; the server reads and drops
    // it, so the sending never fails and the 413 is still there to read.
    const std::string piece(64 * 1024, 'z');
    for (size_t sent = 0; sent < size; sent += piece.size()) REQUIRE(client.Send(piece));
    auto reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == 413);
    CHECK(reply->Closes());
    CHECK(reply->body == "refused 413 at [/upload]");
    CHECK(client.WaitClosed());
    CHECK(client.Pending().empty());  // no 100 Continue either
  }
  CHECK(server.Handled() == 0);
}

TEST_CASE("http server: a handler that throws gives a 500 and the server keeps serving") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client client(server.Port());
  REQUIRE(client.Send(Post("/throw?x", "payload")));
  auto reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 500);
  CHECK(reply->body == "refused 500 at [/throw]");
  auto refusals = server.Refusals();
  REQUIRE(refusals.size() == 1);
  CHECK(refusals[0].status == 500);
  CHECK(refusals[0].path == "/throw");
  // Not even a std::exception: still a 500, not the end of the process.
  REQUIRE(client.Send(Post("/throw-int", "payload")));
  reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 500);
  // The same connection, then a new one.
  REQUIRE(client.Send(Get("/ok")));
  reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK(reply->body == EchoOf("GET", "/ok", ""));
  Client other(server.Port());
  REQUIRE(other.Send(Get("/ok2")));
  reply = other.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
}

TEST_CASE("http server: at maxConnections the idle connection that waited longest makes room") {
  http::ServerOptions options;
  options.maxConnections = 2;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client first(server.Port());
  REQUIRE(first.Send(Get("/first")));
  REQUIRE(first.Read().has_value());
  Client second(server.Port());
  REQUIRE(second.Send(Get("/second")));
  REQUIRE(second.Read().has_value());
  CHECK(server->OpenConnections() == 2);
  // Both idle past their grace (1 s: one address holds few connections, kLightPeerGrace): the third
  // is served at once, and the first (idle longest) is closed for it.
  std::this_thread::sleep_for(1100ms);
  Client third(server.Port());
  REQUIRE(third.Send(Get("/third")));
  auto reply = third.Read(2s);
  REQUIRE(reply.has_value());
  CHECK(reply->body == EchoOf("GET", "/third", ""));
  CHECK(first.WaitClosed(2s));
  CHECK(first.Pending().empty());
  CHECK(server->Stats().evictedIdle.load() == 1);
  // The second is still served on its connection.
  REQUIRE(second.Send(Get("/still")));
  auto still = second.Read();
  REQUIRE(still.has_value());
  CHECK(still->status == 200);
  CHECK(server->OpenConnections() == 2);
}

TEST_CASE(
    "http server: a connection that never sent a request makes room before a keep-alive one") {
  http::ServerOptions options;
  options.maxConnections = 2;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client client(server.Port());  // a real client: served, then idle the longest
  REQUIRE(client.Send(Get("/first")));
  REQUIRE(client.Read().has_value());
  Client silent(server.Port());  // connects later and sends nothing
  REQUIRE(WaitFor([&] { return server->OpenConnections() == 2; }));
  // Past the eviction grace: 1 s, as one address holds few connections (kLightPeerGrace).
  std::this_thread::sleep_for(1100ms);
  Client third(server.Port());
  REQUIRE(third.Send(Get("/third")));
  REQUIRE(third.Read(2s).has_value());
  CHECK(silent.WaitClosed(2s));
  CHECK(server->Stats().evictedIdle.load() == 1);
  // The keep-alive client's connection was kept.
  REQUIRE(client.Send(Get("/still")));
  auto still = client.Read();
  REQUIRE(still.has_value());
  CHECK(still->status == 200);
}

TEST_CASE("http server: a step of a TLS handshake counts as activity for the eviction order") {
  // A new connection of the API server, from the address a flood of silent connections comes from
  // (a hostNetwork pod), slow to send its ClientHello on a starved machine: once the hello is
  // read it is as young as the flood's newest, however long ago it was accepted.
  Ssl<SSL_CTX> tls = ServerTlsContext();
  http::ServerOptions options;
  options.maxConnections = 2;
  options.tls = tls.get();
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client slow(server.Port());
  REQUIRE(WaitFor([&] { return server->OpenConnections() == 1; }));
  std::this_thread::sleep_for(50ms);
  Client silent(server.Port());
  REQUIRE(WaitFor([&] { return server->OpenConnections() == 2; }));
  std::this_thread::sleep_for(50ms);
  REQUIRE(slow.Send(ClientHello()));
  // The server's answer to the hello arrives: the handshake has moved on (the client goes no
  // further, as a starved client would not).
  REQUIRE(WaitFor([&] { return slow.Read(20ms), !slow.Pending().empty(); }));
  // Both past their grace (1 s, as one address holds few connections: kLightPeerGrace). By the
  // time they were accepted the slow one would go first.
  std::this_thread::sleep_for(1100ms);
  Client third(server.Port());
  REQUIRE(third.Connected());
  CHECK(silent.WaitClosed(2s));
  CHECK_FALSE(slow.WaitClosed(300ms));
  CHECK(server->Stats().evictedIdle.load() == 1);
}

TEST_CASE("http server: a flood from one address makes room before a quiet client of another") {
  http::ServerOptions options;
  options.maxConnections = 4;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  // A probe connected first and is slow to send (a starved kubelet); by age alone it would go
  // first.
  Client quiet(server.Port());
  REQUIRE(WaitFor([&] { return server->OpenConnections() == 1; }));
  std::vector<std::unique_ptr<Client>> flood;
  for (int i = 0; i < 12; ++i) {
    flood.push_back(std::make_unique<Client>(server.Port(), "127.0.0.2"));
    REQUIRE(flood.back()->Connected());
    std::this_thread::sleep_for(100ms);  // past the quiet client's grace (1 s) after ten
  }
  REQUIRE(WaitFor([&] { return server->Stats().evictedIdle.load() >= 9; }));
  REQUIRE(quiet.Send(Get("/healthz")));
  auto reply = quiet.Read(2s);
  REQUIRE_MESSAGE(reply.has_value(), "the quiet client was closed for the flood");
  CHECK(reply->status == 200);
}

TEST_CASE("http server: at maxConnections with every connection busy, a new one waits") {
  http::ServerOptions options;
  options.maxConnections = 2;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  // Both have a request under way (head sent, body not yet): neither may be closed.
  Client first(server.Port()), second(server.Port());
  for (Client* c : {&first, &second}) {
    REQUIRE(c->Send("POST /busy HTTP/1.1\r\nHost: t\r\nContent-Length: 3\r\n\r\na"));
  }
  REQUIRE(WaitFor([&] { return server->OpenConnections() == 2; }));
  Client third(server.Port());  // the kernel completes the handshake; the server does not accept
  REQUIRE(third.Connected());
  REQUIRE(third.Send(Get("/third")));
  CHECK_FALSE(third.Read(500ms).has_value());
  CHECK(server->Stats().evictedIdle.load() == 0);
  // The first finishes its request: once answered it is idle, and makes room.
  REQUIRE(first.Send("bc"));
  auto done = first.Read();
  REQUIRE(done.has_value());
  CHECK(done->body == EchoOf("POST", "/busy", "abc"));
  auto reply = third.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->body == EchoOf("GET", "/third", ""));
  CHECK(first.WaitClosed());
  REQUIRE(second.Send("bc"));
  auto other = second.Read();
  REQUIRE(other.has_value());
  CHECK(other->body == EchoOf("POST", "/busy", "abc"));
}

TEST_CASE("http server: a connection with no request within firstRequestTimeout is closed") {
  http::ServerOptions options;
  options.firstRequestTimeout = 300ms;
  options.idleTimeout = 60s;  // a close within the test's wait cannot be the idle timeout
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client silent(server.Port());
  CHECK(silent.WaitClosed(5s));
  CHECK(silent.Pending().empty());
  CHECK(server->Stats().firstRequestTimeouts.load() == 1);
  // A connection that has had its answer waits `idleTimeout`, not the first-request timeout.
  Client used(server.Port());
  REQUIRE(used.Send(Get("/once")));
  REQUIRE(used.Read().has_value());
  CHECK_FALSE(used.WaitClosed(2500ms));  // the first-request timeout and a sweep have passed
  REQUIRE(used.Send(Get("/again")));
  REQUIRE(used.Read().has_value());
  CHECK(server->Stats().firstRequestTimeouts.load() == 1);
}

TEST_CASE("http server: a request over the byte budget is refused with 503 and Retry-After") {
  // Each connection holds 64 KiB free; beyond that, 256 KiB for all of them.
  http::ByteBudget budget(256 * 1024);
  http::ServerOptions options;
  options.budget = &budget;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  const std::string small(40 * 1024, 's');
  const std::string fits(200 * 1024, 'f');
  const std::string over(400 * 1024, 'o');
  SUBCASE("Content-Length") {
    // A large upload in progress holds budget; a small request elsewhere is not refused.
    Client uploader(server.Port());
    std::string wire = Post("/up", fits);
    REQUIRE(uploader.Send(wire.substr(0, wire.size() - 10)));
    REQUIRE(WaitFor([&] { return budget.Used() > 100 * 1024; }));
    Client other(server.Port());
    REQUIRE(other.Send(Post("/small", small)));
    auto ok = other.Read();
    REQUIRE(ok.has_value());
    CHECK(ok->status == 200);
    // One that cannot fit while the upload holds its share: 503, Retry-After, then closed.
    Client greedy(server.Port());
    REQUIRE(greedy.Send(Post("/greedy", over)));
    CheckShed(greedy);
    CHECK(server->Stats().shedOverBudget.load() == 1);
    // The upload completes; its memory returns to the budget once answered.
    REQUIRE(uploader.Send(wire.substr(wire.size() - 10)));
    auto done = uploader.Read();
    REQUIRE(done.has_value());
    CHECK(done->body == EchoOf("POST", "/up", fits));
    CHECK(WaitFor([&] { return budget.Used() == 0; }));
  }
  SUBCASE("chunked: the decoded copy counts too") {
    Client client(server.Port());
    std::string head = "POST /chunked HTTP/1.1\r\nHost: t\r\nTransfer-Encoding: chunked\r\n\r\n";
    REQUIRE(client.Send(head));
    bool refused = false;
    for (int i = 0; i < 40 && !refused; ++i) {  // 40 chunks of 8 KiB: 320 KiB, twice over budget
      std::string chunk(8 * 1024, 'c');
      refused = !client.Send("2000\r\n" + chunk + "\r\n");
      refused = refused || client.WaitClosed(20ms);
    }
    auto shed = client.Read(2s);
    REQUIRE(shed.has_value());
    CHECK(shed->status == 503);
    CHECK(server->Stats().shedOverBudget.load() == 1);
    CHECK(server.Handled() == 0);
  }
  CHECK(WaitFor([&] { return budget.Used() == 0; }));
}

TEST_CASE("http server: an answer over the byte budget is replaced by a 503, and closes") {
  // /big answers 4 MiB; the budget beyond each connection's free 64 KiB is 1 MiB.
  http::ByteBudget budget(1 << 20);
  http::ServerOptions options;
  options.budget = &budget;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client big(server.Port());
  REQUIRE(big.Send(Get("/big")));
  CheckShed(big);
  CHECK(server->Stats().shedAnswers.load() == 1);
  CHECK(server->Stats().shedOverBudget.load() == 0);
  CHECK(WaitFor([&] { return budget.Used() == 0; }));
  // An answer that fits is sent whole, its request's bytes freed first (a 400 KiB upload echoed:
  // request and answer together would not fit beside another 400 KiB answer being written).
  const std::string upload(400 * 1024, 'u');
  Client echo(server.Port());
  REQUIRE(echo.Send(Post("/echo", upload)));
  auto done = echo.Read();
  REQUIRE(done.has_value());
  CHECK(done->status == 200);
  CHECK(done->body == EchoOf("POST", "/echo", upload));
  CHECK(server->Stats().shedAnswers.load() == 1);
  CHECK(WaitFor([&] { return budget.Used() == 0; }));
}

TEST_CASE("ByteBudget grants what fits and nothing more") {
  struct Case {
    size_t limit, held, ask;
    bool granted;
  };
  for (const Case& c :
       {Case{100, 0, 100, true}, Case{100, 0, 101, false}, Case{100, 60, 40, true},
        Case{100, 60, 41, false}, Case{100, 100, 0, true}, Case{100, 1, SIZE_MAX, false}}) {
    CAPTURE(c.limit);
    CAPTURE(c.held);
    CAPTURE(c.ask);
    http::ByteBudget budget(c.limit);
    REQUIRE(budget.TryAcquire(c.held));
    CHECK(budget.TryAcquire(c.ask) == c.granted);
    CHECK(budget.Used() == c.held + (c.granted ? c.ask : 0));
  }
}

TEST_CASE("http server: the idle timeout closes a connection with no request") {
  http::ServerOptions options;
  options.idleTimeout = 500ms;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  SUBCASE("after a request") {
    Client client(server.Port());
    REQUIRE(client.Send(Get("/once")));
    auto reply = client.Read();
    REQUIRE(reply.has_value());
    CHECK(reply->status == 200);
    CHECK(client.WaitClosed());
    CHECK(client.Pending().empty());
  }
  CHECK(WaitFor([&] { return server->OpenConnections() == 0; }));
}

TEST_CASE("http server: a request that never finishes is closed after requestTimeout") {
  http::ServerOptions options;
  options.requestTimeout = 300ms;
  options.idleTimeout = 60s;  // a close within the test's wait cannot be the idle timeout
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  SUBCASE("a head that stops") {
    Client client(server.Port());
    REQUIRE(client.Send("GET /stuck HTTP/1.1\r\nHost: t\r\n"));
    CHECK(client.WaitClosed());
  }
  SUBCASE("a body that stops") {
    Client client(server.Port());
    REQUIRE(client.Send(Get("/first")));
    REQUIRE(client.Read().has_value());
    REQUIRE(client.Send("POST /stuck HTTP/1.1\r\nContent-Length: 10\r\n\r\nabc"));
    CHECK(client.WaitClosed());
  }
  SUBCASE("a head trickling a byte at a time: the deadline is not extended") {
    Client client(server.Port());
    REQUIRE(client.Send("GET /slowloris HTTP/1.1\r\nX-Slow: "));
    bool closed = false;
    auto deadline = Clock::now() + 10s;
    while (!closed && Clock::now() < deadline) {
      closed = client.WaitClosed(50ms) || !client.Send("a");
    }
    CHECK(closed);
  }
  CHECK(server.Handled() <= 1);
  CHECK(WaitFor([&] { return server->OpenConnections() == 0; }));
}

TEST_CASE(
    "http server: a head must be whole within headerTimeout; the body then has requestTimeout") {
  http::ServerOptions options;
  options.headerTimeout = 300ms;
  options.requestTimeout = 3s;
  options.idleTimeout = 60s;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  // A half-sent head is closed at the header timeout, long before the request timeout.
  Client half(server.Port());
  const auto start = Clock::now();
  REQUIRE(half.Send("GET /healthz HTTP/1.1\r\nHost: x\r\n"));
  CHECK(half.WaitClosed(2s));
  CHECK(Clock::now() - start < 2s);
  CHECK(WaitFor([&] { return server->Stats().headerTimeouts.load() == 1; }));
  // A whole head followed by a slow body is given the request timeout, not the header timeout.
  Client slow(server.Port());
  REQUIRE(slow.Send("POST /slow HTTP/1.1\r\nHost: x\r\nContent-Length: 6\r\n\r\nabc"));
  CHECK_FALSE(slow.WaitClosed(1s));
  REQUIRE(slow.Send("def"));
  std::optional<Reply> reply = slow.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK(server->Stats().headerTimeouts.load() == 1);
}

// RFC 9112 §2.2: empty lines before a request line are to be ignored, and the contract gives a
// connection `idleTimeout` between requests. A CRLF some clients send after a POST body must
// not count as a started request (closed after `requestTimeout`, waited for at Shutdown).
TEST_CASE("http server: a CRLF after a body leaves the connection idle") {
  http::ServerOptions options;
  options.requestTimeout = 300ms;
  options.idleTimeout = 60s;
  TestServer server(options);
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  Client client(server.Port());
  REQUIRE(client.Send(Post("/p", "abc") + "\r\n"));
  auto reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK_FALSE(client.WaitClosed(2500ms));  // requestTimeout and a sweep have passed
  REQUIRE(client.Send(Get("/next")));
  reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
}

TEST_CASE("http server: Shutdown closes idle connections, finishes running requests, refuses") {
  std::atomic<bool> entered{false}, released{false};
  http::ServerOptions options;
  options.workerThreads = 2;
  std::unique_ptr<TestServer> server;
  server =
      std::make_unique<TestServer>(options, [&](const http::Request& r, http::Response& response) {
        if (r.path == "/block") {
          entered = true;
          // Blocks this worker until the test releases it (bounded, so a failing test ends).
          WaitFor([&] { return released.load(); }, 30s);
          response.body = TestServer::BigBody();
          return;
        }
        response.body = std::string(r.path);
      });
  REQUIRE_MESSAGE(server->StartStatus().ok(), server->StartStatus().message());
  int port = server->Port();

  // The first connection goes to one worker and blocks it in the handler; the second goes to the
  // other worker (least loaded), which answers it: it is idle on a free worker.
  Client busy(port);
  REQUIRE(busy.Send(Get("/block")));
  REQUIRE(WaitFor([&] { return entered.load(); }));
  Client idle(port);
  REQUIRE(idle.Send(Get("/idle")));
  auto idleReply = idle.Read();
  REQUIRE(idleReply.has_value());
  CHECK(idleReply->body == "/idle");

  std::thread stopper([&] { (**server).Shutdown(20s); });
  bool idleClosed = idle.WaitClosed();   // while the handler still runs
  bool stillRunning = !released.load();  // (only the test releases it)
  released = true;
  auto busyReply = busy.Read();
  bool busyClosed = busy.WaitClosed();
  stopper.join();

  CHECK(idleClosed);
  CHECK(stillRunning);
  REQUIRE(busyReply.has_value());
  CHECK(busyReply->status == 200);
  CHECK(busyReply->Closes());
  CHECK(busyReply->body == TestServer::BigBody());
  CHECK(busyClosed);
  CHECK((*server)->OpenConnections() == 0);
  CHECK_FALSE((*server)->Accepting());
  Client late(port);
  CHECK_FALSE(late.Connected());
  CHECK(late.ConnectError() == ECONNREFUSED);
  server.reset();  // a second Shutdown (from the destructor) is harmless
}

TEST_CASE("http server: Shutdown with nothing open returns and the port is closed") {
  TestServer server(DefaultOptions());
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  int port = server.Port();
  {
    Client client(port);
    REQUIRE(client.Send(Get("/x")));
    REQUIRE(client.Read().has_value());
  }
  CHECK(WaitFor([&] { return server->OpenConnections() == 0; }));
  server->Shutdown(5s);
  CHECK_FALSE(server->Accepting());
  Client late(port);
  CHECK_FALSE(late.Connected());
}

TEST_CASE("http server: 300 connections opened and dropped, then it still answers") {
  TestServer server(DefaultOptions());  // maxConnections 256: some wait in the backlog
  REQUIRE_MESSAGE(server.StartStatus().ok(), server.StartStatus().message());
  {
    std::vector<std::unique_ptr<Client>> clients;
    for (int i = 0; i < 300; ++i) {
      auto c = std::make_unique<Client>(server.Port());
      REQUIRE(c->Connected());
      switch (i % 4) {
        case 0:
          break;  // nothing sent
        case 1:
          REQUIRE(c->Send("GET /part"));
          break;
        case 2:
          REQUIRE(c->Send("POST /body HTTP/1.1\r\nContent-Length: 100\r\n\r\n0123456789"));
          break;
        case 3:
          REQUIRE(
              c->Send("POST /body HTTP/1.1\r\nExpect: 100-continue\r\nContent-Length: 9\r\n\r\n"));
          break;
      }
      clients.push_back(std::move(c));
    }
    for (size_t i = 0; i < clients.size(); ++i) clients[i]->Close(/*reset=*/i % 3 == 0);
  }
  Client client(server.Port());
  REQUIRE(client.Send(Get("/alive")));
  auto reply = client.Read();
  REQUIRE(reply.has_value());
  CHECK(reply->status == 200);
  CHECK(reply->body == EchoOf("GET", "/alive", ""));
  client.Close();
  CHECK(WaitFor([&] { return server->OpenConnections() == 0; }, 20s));
  CHECK(server.Handled() == 1);
}

TEST_CASE("http server: Start reports a port already in use") {
  TestServer first(DefaultOptions());
  REQUIRE_MESSAGE(first.StartStatus().ok(), first.StartStatus().message());
  http::Server second(
      [&] {
        http::ServerOptions o;
        o.bindAddress = "127.0.0.1";
        o.port = first.Port();
        o.workerThreads = 1;
        return o;
      }(),
      [](const http::Request&, http::Response&) {},
      [](int, std::string_view, std::string_view, http::Response&) {});
  iw::Status error = second.Start();
  REQUIRE_FALSE(error.ok());
  CHECK(error.code() == iw::Status::Code::kIOError);
  CHECK(error.message().find("cannot listen on 127.0.0.1:" + std::to_string(first.Port())) !=
        std::string::npos);
  CHECK_FALSE(second.Accepting());
}
