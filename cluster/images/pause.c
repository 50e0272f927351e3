// The pod sandbox ("pause") process of localhost/inplace-pause: holds the pod's namespaces open forever,
// reaps the zombies that a shared PID namespace hands it, and exits 0 at once on SIGTERM or SIGINT.
// The same job as Kubernetes' own pause.c; built with `gcc -static` by build.sh, so the image needs
// nothing else.
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>

#ifndef PAUSE_VERSION
#define PAUSE_VERSION "unknown"
#endif

static void stop(int sig) {
  (void)sig;
  _exit(0);
}

static void reap(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(int argc, char** argv) {
  if (argc > 1 && (strcmp(argv[1], "-v") == 0 || strcmp(argv[1], "--version") == 0)) {
    printf("inplace-pause %s\n", PAUSE_VERSION);
    return 0;
  }
  if (getpid() != 1) fprintf(stderr, "inplace-pause: warning: not PID 1, so orphans are not reaped here\n");

  struct sigaction sa;
  memset(&sa, 0, sizeof sa);
  sigemptyset(&sa.sa_mask);
  sa.sa_handler = stop;
  if (sigaction(SIGINT, &sa, NULL) != 0 || sigaction(SIGTERM, &sa, NULL) != 0) return 1;
  sa.sa_handler = reap;
  sa.sa_flags = SA_NOCLDSTOP | SA_RESTART;
  if (sigaction(SIGCHLD, &sa, NULL) != 0) return 2;

  for (;;) pause();
}
