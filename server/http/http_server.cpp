#include "server/http/http_server.h"

#include <arpa/inet.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <openssl/err.h>
#include <poll.h>
#include <sched.h>
#include <sys/epoll.h>
#include <sys/eventfd.h>
#include <sys/socket.h>
#include <unistd.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <csignal>
#include <cstring>

#include "lib/unique_fd.h"
#include "server/process/log.h"

namespace iw::http {

namespace {

using Clock = std::chrono::steady_clock;

constexpr size_t kReadChunk = 16 * 1024;  // a TLS record's worth
constexpr size_t kReserveStep = 1 << 20;
constexpr size_t kKeepBuffer = 64 * 1024;  // larger buffers are freed after their request
constexpr size_t kLingerBytes = 16 << 20;  // most bytes discarded after refusing a request
constexpr auto kLingerTime = std::chrono::seconds(5);
// The kernel's send and receive buffers of each connection (set on the listener, inherited; the
// kernel doubles them): left to itself Linux grows them to tcp_wmem's and tcp_rmem's maxima (4 and
// 6 MiB) for a client that sends reviews and never reads the answers, and a pod's memory cgroup is
// charged for them (cgroup v2 counts socket memory): 256 connections would hold 2.5 GiB; bounded,
// 64 MiB. A 7 MiB review still streams at over 100 MB/s at a millisecond's round trip.
constexpr int kSocketBufferBytes = 64 * 1024;
// A connection accepted (or answered) this recently is not closed to make room: a client gets that
// long to send its request, however fast a flood churns the other connections.
constexpr auto kEvictionGrace = std::chrono::milliseconds(3);
// The grace of a connection whose peer address holds few (kLightPeerShare of the limit, at least
// 2): a kubelet's probe or a new connection of the API server on a starved machine, which a flood
// from another address must not push out before its first bytes arrive (on two busy cores a
// client was seen to take over 250 ms from connect to its first byte). A flood must spread over
// many addresses to get it, and then delays a new connection by this much at most.
constexpr auto kLightPeerGrace = std::chrono::seconds(1);
constexpr size_t kLightPeerShare = 32;

std::string Errno(int err) {
  return std::strerror(err);
}

struct SslFree {
  void operator()(SSL* ssl) const { SSL_free(ssl); }
};

// Received bytes not yet consumed; grows without zero-filling.
class Buffer {
 public:
  std::string_view View() const { return {data_.get(), size_}; }
  size_t Size() const { return size_; }
  size_t Capacity() const { return capacity_; }
  char* End() { return data_.get() + size_; }
  size_t Free() const { return capacity_ - size_; }
  void Grow(size_t n) { size_ += n; }

  // The capacity Reserve(total) leaves.
  size_t CapacityFor(size_t total) const {
    return total <= capacity_ ? capacity_ : std::max(total, capacity_ + capacity_ / 2);
  }
  // Makes the capacity at least `total` bytes (growing by half at least, to stay amortized).
  void Reserve(size_t total) {
    if (total <= capacity_) return;
    total = CapacityFor(total);
    auto fresh = std::make_unique_for_overwrite<char[]>(total);
    if (size_ > 0) std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    capacity_ = total;
  }
  // Drops the first `n` bytes.
  void Consume(size_t n) {
    if (n < size_) std::memmove(data_.get(), data_.get() + n, size_ - n);
    size_ -= std::min(n, size_);
  }
  // Frees the memory of a large buffer once its request is answered.
  void Trim() {
    if (capacity_ <= kKeepBuffer) return;
    if (size_ == 0) {
      data_.reset();
      capacity_ = 0;
      return;
    }
    auto fresh = std::make_unique_for_overwrite<char[]>(size_);
    std::memcpy(fresh.get(), data_.get(), size_);
    data_ = std::move(fresh);
    capacity_ = size_;
  }

 private:
  std::unique_ptr<char[]> data_;
  size_t size_ = 0, capacity_ = 0;
};

enum class Io { kDone, kWantRead, kWantWrite, kClosed };

Io SslFailure(SSL* ssl, int result) {
  switch (SSL_get_error(ssl, result)) {
    case SSL_ERROR_WANT_READ:
      return Io::kWantRead;
    case SSL_ERROR_WANT_WRITE:
      return Io::kWantWrite;
    default:
      ERR_clear_error();  // the queue is per thread: keep it clean for the next connection
      return Io::kClosed;
  }
}

Io SocketFailure(ssize_t result) {
  if (result == 0) return Io::kClosed;
  if (errno == EAGAIN || errno == EWOULDBLOCK) return Io::kWantRead;
  return Io::kClosed;
}

std::string FormatAddress(const sockaddr_storage& addr) {
  char text[INET6_ADDRSTRLEN] = {};
  if (addr.ss_family == AF_INET) {
    const auto& in = reinterpret_cast<const sockaddr_in&>(addr);
    inet_ntop(AF_INET, &in.sin_addr, text, sizeof text);
    return std::string(text) + ":" + std::to_string(ntohs(in.sin_port));
  }
  if (addr.ss_family == AF_INET6) {
    const auto& in6 = reinterpret_cast<const sockaddr_in6&>(addr);
    inet_ntop(AF_INET6, &in6.sin6_addr, text, sizeof text);
    return "[" + std::string(text) + "]:" + std::to_string(ntohs(in6.sin6_port));
  }
  return "unknown";
}

// What the exception being handled says, for a log line.
std::string CurrentExceptionText() {
  try {
    throw;
  } catch (const std::exception& e) {
    return e.what();
  } catch (...) {
    return "an exception not derived from std::exception";
  }
}

size_t DefaultWorkers() {
  cpu_set_t cpus;
  CPU_ZERO(&cpus);
  size_t n = sched_getaffinity(0, sizeof cpus, &cpus) == 0 ? CPU_COUNT(&cpus) : 1;
  return std::clamp<size_t>(n, 1, 4);
}

}  // namespace

// One connection, owned by one worker.
struct Connection {
  enum class Phase { kHandshake, kReading, kWriting, kLingering };

