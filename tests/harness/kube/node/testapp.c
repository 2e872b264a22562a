// A tiny static HTTP server for the harness's node tests (image flotilla.local/testapp).
//   testapp [PORT]        serves "ok\n" with 200 on every path (default port 8080)
//   testapp --exit CODE   exits at once with CODE (a container that keeps crashing)
//   testapp --unready [PORT]  serves 503 on every path (a readiness probe that keeps failing)
#include <netinet/in.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

static void onStop(int sig) {
  (void)sig;
  _exit(0);
}

static void answer(int fd, int ready) {
  char request[2048];
  ssize_t n = read(fd, request, sizeof request);
  (void)n;
  const char* reply = ready ? "HTTP/1.0 200 OK\r\nContent-Length: 3\r\n\r\nok\n"
                            : "HTTP/1.0 503 Service Unavailable\r\nContent-Length: 8\r\n\r\nunready\n";
  ssize_t w = write(fd, reply, strlen(reply));
  (void)w;
  close(fd);
}

int main(int argc, char** argv) {
  signal(SIGTERM, onStop);
  signal(SIGINT, onStop);
  int ready = 1;
  int arg = 1;
  if (argc > 2 && strcmp(argv[1], "--exit") == 0) {
    fprintf(stderr, "testapp: exiting with %s as asked\n", argv[2]);
    return atoi(argv[2]);
  }
  if (argc > 1 && strcmp(argv[1], "--unready") == 0) {
    ready = 0;
    arg = 2;
  }
  int port = argc > arg ? atoi(argv[arg]) : 8080;
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in addr = {0};
  addr.sin_family = AF_INET;
  addr.sin_port = htons((unsigned short)port);
  if (fd < 0 || bind(fd, (struct sockaddr*)&addr, sizeof addr) != 0 || listen(fd, 16) != 0) {
    perror("testapp: listen");
    return 1;
  }
  fprintf(stderr, "testapp: listening on %d (%s)\n", port, ready ? "ready" : "unready");
  for (;;) {
    int client = accept(fd, NULL, NULL);
    if (client >= 0) {
      answer(client, ready);
    }
  }
}
