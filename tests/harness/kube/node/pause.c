// The pod sandbox's "pause" process for the harness's node: it holds the pod's namespaces and does nothing else.
// PID 1 of the sandbox: reaps children and exits on SIGINT/SIGTERM.
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>

static void onStop(int sig) {
  (void)sig;
  _exit(0);
}

static void onChild(int sig) {
  (void)sig;
  while (waitpid(-1, NULL, WNOHANG) > 0) {
  }
}

int main(void) {
  struct sigaction stop = {0};
  stop.sa_handler = onStop;
  sigaction(SIGINT, &stop, NULL);
  sigaction(SIGTERM, &stop, NULL);
  struct sigaction child = {0};
  child.sa_handler = onChild;
  child.sa_flags = SA_NOCLDSTOP;
  sigaction(SIGCHLD, &child, NULL);
  for (;;) {
    pause();
  }
  return 0;
}