  UniqueFd fd;
  std::unique_ptr<SSL, SslFree> ssl;  // null on a plain-HTTP server
  std::string remote;
  PeerCounts::Hold peer;  // counts this connection for its peer address (eviction order)
  Phase phase = Phase::kReading;
  Buffer in;
  std::string out;
  size_t outSent = 0;
  // What follows once `out` is written.
  enum class Then {
    kNextRequest,
    kRestOfRequest,  // `out` was a 100 Continue: the body is still to come
    kClose,
    kLinger,  // close, after reading and dropping what the client still sends
  };
  Then then = Then::kNextRequest;
  bool continueSent = false;
  size_t lingered = 0;
  RequestParser parser;
  Clock::time_point deadline;
  // Accepted, its TLS handshake moved on (a new state: a flight of the client's read, or done), or
  // its last answer written: the eviction order.
  Clock::time_point lastActive;
  Clock::time_point requestStart;  // the first byte of the request being received
  bool served = false;  // a request has been answered (the first-request timeout is over)
  // The TLS handshake's state last seen: a new one is activity (lastActive).
  OSSL_HANDSHAKE_STATE handshakeState = TLS_ST_BEFORE;
  size_t charged = 0;  // bytes taken from the server's budget
  uint32_t events = 0;
  size_t index = 0;  // in the worker's list

  explicit Connection(Limits limits) : parser(limits) {}
};

class Server::Worker {
 public:
  explicit Worker(Server& server) : server_(server) {}
  ~Worker() {
    Stop();
    Join();
  }
  Worker(const Worker&) = delete;
  Worker& operator=(const Worker&) = delete;

