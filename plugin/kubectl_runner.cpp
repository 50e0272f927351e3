#include "plugin/kubectl_runner.h"

#include <fcntl.h>
#include <poll.h>
#include <spawn.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cerrno>
#include <cstdlib>
#include <cstring>
#include <utility>

#include "lib/unique_fd.h"

extern char** environ;

namespace iw::plugin {
namespace {

struct Pipe {
  UniqueFd read, write;
};

Status MakePipe(Pipe& p) {
  int fds[2];
  if (::pipe2(fds, O_CLOEXEC) != 0) return Status::IOError(std::string("pipe: ") + strerror(errno));
  p.read = UniqueFd(fds[0]);
  p.write = UniqueFd(fds[1]);
  return Status::Ok();
}

// posix_spawn's file actions, destroyed once.
class FileActions {
 public:
  FileActions() { posix_spawn_file_actions_init(&a_); }
  ~FileActions() { posix_spawn_file_actions_destroy(&a_); }
  FileActions(const FileActions&) = delete;
  FileActions& operator=(const FileActions&) = delete;
  posix_spawn_file_actions_t* get() { return &a_; }

 private:
  posix_spawn_file_actions_t a_;
};

// A started child, waited for exactly once (also when reading fails).
class Child {
 public:
  explicit Child(pid_t pid) : pid_(pid) {}
  ~Child() {
    if (pid_ > 0) (void)Wait();
  }
  Child(const Child&) = delete;
  Child& operator=(const Child&) = delete;
  int Wait() {
    int status = 0;
    while (::waitpid(pid_, &status, 0) < 0 && errno == EINTR) {
    }
    pid_ = -1;
    if (WIFEXITED(status)) return WEXITSTATUS(status);
    if (WIFSIGNALED(status)) return 128 + WTERMSIG(status);
    return 1;
  }

 private:
  pid_t pid_;
};

// Reads both pipes to their end, whichever kubectl writes first (it may fill either).
Status ReadBoth(UniqueFd& out, UniqueFd& err, std::string& outText, std::string& errText) {
  char buf[65536];
  while (out.get() >= 0 || err.get() >= 0) {
    pollfd fds[2] = {{out.get(), POLLIN, 0}, {err.get(), POLLIN, 0}};
    if (::poll(fds, 2, -1) < 0) {
      if (errno == EINTR) continue;
      return Status::IOError(std::string("poll: ") + strerror(errno));
    }
    for (int i = 0; i < 2; ++i) {
      if (fds[i].fd < 0 || fds[i].revents == 0) continue;
      UniqueFd& fd = i == 0 ? out : err;
      ssize_t n = ::read(fd.get(), buf, sizeof buf);
      if (n < 0 && errno == EINTR) continue;
      if (n <= 0) {
        fd.Reset();
        continue;
      }
      (i == 0 ? outText : errText).append(buf, static_cast<size_t>(n));
    }
  }
  return Status::Ok();
}

}  // namespace

std::string KubectlPath() {
  const char* k = std::getenv("KUBECTL");
  return k != nullptr && *k != '\0' ? k : "kubectl";
}

StatusOr<KubectlResult> RunKubectl(const std::vector<std::string>& args) {
  const std::string path = KubectlPath();
  std::vector<std::string> argvStore;
  argvStore.push_back(path);
  argvStore.insert(argvStore.end(), args.begin(), args.end());
  std::vector<char*> argv;
  for (std::string& a : argvStore) argv.push_back(a.data());
  argv.push_back(nullptr);

  Pipe out, err;
  if (Status s = MakePipe(out); !s.ok()) return s;
  if (Status s = MakePipe(err); !s.ok()) return s;
  FileActions actions;
  posix_spawn_file_actions_addopen(actions.get(), 0, "/dev/null", O_RDONLY, 0);
  posix_spawn_file_actions_adddup2(actions.get(), out.write.get(), 1);
  posix_spawn_file_actions_adddup2(actions.get(), err.write.get(), 2);
  pid_t pid = -1;
  int rc = path.find('/') == std::string::npos
               ? posix_spawnp(&pid, path.c_str(), actions.get(), nullptr, argv.data(), environ)
               : posix_spawn(&pid, path.c_str(), actions.get(), nullptr, argv.data(), environ);
  if (rc != 0) {
    return Status::IOError("cannot run " + path + ": " + strerror(rc) +
                           " (install kubectl on PATH or set KUBECTL)");
  }
  Child child(pid);
  out.write.Reset();
  err.write.Reset();
  KubectlResult result;
  if (Status s = ReadBoth(out.read, err.read, result.out, result.err); !s.ok()) return s;
  result.exitCode = child.Wait();
  // posix_spawnp reports a missing program as exit 127 of the child on glibc.
  if (result.exitCode == 127 && result.out.empty() && result.err.empty()) {
    return Status::IOError("cannot run " + path + " (install kubectl on PATH or set KUBECTL)");
  }
  return result;
}

}  // namespace iw::plugin
