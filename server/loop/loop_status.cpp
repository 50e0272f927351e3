#include "server/loop/loop_status.h"

#include <fcntl.h>
#include <netdb.h>
#include <poll.h>
#include <sys/socket.h>
#include <unistd.h>

#include <cctype>
#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <memory>

#include "lib/unique_fd.h"
#include "server/process/log.h"

namespace iw::server {

namespace {

using Clock = std::chrono::steady_clock;

struct Url {
  std::string host, port, path;
};

std::optional<Url> ParseUrl(const std::string& url) {
  constexpr std::string_view kScheme = "http://";
  if (url.compare(0, kScheme.size(), kScheme) != 0) return std::nullopt;
  std::string rest = url.substr(kScheme.size());
  size_t slash = rest.find('/');
  std::string authority = rest.substr(0, slash);
  Url u;
  u.path = slash == std::string::npos ? "/" : rest.substr(slash);
  size_t colon = authority.rfind(':');
  if (colon != std::string::npos) {
    u.host = authority.substr(0, colon);
    u.port = authority.substr(colon + 1);
  } else {
    u.host = authority;
    u.port = "80";
  }
  if (u.host.empty() || u.port.empty() ||
      u.port.find_first_not_of("0123456789") != std::string::npos) {
    return std::nullopt;
  }
  return u;
}

// Waits until `fd` is ready for `events` or `deadline` passes.
bool WaitFor(int fd, short events, Clock::time_point deadline) {
  for (;;) {
    auto left = std::chrono::duration_cast<std::chrono::milliseconds>(deadline - Clock::now());
    if (left.count() <= 0) return false;
    pollfd p{fd, events, 0};
    int r = ::poll(&p, 1, static_cast<int>(left.count()));
    if (r > 0) return true;
    if (r == 0) return false;
    if (errno != EINTR) return false;
  }
}

}  // namespace

std::string ServiceHostFromEnv(const std::string& host) {
  std::string name = host.substr(0, host.find('.'));
  for (char& c : name)
    c = c == '-' ? '_' : static_cast<char>(std::toupper(static_cast<unsigned char>(c)));
  const char* v = std::getenv((name + "_SERVICE_HOST").c_str());
  return v != nullptr ? std::string(v) : std::string();
}

Status LoopStatusPoller::Validate(const std::string& url) {
  if (ParseUrl(url)) return Status::Ok();
  return Status::InvalidArgument("--loop-status-url must be http://HOST[:PORT]/PATH, got \"" + url +
                                 "\"");
}

LoopStatusPoller::LoopStatusPoller(Options options) : options_(std::move(options)) {
  if (std::optional<Url> u = ParseUrl(options_.url)) {
    host_ = u->host;
    port_ = u->port;
    path_ = u->path;
  }
}

LoopStatusPoller::~LoopStatusPoller() {
  Stop();
}

void LoopStatusPoller::Start() {
  std::lock_guard<std::mutex> lock(mu_);
  if (thread_.joinable() || host_.empty()) return;
  stop_ = false;
  thread_ = std::thread([this] { Run(); });
}

void LoopStatusPoller::Stop() {
  {
    std::lock_guard<std::mutex> lock(mu_);
    stop_ = true;
  }
  cv_.notify_all();
  if (thread_.joinable()) thread_.join();
}

bool LoopStatusPoller::Alive() const {
  std::lock_guard<std::mutex> lock(mu_);
  return loop_signal::Alive(lastAlive_, Clock::now(), options_.staleAfter);
}

void LoopStatusPoller::RenderMetrics(std::string& out) const {
  out +=
      "# HELP inplace_webhook_loop_status_polls_total Polls of the controller's /loopz by "
      "answer (error: no answer, or not one of /loopz's).\n";
  out += "# TYPE inplace_webhook_loop_status_polls_total counter\n";
  out +=
      "inplace_webhook_loop_status_polls_total{result=\"alive\"} " + std::to_string(alive_) + "\n";
  out += "inplace_webhook_loop_status_polls_total{result=\"no_loop\"} " + std::to_string(noLoop_) +
         "\n";
  out +=
      "inplace_webhook_loop_status_polls_total{result=\"error\"} " + std::to_string(errors_) + "\n";
  out +=
      "# HELP inplace_webhook_hold_questions_total The StatefulSet controller's pod DELETEs asked "
      "of the controller's /holdz, by answer (error: no answer; the DELETE went through).\n";
  out += "# TYPE inplace_webhook_hold_questions_total counter\n";
  out += "inplace_webhook_hold_questions_total{answer=\"hold\"} " + std::to_string(holds_) + "\n";
  out += "inplace_webhook_hold_questions_total{answer=\"release\"} " + std::to_string(releases_) +
         "\n";
  out += "inplace_webhook_hold_questions_total{answer=\"error\"} " + std::to_string(holdErrors_) +
         "\n";
}

void LoopStatusPoller::Run() {
  bool lastOk = true;
  for (;;) {
    const Clock::time_point started = Clock::now();
    std::optional<bool> answer;
    try {
      answer = PollOnce();
    } catch (const std::exception& e) {  // nothing escapes the thread
      answer = std::nullopt;
    }
    (answer ? (*answer ? alive_ : noLoop_) : errors_)++;
    if (!answer && lastOk) {
      iw::log::Warn("loop status: no answer from the controller; pods get no readiness gate",
                    {{"url", options_.url}});
    }
    lastOk = answer.has_value();
    std::unique_lock<std::mutex> lock(mu_);
    if (answer && *answer) {
      lastAlive_ = started;
    } else {
      lastAlive_.reset();
    }
    if (cv_.wait_until(lock, started + options_.period, [this] { return stop_; })) return;
  }
}

std::optional<LoopStatusPoller::PlainAnswer> LoopStatusPoller::Get(
    const std::string& path, std::chrono::milliseconds timeout) const {
  const Clock::time_point deadline = Clock::now() + timeout;
  addrinfo hints{};
  hints.ai_family = AF_UNSPEC;
  hints.ai_socktype = SOCK_STREAM;
  addrinfo* res = nullptr;
  if (::getaddrinfo(host_.c_str(), port_.c_str(), &hints, &res) != 0 || res == nullptr) {
    // No cluster DNS (a kubelet without clusterDNS): the Service's address from the environment
    // variables the kubelet gives every pod for the Services of its namespace.
    const std::string ip = ServiceHostFromEnv(host_);
    if (ip.empty() || ::getaddrinfo(ip.c_str(), port_.c_str(), &hints, &res) != 0 ||
        res == nullptr) {
      return std::nullopt;
    }
  }
  std::unique_ptr<addrinfo, decltype(&::freeaddrinfo)> addrs(res, &::freeaddrinfo);
  UniqueFd fd(
      ::socket(res->ai_family, res->ai_socktype | SOCK_NONBLOCK | SOCK_CLOEXEC, res->ai_protocol));
  if (fd.get() < 0) return std::nullopt;
  if (::connect(fd.get(), res->ai_addr, res->ai_addrlen) != 0) {
    if (errno != EINPROGRESS || !WaitFor(fd.get(), POLLOUT, deadline)) return std::nullopt;
    int err = 0;
    socklen_t len = sizeof err;
    if (::getsockopt(fd.get(), SOL_SOCKET, SO_ERROR, &err, &len) != 0 || err != 0) {
      return std::nullopt;
    }
  }
  const std::string request = "GET " + path + " HTTP/1.1\r\nHost: " + host_ +
                              "\r\nConnection: close\r\nUser-Agent: inplace-webhook\r\n\r\n";
  size_t sent = 0;
  while (sent < request.size()) {
    ssize_t n = ::send(fd.get(), request.data() + sent, request.size() - sent, MSG_NOSIGNAL);
    if (n > 0) {
      sent += static_cast<size_t>(n);
    } else if (n < 0 && (errno == EAGAIN || errno == EINTR)) {
      if (!WaitFor(fd.get(), POLLOUT, deadline)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  std::string answer;
  char buf[1024];
  while (answer.size() < 4096) {
    ssize_t n = ::recv(fd.get(), buf, sizeof buf, 0);
    if (n > 0) {
      answer.append(buf, static_cast<size_t>(n));
    } else if (n == 0) {
      break;
    } else if (errno == EAGAIN || errno == EINTR) {
      if (!WaitFor(fd.get(), POLLIN, deadline)) return std::nullopt;
    } else {
      return std::nullopt;
    }
  }
  // "HTTP/1.1 200 OK\r\n...\r\n\r\nbody"
  if (answer.compare(0, 5, "HTTP/") != 0) return std::nullopt;
  size_t sp = answer.find(' ');
  size_t end = answer.find("\r\n\r\n");
  if (sp == std::string::npos || end == std::string::npos) return std::nullopt;
  int status = std::atoi(answer.c_str() + sp + 1);
  return PlainAnswer{status, answer.substr(end + 4)};
}

std::optional<bool> LoopStatusPoller::PollOnce() const {
  std::optional<PlainAnswer> a = Get(path_, options_.timeout);
  if (!a) return std::nullopt;
  return loop_signal::ParseAnswer(a->status, a->body);
}

std::optional<statefulset_hold::Answer> LoopStatusPoller::AskHold(
    const statefulset_hold::PodFacts& facts) const {
  std::optional<statefulset_hold::Answer> answer;
  try {
    std::optional<PlainAnswer> a =
        Get(holdPath_ + "?" + statefulset_hold::EncodeQuery(facts), options_.holdTimeout);
    if (a && a->status == 200) answer = statefulset_hold::ParseAnswer(a->body);
  } catch (const std::exception&) {  // a review's thread: no answer, the DELETE goes through
    answer.reset();
  }
  (answer ? (answer->hold ? holds_ : releases_) : holdErrors_)++;
  if (!answer) {
    iw::log::Warn(
        "hold: no answer from the controller's /holdz; the StatefulSet controller's "
        "pod DELETE goes through",
        {{"pod", facts.ns + "/" + facts.name}});
  }
  return answer;
}

}  // namespace iw::server