  // Creates the epoll set and starts the thread; IOError when a system call fails.
  Status Init() {
    epoll_ = UniqueFd(epoll_create1(EPOLL_CLOEXEC));
    wake_ = UniqueFd(eventfd(0, EFD_NONBLOCK | EFD_CLOEXEC));
    if (epoll_.get() < 0 || wake_.get() < 0)
      return Status::IOError("cannot create epoll set: " + Errno(errno));
    epoll_event ev{};
    ev.events = EPOLLIN;
    ev.data.ptr = nullptr;  // the wake-up descriptor
    if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, wake_.get(), &ev) != 0) {
      return Status::IOError("cannot watch the wake-up descriptor: " + Errno(errno));
    }
    thread_ = std::thread([this] { Run(); });
    return Status::Ok();
  }

  // Takes over an accepted socket.
  void Adopt(int fd, std::string remote, PeerCounts::Hold peer) {
    load_.fetch_add(1);
    {
      std::lock_guard lock(mu_);
      incoming_.push_back({fd, std::move(remote), std::move(peer)});
    }
    Wake();
  }
  // Wakes the worker to see Server::draining_ or an eviction round.
  void Poke() { Wake(); }
  // Eviction, in two steps run by the acceptor at the connection limit: every worker offers when
  // its longest-idle connection became idle (Offer, kNoOffer for none), then the worker with the
  // oldest closes its `n` longest-idle connections (Evict).
  static constexpr int64_t kNoOffer = INT64_MAX;
  int64_t Offer() const { return offer_.load(); }
  void Evict(size_t n) {
    evictCount_.fetch_add(n);
    Wake();
  }
  void Stop() {
    stop_ = true;
    Wake();
  }
  void Join() {
    if (thread_.joinable()) thread_.join();
  }
  size_t Load() const { return load_.load(); }

 private:
  void Wake() {
    uint64_t one = 1;
    ssize_t ignored = ::write(wake_.get(), &one, sizeof one);
    (void)ignored;
  }

  void Run() {
    try {
      Loop();
    } catch (...) {
      log::Error("HTTP worker failed",
                 {{"server", server_.options_.name}, {"error", CurrentExceptionText()}});
    }
    while (!conns_.empty()) Close(*conns_.back());
    std::lock_guard lock(mu_);
    for (auto& in : incoming_) {
      ::close(in.fd);
      load_.fetch_sub(1);
      server_.ConnectionClosed();
    }
    incoming_.clear();
  }

  void Loop() {
    std::vector<epoll_event> events(64);
    auto nextSweep = Clock::now() + std::chrono::seconds(1);
    while (!stop_.load()) {
      int timeout = conns_.empty() && !server_.draining_.load() ? -1 : 1000;
      int n = epoll_wait(epoll_.get(), events.data(), static_cast<int>(events.size()), timeout);
      if (n < 0 && errno != EINTR) {
        log::Error("epoll_wait failed",
                   {{"server", server_.options_.name}, {"error", Errno(errno)}});
        return;
      }
      now_ = Clock::now();
      for (int i = 0; i < n; ++i) {
        auto* c = static_cast<Connection*>(events[i].data.ptr);
        if (c == nullptr) {
          uint64_t count;
          ssize_t ignored = ::read(wake_.get(), &count, sizeof count);
          (void)ignored;
          TakeIncoming();
          continue;
        }
        bool keep = false;
        try {
          keep = (events[i].events & EPOLLERR) == 0 && Drive(*c);
        } catch (...) {  // e.g. no memory for a buffer: this connection only
          log::Limited(log::Level::kError, "connection_failed", "connection failed",
                       {{"server", server_.options_.name},
                        {"remote", c->remote},
                        {"error", CurrentExceptionText()}});
        }
        if (!keep) Close(*c);
      }
      if (uint64_t round = server_.evictRound_.load(); round != seenRound_) {
        seenRound_ = round;
        std::vector<Connection*> oldest = LongestIdle(1);
        offer_ = oldest.empty() ? kNoOffer : EvictionRank(*oldest[0]);
        server_.OfferMade();
      }
      if (size_t n = evictCount_.exchange(0); n > 0) {
        for (Connection* c : LongestIdle(n)) {
          server_.stats_.evictedIdle.fetch_add(1);
          Close(*c);
        }
      }
      if (server_.draining_.load()) {
        CloseIdle();
        if (conns_.empty()) return;
      }
      if (now_ >= nextSweep) {
        CloseExpired();
        nextSweep = now_ + std::chrono::seconds(1);
      }
    }
  }

  void TakeIncoming() {
    std::vector<Incoming> fresh;
    {
      std::lock_guard lock(mu_);
      fresh.swap(incoming_);
    }
    // The clock read now, not at the top of the round: a round slowed by a busy machine must not
    // make a connection accepted during it look older than it is.
    now_ = Clock::now();
    for (auto& in : fresh) {
      const int fd = in.fd;
      auto c = std::make_unique<Connection>(server_.options_.limits);
      c->fd = UniqueFd(fd);
      c->remote = std::move(in.remote);
      c->peer = std::move(in.peer);
      c->index = conns_.size();
      if (server_.options_.tls != nullptr) {
        c->ssl.reset(SSL_new(server_.options_.tls));
        if (!c->ssl || SSL_set_fd(c->ssl.get(), fd) != 1) {
          ERR_clear_error();
          log::Limited(log::Level::kError, "tls_setup_failed", "cannot set up TLS for a connection",
                       {{"server", server_.options_.name}});
          conns_.push_back(std::move(c));
          Close(*conns_.back());
          continue;
        }
        SSL_set_accept_state(c->ssl.get());
        c->phase = Connection::Phase::kHandshake;
      }
      c->deadline = now_ + server_.options_.firstRequestTimeout;  // the handshake included
      c->lastActive = now_;
      Connection& conn = *c;
      conns_.push_back(std::move(c));
      epoll_event ev{};
      ev.events = EPOLLIN;
      ev.data.ptr = &conn;
      conn.events = EPOLLIN;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_ADD, fd, &ev) != 0) {
        log::Error("cannot watch a connection",
                   {{"server", server_.options_.name}, {"error", Errno(errno)}});
        Close(conn);
      }
    }
  }

  // Waits for `events` on the connection. Always true ("keep the connection").
  bool Await(Connection& c, uint32_t events) {
    if (c.events != events) {
      epoll_event ev{};
      ev.events = events;
      ev.data.ptr = &c;
      if (epoll_ctl(epoll_.get(), EPOLL_CTL_MOD, c.fd.get(), &ev) != 0) return false;
      c.events = events;
    }
    return true;
  }

  bool AwaitIo(Connection& c, Io io) {
    if (io == Io::kWantRead) return Await(c, EPOLLIN);
    if (io == Io::kWantWrite) return Await(c, EPOLLOUT);
    return false;
  }

  Io Read(Connection& c, size_t& got) {
    size_t room = std::min<size_t>(c.in.Free(), INT_MAX);
    if (c.ssl) {
      int r = SSL_read(c.ssl.get(), c.in.End(), static_cast<int>(room));
      if (r > 0) {
        got = static_cast<size_t>(r);
        return Io::kDone;
      }
      return SslFailure(c.ssl.get(), r);
    }
    ssize_t r;
    do {
      r = ::recv(c.fd.get(), c.in.End(), room, 0);
    } while (r < 0 && errno == EINTR);
    if (r > 0) {
      got = static_cast<size_t>(r);
      return Io::kDone;
    }
    return SocketFailure(r);
  }

  Io Write(Connection& c, size_t& put) {
    const char* p = c.out.data() + c.outSent;
    size_t n = std::min<size_t>(c.out.size() - c.outSent, INT_MAX);
    if (c.ssl) {
      int r = SSL_write(c.ssl.get(), p, static_cast<int>(n));
      if (r > 0) {
        put = static_cast<size_t>(r);
        return Io::kDone;
      }
      return SslFailure(c.ssl.get(), r);
    }
    ssize_t r;
    do {
      r = ::send(c.fd.get(), p, n, MSG_NOSIGNAL);
    } while (r < 0 && errno == EINTR);
    if (r > 0) {
      put = static_cast<size_t>(r);
      return Io::kDone;
    }
    if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return Io::kWantWrite;
    return Io::kClosed;
  }

  // What a phase handler leaves the driver to do: run the connection's (new) phase, wait for
  // the epoll events asked for, or close the connection.
  enum class Step { kAgain, kWait, kClose };
  // kWait when `kept` (Await/AwaitIo's "keep the connection"), else kClose.
  static Step WaitIf(bool kept) { return kept ? Step::kWait : Step::kClose; }

  // Moves the connection on as far as it can without blocking, a phase at a time. False: close it.
  bool Drive(Connection& c) {
    Step step = Step::kAgain;
    while (step == Step::kAgain) {
      switch (c.phase) {
        case Connection::Phase::kHandshake:
          step = Handshake(c);
          break;
        case Connection::Phase::kReading:
          step = ReadRequest(c);
          break;
        case Connection::Phase::kWriting:
          step = WriteOut(c);
          break;
        case Connection::Phase::kLingering:
          step = Linger(c);
          break;
      }
    }
    return step == Step::kWait;
  }

  // kHandshake: advances the TLS handshake, then kReading (the first-request deadline still runs).
  Step Handshake(Connection& c) {
    int r = SSL_do_handshake(c.ssl.get());
    // A step of the handshake is activity for the eviction order: a new connection of the API
    // server whose ClientHello has just been read is as young as a flood's newest connection,
    // whatever it cost the client to get there. A handshake has a few steps, so bytes trickled
    // cannot keep a connection young.
    if (OSSL_HANDSHAKE_STATE state = SSL_get_state(c.ssl.get()); state != c.handshakeState) {
      c.handshakeState = state;
      c.lastActive = now_;
    }
    if (r != 1) {
      Io io = SslFailure(c.ssl.get(), r);
      if (io == Io::kClosed && log::Enabled(log::Level::kDebug)) {
        log::Debug("TLS handshake failed",
                   {{"server", server_.options_.name}, {"remote", c.remote}});
      }
      return WaitIf(AwaitIo(c, io));
    }
    c.phase = Connection::Phase::kReading;
    return Step::kAgain;
  }

  // kReading: acts on the bytes received, else reads more (or Shed); idle: closes if draining.
  Step ReadRequest(Connection& c) {
    if (c.in.Size() > 0) {
      if (ParseReceived(c)) return Step::kAgain;
    } else if (server_.draining_.load()) {
      return Step::kClose;  // idle while the server stops
    }
    if (!ReserveForRead(c)) {
      Shed(c);
      return Step::kAgain;
    }
    return Receive(c);
  }

  // A request's first byte: its head must be whole within headerTimeout (ParseReceived then
  // extends the deadline to requestTimeout from this moment).
  void StartRequest(Connection& c) {
    c.requestStart = now_;
    c.deadline = now_ + std::min(server_.options_.headerTimeout, server_.options_.requestTimeout);
  }

  // Whether the connection has received part of a request's head and not the rest.
  static bool HoldsPartialHead(const Connection& c) {
    return c.in.Size() > 0 && !c.parser.HeadComplete();
  }

  // Whether the connection holds only part of a request's head, and has for its eviction grace.
  bool PartialHead(const Connection& c) const {
    return c.phase == Connection::Phase::kReading && HoldsPartialHead(c) &&
           now_ - c.requestStart >= EvictionGrace(c);
  }

  // How long after its acceptance, answer or first byte a connection may not be evicted.
  Clock::duration EvictionGrace(const Connection& c) const {
    const size_t light = std::max<size_t>(2, server_.options_.maxConnections / kLightPeerShare);
    return c.peer.Count() <= light ? Clock::duration(kLightPeerGrace)
                                   : Clock::duration(kEvictionGrace);
  }

  // Feeds the parser; true when that queued the answer, the refusal or a 100 Continue (kWriting).
  bool ParseReceived(Connection& c) {
    auto state = c.parser.Feed(c.in.View());
    if (state == RequestParser::State::kNeedMore && c.parser.HeadComplete()) {
      c.deadline = c.requestStart + server_.options_.requestTimeout;  // the body may take longer
    }
    if (state == RequestParser::State::kComplete) {
      Answer(c);
      return true;
    }
    if (state == RequestParser::State::kError) {
      Refuse(c);
      return true;
    }
    if (c.parser.WantsContinue() && !c.continueSent) {
      QueueContinue(c);
      return true;
    }
    return false;
  }

  // Queues the interim `100 Continue`; once it is written, the body is read (kRestOfRequest).
  void QueueContinue(Connection& c) {
    c.continueSent = true;
    c.then = Connection::Then::kRestOfRequest;
    c.out.assign(kContinue);
    c.outSent = 0;
    c.phase = Connection::Phase::kWriting;
  }

  // Sizes the buffers for the next read, charged to the budget; false (nothing changed): refused.
  bool ReserveForRead(Connection& c) {
    // The whole request at once when its length is known (a step of at most 1 MiB ahead
    // of what arrived, so a promise of 7 MiB costs nothing until the bytes come), else a
    // record at a time.
    // A chunked body is decoded into a second buffer as large as the first.
    size_t expected = c.parser.ExpectedBytes();
    size_t want =
        expected > 0 ? std::min(expected, c.in.Size() + kReserveStep) : c.in.Size() + kReadChunk;
    size_t capacity = c.in.CapacityFor(want);
    size_t body =
        c.parser.Chunked() ? std::max(capacity, c.parser.BodyCapacity()) : c.parser.BodyCapacity();
    if (!Charge(c, capacity + body + c.out.capacity())) return false;
    c.in.Reserve(want);
    c.parser.ReserveBody(capacity);
    return true;
  }

  // Reads into the reserved room; the first byte of a request starts its requestTimeout.
  Step Receive(Connection& c) {
    size_t got = 0;
    Io io = Read(c, got);
    if (io != Io::kDone) return WaitIf(AwaitIo(c, io));
    if (c.in.Size() == 0) StartRequest(c);
    c.in.Grow(got);
    return Step::kAgain;
  }

  // kWriting: writes `out`, then as `then` says: CloseAfterWrite, kReading or AwaitNextRequest.
  Step WriteOut(Connection& c) {
    while (c.outSent < c.out.size()) {
      size_t put = 0;
      Io io = Write(c, put);
      if (io != Io::kDone) return WaitIf(AwaitIo(c, io));
      c.outSent += put;
    }
    c.out.clear();
    c.outSent = 0;
    if (c.then == Connection::Then::kClose || c.then == Connection::Then::kLinger) {
      return CloseAfterWrite(c);
    }
    if (c.then == Connection::Then::kRestOfRequest) {
      c.phase = Connection::Phase::kReading;
      return Step::kAgain;
    }
    return AwaitNextRequest(c);
  }

  // Sends TLS close_notify, then closes (kClose) or half-closes and moves to kLingering (kLinger).
  Step CloseAfterWrite(Connection& c) {
    if (c.ssl && SSL_shutdown(c.ssl.get()) < 0) ERR_clear_error();  // close_notify
    if (c.then == Connection::Then::kClose) return Step::kClose;
    // The client may still be sending the request we refused: read and drop it for a
    // while, so that closing does not reset the connection before it reads the answer.
    ::shutdown(c.fd.get(), SHUT_WR);
    c.phase = Connection::Phase::kLingering;
    c.deadline = now_ + std::min<Clock::duration>(server_.options_.requestTimeout, kLingerTime);
    return Step::kAgain;
  }

  // Keep-alive: NextRequest, read at once if its bytes are here, else idleTimeout (or close).
  Step AwaitNextRequest(Connection& c) {
    NextRequest(c);
    if (c.in.Size() > 0) return Step::kAgain;
    if (server_.draining_.load()) return Step::kClose;
    c.deadline = now_ + server_.options_.idleTimeout;
    // Bytes TLS already holds would raise no epoll event: read them now.
    if (c.ssl && SSL_has_pending(c.ssl.get()) == 1) return Step::kAgain;
    return WaitIf(Await(c, EPOLLIN));
  }

  // kLingering: drops what the client sends until it would block, ends or passes kLingerBytes.
  Step Linger(Connection& c) {
    char scratch[16384];
    for (;;) {
      ssize_t r = ::recv(c.fd.get(), scratch, sizeof scratch, 0);
      if (r > 0) {
        c.lingered += static_cast<size_t>(r);
        if (c.lingered > kLingerBytes) return Step::kClose;
        continue;
      }
      if (r < 0 && errno == EINTR) continue;
      if (r < 0 && (errno == EAGAIN || errno == EWOULDBLOCK)) return WaitIf(Await(c, EPOLLIN));
      return Step::kClose;
    }
  }

  void NextRequest(Connection& c) {
    c.in.Consume(c.parser.Consumed());
    // A CRLF after a body (sent by some old clients) is not the start of a request.
    while (c.in.View().starts_with("\r\n")) c.in.Consume(2);
    c.in.Trim();
    c.parser.Reset();
    // The answer's buffer is kept for the next one only while both buffers fit in the free bytes,
    // so that an idle connection charges nothing. Less than before: always granted.
    if (c.out.capacity() > kKeepBuffer ||
        c.in.Capacity() + c.parser.BodyCapacity() + c.out.capacity() > kFreeBufferBytes) {
      std::string().swap(c.out);
    }
    Charge(c, c.in.Capacity() + c.parser.BodyCapacity() + c.out.capacity());
    c.served = true;
    c.lastActive = now_;
    c.continueSent = false;
    c.phase = Connection::Phase::kReading;
    if (c.in.Size() > 0) StartRequest(c);
  }

  void Answer(Connection& c) {
    Request& request = c.parser.Get();
    request.remoteAddress = c.remote;
    Response response;
    try {
      server_.handler_(request, response);
    } catch (...) {
      log::Limited(log::Level::kError, "request_handler_failed", "request handler failed",
                   {{"server", server_.options_.name},
                    {"path", std::string(request.path)},
                    {"error", CurrentExceptionText()}});
      response = Response();
      server_.onError_(500, "internal error", request.path, response);
    }
    bool close = !request.keepAlive || server_.draining_.load();
    // The request's bytes are not needed once it is answered: freed before the answer is held, so
    // that the connection charges the budget for one of the two (bytes of a pipelined next
    // request stay in `in`; NextRequest then finds nothing more to consume).
    c.in.Consume(c.parser.Consumed());
    c.parser.Reset();
    c.in.Trim();
    Queue(c, response, close ? Connection::Then::kClose : Connection::Then::kNextRequest);
  }

  void Refuse(Connection& c) {
    Response response;
    server_.onError_(c.parser.ErrorStatus(), c.parser.ErrorMessage(), c.parser.ErrorPath(),
                     response);
    Queue(c, response, Connection::Then::kLinger);
  }

  // Takes from (or gives back to) the budget what the connection's buffers hold beyond
  // kFreeBufferBytes once they are `total` bytes. False, with nothing changed, when the budget
  // cannot grant the increase.
  bool Charge(Connection& c, size_t total) {
    size_t want = total > kFreeBufferBytes ? total - kFreeBufferBytes : 0;
    ByteBudget* budget = server_.options_.budget;
    if (budget == nullptr || want == c.charged) return true;
    if (want > c.charged) {
      if (!budget->TryAcquire(want - c.charged)) return false;
    } else {
      budget->Release(c.charged - want);
    }
    c.charged = want;
    return true;
  }

  // Refuses the request being received because the budget is spent: its bytes are freed at once,
  // the answer is 503 with Retry-After, and what the client still sends is read and dropped.
  void Shed(Connection& c) {
    server_.stats_.shedOverBudget.fetch_add(1);
    c.in = Buffer();
    c.parser.Reset();
    Charge(c, c.parser.BodyCapacity() + c.out.capacity());
    Queue(c, Busy("request"), Connection::Then::kLinger);
  }

  // The budget's refusal: 503 with Retry-After, saying which bytes (`what`: request or answer) did
  // not fit.
  Response Busy(std::string_view what) {
    Response response;
    server_.onError_(503,
                     "server busy: " + std::string(what) +
                         " bytes in flight are over the process's budget; retry later",
                     "", response);
    response.headers.emplace_back("Retry-After", "1");
    return response;
  }

  // Whether the connection has no request under way: a TLS handshake not finished, nothing of a
  // request received, or a refused request's bytes being dropped.
  bool Idle(const Connection& c) const {
    switch (c.phase) {
      case Connection::Phase::kHandshake:
      case Connection::Phase::kLingering:
        return true;
      case Connection::Phase::kReading:
        if (PartialHead(c)) return true;  // a half-sent head holds no slot against others
        return c.in.Size() == 0 && !(c.ssl && SSL_has_pending(c.ssl.get()) == 1) &&
               !BytesWaiting(c);
      case Connection::Phase::kWriting:
        return false;
    }
    return false;
  }

  // The order in which idle connections make room, lowest first: those that never had a request
  // answered (a flood of connections that send nothing) before the keep-alive connections of real
  // clients. A client such as kube-apiserver reuses its keep-alive connection for a POST it does
  // not retry: closing that connection as the client sends on it fails the admission call, so it
  // goes only when no never-served connection is left. A partial head ranks with the
  // never-served, from its first byte. Within a class, the connections of the peer address that
  // holds the most go first (a flood from one pod before the kubelet's probe or the API server's
  // review), then the longest idle.
  //   bit 62: served; bits 48-60: kMaxPeerCount less the peer's connections; bits 0-47:
  //   microseconds since the server started (8.9 years).
  int64_t EvictionRank(const Connection& c) const {
    constexpr int64_t kServed = int64_t{1} << 62;
    constexpr int64_t kMaxPeerCount = (int64_t{1} << 13) - 1;
    const Clock::time_point since = HoldsPartialHead(c) ? c.requestStart : c.lastActive;
    const int64_t micros = std::clamp<int64_t>(
        std::chrono::duration_cast<std::chrono::microseconds>(since - server_.started_).count(), 0,
        (int64_t{1} << 48) - 1);
    const int64_t peers = std::min<int64_t>(static_cast<int64_t>(c.peer.Count()), kMaxPeerCount);
    return (Served(c) ? kServed : 0) + ((kMaxPeerCount - peers) << 48) + micros;
  }

  // This worker's `n` connections first in EvictionRank order (fewer when fewer are idle), all of
  // them never served, or a single served one.
  std::vector<Connection*> LongestIdle(size_t n) {
    // Ranked once: a peer's count moves while other workers close connections, and a sort needs
    // keys that hold still. Cheap test first: Idle() may make a system call.
    std::vector<std::pair<int64_t, Connection*>> candidates;
    for (auto& p : conns_) {
      if ((p->phase != Connection::Phase::kWriting && p->in.Size() == 0 &&
           now_ - p->lastActive >= EvictionGrace(*p)) ||
          PartialHead(*p)) {
        candidates.emplace_back(EvictionRank(*p), p.get());
      }
    }
    std::sort(candidates.begin(), candidates.end(),
              [](const auto& a, const auto& b) { return a.first < b.first; });
    std::vector<Connection*> idle;
    int64_t first = 0;
    for (const auto& [rank, c] : candidates) {
      if (idle.size() == n) break;
      // A batch never reaches from the never-served into the served class, and takes one served
      // connection at most: a flood's batch must not close the API server's pooled connections.
      // Nor does it reach from one peer count to a smaller one: the next round finds the flood's
      // connections that were still in their grace.
      if (!idle.empty() && (Served(*c) || Served(*idle.front()) || (rank >> 48) != (first >> 48))) {
        break;
      }
      if (Idle(*c)) {
        if (idle.empty()) first = rank;
        idle.push_back(c);
      }
    }
    return idle;
  }

  // Served for eviction: answered a request before and holds no partial head now.
  static bool Served(const Connection& c) { return c.served && !HoldsPartialHead(c); }

  // The answer's bytes count against the budget with the request's until it is written: an answer
  // that would take the budget over its limit (clients that send and do not read) is replaced by
  // a 503 with Retry-After, the request's buffers are freed, and the connection closes after it.
  void Queue(Connection& c, const Response& response, Connection::Then then) {
    c.out.clear();
    AppendResponse(response, then != Connection::Then::kNextRequest, c.out);
    if (!Charge(c, c.in.Capacity() + c.parser.BodyCapacity() + c.out.capacity())) {
      server_.stats_.shedAnswers.fetch_add(1);
      std::string().swap(c.out);
      c.in = Buffer();
      c.parser.Reset();
      then = Connection::Then::kClose;
      AppendResponse(Busy("answer"), true, c.out);
      Charge(c, c.parser.BodyCapacity() + c.out.capacity());  // less than before: always granted
    }
    c.outSent = 0;
    c.then = then;
    c.phase = Connection::Phase::kWriting;
    c.deadline = now_ + server_.options_.requestTimeout;
  }

  // Closes the connections with no request under way (at shutdown).
  void CloseIdle() {
    for (size_t i = conns_.size(); i-- > 0;) {
      Connection& c = *conns_[i];
      bool idle = c.phase == Connection::Phase::kHandshake ||
                  (c.phase == Connection::Phase::kReading && c.in.Size() == 0 &&
                   !(c.ssl && SSL_has_pending(c.ssl.get()) == 1) && !BytesWaiting(c));
      if (idle) Close(c);
    }
  }

  // Whether the client has sent bytes not read yet: a request on its way is not idle.
  static bool BytesWaiting(const Connection& c) {
    char byte;
    return ::recv(c.fd.get(), &byte, 1, MSG_PEEK | MSG_DONTWAIT) > 0;
  }

  void CloseExpired() {
    for (size_t i = conns_.size(); i-- > 0;) {
      Connection& c = *conns_[i];
      if (now_ < c.deadline) continue;
      if (!c.served && (c.phase == Connection::Phase::kHandshake ||
                        (c.phase == Connection::Phase::kReading && c.in.Size() == 0))) {
        server_.stats_.firstRequestTimeouts.fetch_add(1);
      } else if (c.phase == Connection::Phase::kReading && c.in.Size() > 0 &&
                 !c.parser.HeadComplete()) {
        server_.stats_.headerTimeouts.fetch_add(1);
      } else if (c.phase == Connection::Phase::kReading && c.in.Size() > 0) {
        log::Limited(log::Level::kWarn, "request_timeout",
                     "request not received in time; connection closed",
                     {{"server", server_.options_.name}, {"remote", c.remote}});
      }
      Close(c);
    }
  }

  void Close(Connection& c) {
    epoll_ctl(epoll_.get(), EPOLL_CTL_DEL, c.fd.get(), nullptr);
    if (c.charged > 0 && server_.options_.budget != nullptr) {
      server_.options_.budget->Release(c.charged);
    }
    size_t i = c.index;
    if (i + 1 != conns_.size()) {
      std::swap(conns_[i], conns_.back());
      conns_[i]->index = i;
    }
    conns_.pop_back();  // frees the SSL object, then closes the socket
    load_.fetch_sub(1);
    server_.ConnectionClosed();
  }

  Server& server_;
  UniqueFd epoll_, wake_;
  std::thread thread_;
  std::mutex mu_;
  struct Incoming {
    int fd;
    std::string remote;
    PeerCounts::Hold peer;
  };
  std::vector<Incoming> incoming_;
  std::atomic<bool> stop_{false};
  std::atomic<size_t> load_{0};
  std::atomic<int64_t> offer_{kNoOffer};
  std::atomic<size_t> evictCount_{0};
  uint64_t seenRound_ = 0;
  std::vector<std::unique_ptr<Connection>> conns_;
  Clock::time_point now_ = Clock::now();
};

bool ByteBudget::TryAcquire(size_t bytes) {
  size_t used = used_.load();
  do {
    if (bytes > limit_ || used > limit_ - bytes) return false;
  } while (!used_.compare_exchange_weak(used, used + bytes));
  return true;
}

Server::Server(ServerOptions options, Handler handler, ErrorResponder onError)
    : options_(std::move(options)), handler_(std::move(handler)), onError_(std::move(onError)) {}

Server::~Server() {
  Shutdown(std::chrono::milliseconds(0));
}

Status Server::Start() {
  // A peer gone mid-write must be an error return, not a signal that ends the process.
  signal(SIGPIPE, SIG_IGN);
  if (options_.tls != nullptr) {
    // The write loop resumes partial writes from a buffer that may have moved; read-ahead lets
    // one read(2) take a whole request instead of a record header and then its body.
    SSL_CTX_set_mode(options_.tls,
                     SSL_MODE_ENABLE_PARTIAL_WRITE | SSL_MODE_ACCEPT_MOVING_WRITE_BUFFER);
    SSL_CTX_set_read_ahead(options_.tls, 1);
  }
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  hints.ai_flags = AI_PASSIVE;
  addrinfo* found = nullptr;
  std::string portText = std::to_string(options_.port);
  if (int rc = getaddrinfo(options_.bindAddress.c_str(), portText.c_str(), &hints, &found);
      rc != 0) {
    return Status::IOError("cannot resolve " + options_.bindAddress + ": " + gai_strerror(rc));
  }
  std::unique_ptr<addrinfo, decltype(&freeaddrinfo)> addresses(found, &freeaddrinfo);
  std::string where = options_.bindAddress + ":" + portText;
  UniqueFd listener(
      ::socket(found->ai_family, found->ai_socktype | SOCK_CLOEXEC, found->ai_protocol));
  if (listener.get() < 0) return Status::IOError("cannot create a socket: " + Errno(errno));
  int on = 1;
  setsockopt(listener.get(), SOL_SOCKET, SO_REUSEADDR, &on, sizeof on);
  for (int option : {SO_SNDBUF, SO_RCVBUF}) {
    setsockopt(listener.get(), SOL_SOCKET, option, &kSocketBufferBytes, sizeof kSocketBufferBytes);
  }
  if (::bind(listener.get(), found->ai_addr, found->ai_addrlen) != 0) {
    return Status::IOError("cannot listen on " + where + ": " + Errno(errno));
  }
  if (::listen(listener.get(), 1024) != 0) {
    return Status::IOError("cannot listen on " + where + ": " + Errno(errno));
  }
  sockaddr_storage bound{};
  socklen_t len = sizeof bound;
  getsockname(listener.get(), reinterpret_cast<sockaddr*>(&bound), &len);
  port_ = ntohs(bound.ss_family == AF_INET6 ? reinterpret_cast<sockaddr_in6&>(bound).sin6_port
                                            : reinterpret_cast<sockaddr_in&>(bound).sin_port);
  UniqueFd stop(eventfd(0, EFD_CLOEXEC));
  if (stop.get() < 0) return Status::IOError("cannot create an eventfd: " + Errno(errno));

  size_t n = options_.workerThreads > 0 ? options_.workerThreads : DefaultWorkers();
  for (size_t i = 0; i < n; ++i) {
    workers_.push_back(std::make_unique<Worker>(*this));
    if (Status err = workers_.back()->Init(); !err.ok()) {
      for (auto& w : workers_) w->Stop();
      for (auto& w : workers_) w->Join();
      workers_.clear();
      return err;
    }
  }
  // Owned by the server from here on, closed by Shutdown.
  listenFd_ = listener.Release();
  stopFd_ = stop.Release();
  accepting_ = true;
  acceptor_ = std::thread([this] { AcceptLoop(); });
  return Status::Ok();
}

void Server::AcceptLoop() {
  try {
    auto lastFullLog = Clock::time_point();
    while (true) {
      pollfd fds[2] = {{listenFd_, POLLIN, 0}, {stopFd_, POLLIN, 0}};
      if (::poll(fds, 2, -1) < 0) {
        if (errno == EINTR) continue;
        log::Error("poll failed", {{"server", options_.name}, {"error", Errno(errno)}});
        return;
      }
      if (fds[1].revents != 0) return;
      if (!MakeRoom()) {
        std::lock_guard lock(capacityMu_);
        if (stopping_) return;
        continue;  // every connection busy: the new one waits in the backlog a little longer
      }
      sockaddr_storage peer{};
      socklen_t len = sizeof peer;
      int fd = ::accept4(listenFd_, reinterpret_cast<sockaddr*>(&peer), &len,
                         SOCK_NONBLOCK | SOCK_CLOEXEC);
      if (fd < 0) {
        if (errno == EMFILE || errno == ENFILE || errno == ENOBUFS || errno == ENOMEM) {
          if (Clock::now() - lastFullLog > std::chrono::seconds(10)) {
            log::Error("cannot accept connections",
                       {{"server", options_.name}, {"error", Errno(errno)}});
            lastFullLog = Clock::now();
          }
          std::this_thread::sleep_for(std::chrono::milliseconds(100));
        }
        continue;  // EAGAIN, ECONNABORTED, EINTR: the next one
      }
      int on = 1;
      if (peer.ss_family == AF_INET || peer.ss_family == AF_INET6) {
        setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &on, sizeof on);
      }
      open_.fetch_add(1);
      Worker* least = workers_.front().get();
      for (auto& w : workers_) {
        if (w->Load() < least->Load()) least = w.get();
      }
      std::string remote = FormatAddress(peer);
      PeerCounts::Hold hold = peers_.Join(remote);
      least->Adopt(fd, std::move(remote), std::move(hold));
    }
  } catch (...) {
    log::Error("HTTP acceptor failed",
               {{"server", options_.name}, {"error", CurrentExceptionText()}});
  }
}

bool Server::MakeRoom() {
  std::unique_lock lock(capacityMu_);
  if (stopping_) return false;
  if (open_.load() < options_.maxConnections) return true;
  auto hasRoom = [this] { return stopping_ || open_.load() < options_.maxConnections; };
  // Under a flood of connections (room wanted again within 20 ms) each round makes room for more,
  // up to an eighth of the limit, so the backlog drains at accept speed; otherwise for one.
  auto now = Clock::now();
  evictBatch_ = now - lastEviction_ < std::chrono::milliseconds(20)
                    ? std::min(evictBatch_ * 2, std::max<size_t>(1, options_.maxConnections / 8))
                    : 1;
  lastEviction_ = now;
  if (workers_.size() == 1) {  // no one to compare with
    workers_.front()->Evict(evictBatch_);
    return capacityCv_.wait_for(lock, std::chrono::milliseconds(5), hasRoom) && !stopping_;
  }
  // Every worker offers its longest-idle connection...
  offers_ = 0;
  evictRound_.fetch_add(1);
  lock.unlock();
  for (auto& w : workers_) w->Poke();
  lock.lock();
  capacityCv_.wait_for(lock, std::chrono::milliseconds(50),
                       [&] { return hasRoom() || offers_ == workers_.size(); });
  if (hasRoom()) return !stopping_;
  // ...and the one that has waited longest of them all is closed.
  Worker* oldest = nullptr;
  for (auto& w : workers_) {
    if (w->Offer() != Worker::kNoOffer && (oldest == nullptr || w->Offer() < oldest->Offer())) {
      oldest = w.get();
    }
  }
  if (oldest != nullptr) oldest->Evict(evictBatch_);
  bool room = capacityCv_.wait_for(lock, std::chrono::milliseconds(5), hasRoom);
  return room && !stopping_;
}

void Server::OfferMade() {
  {
    std::lock_guard lock(capacityMu_);
    ++offers_;
  }
  capacityCv_.notify_one();
}

void Server::ConnectionClosed() {
  {
    std::lock_guard lock(capacityMu_);
    open_.fetch_sub(1);
  }
  capacityCv_.notify_one();
}

void Server::Shutdown(std::chrono::milliseconds grace) {
  if (!acceptor_.joinable()) return;
  {
    std::lock_guard lock(capacityMu_);
    stopping_ = true;
  }
  capacityCv_.notify_all();
  uint64_t one = 1;
  ssize_t ignored = ::write(stopFd_, &one, sizeof one);
  (void)ignored;
  acceptor_.join();
  accepting_ = false;
  ::close(listenFd_);
  ::close(stopFd_);
  listenFd_ = stopFd_ = -1;

  // One flag for every worker, set before any is woken: a request answered by any worker from
  // now on says `Connection: close`.
  draining_ = true;
  for (auto& w : workers_) w->Poke();
  auto deadline = Clock::now() + grace;
  while (open_.load() > 0 && Clock::now() < deadline) {
    std::this_thread::sleep_for(std::chrono::milliseconds(5));
  }
  for (auto& w : workers_) w->Stop();
  for (auto& w : workers_) w->Join();
  workers_.clear();
}

}  // namespace iw::http
