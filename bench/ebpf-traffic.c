// Traffic generator and sink for bench/ebpf-traffic.bench.ts (built by the bench with gcc). C rather
// than Node: a Node client spends far more per message than the kernel's NAT does, which would hide
// the very cost the bench compares.
//
//   serve PORT                 TCP: echo one byte per request (rr) or discard (stream); UDP: count
//                              datagrams, and print the count when a TCP client sends 'q'.
//   rr HOST PORT SECONDS       one TCP connection, 1-byte request / 1-byte reply for SECONDS: prints
//                              transactions per second.
//   stream HOST PORT SECONDS   one TCP connection, 64 KiB writes for SECONDS: prints MB/s.
//   udp HOST PORT SECONDS      unconnected sendto() of 64-byte datagrams for SECONDS: prints datagrams
//                              sent per second (the server's count is read with `count`).
//   crr HOST PORT SECONDS      a new TCP connection per 1-byte request / 1-byte reply, closed after it:
//                              prints connections per second.
//   count HOST PORT            asks the server for its UDP count since the last ask.
#include <arpa/inet.h>
#include <errno.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

static double now(void) {
  struct timespec t;
  clock_gettime(CLOCK_MONOTONIC, &t);
  return t.tv_sec + t.tv_nsec / 1e9;
}

static struct sockaddr_in addr_of(const char* host, int port) {
  struct sockaddr_in a;
  memset(&a, 0, sizeof a);
  a.sin_family = AF_INET;
  a.sin_port = htons(port);
  if (inet_pton(AF_INET, host, &a.sin_addr) != 1) {
    fprintf(stderr, "bad address %s\n", host);
    exit(2);
  }
  return a;
}

static int tcp_connect(const char* host, int port) {
  struct sockaddr_in a = addr_of(host, port);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("connect");
    exit(1);
  }
  return fd;
}

static volatile unsigned long udp_count;

static void* udp_sink(void* arg) {
  int port = *(int*)arg;
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  struct sockaddr_in a = addr_of("0.0.0.0", port);
  int big = 8 << 20;
  setsockopt(fd, SOL_SOCKET, SO_RCVBUF, &big, sizeof big);
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0) {
    perror("bind udp");
    exit(1);
  }
  char buf[2048];
  for (;;)
    if (recv(fd, buf, sizeof buf, 0) > 0) __atomic_add_fetch(&udp_count, 1, __ATOMIC_RELAXED);
  return NULL;
}

// One TCP connection: 1-byte messages are echoed (rr), larger reads discarded (stream), 'q' answers
// with the UDP count since the last ask.
static void* tcp_conn(void* arg) {
  int fd = (int)(long)arg;
  int one = 1;
  setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  char buf[65536];
  for (;;) {
    ssize_t n = read(fd, buf, sizeof buf);
    if (n <= 0) break;
    if (n == 1 && buf[0] == 'q') {
      unsigned long c = __atomic_exchange_n(&udp_count, 0, __ATOMIC_RELAXED);
      int len = snprintf(buf, sizeof buf, "%lu\n", c);
      if (write(fd, buf, len) != len) break;
    } else if (n == 1) {
      if (write(fd, buf, 1) != 1) break;
    }
  }
  close(fd);
  return NULL;
}

static int serve(int port) {
  pthread_t t;
  pthread_create(&t, NULL, udp_sink, &port);
  int fd = socket(AF_INET, SOCK_STREAM, 0);
  int one = 1;
  setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
  struct sockaddr_in a = addr_of("0.0.0.0", port);
  if (bind(fd, (struct sockaddr*)&a, sizeof a) != 0 || listen(fd, 64) != 0) {
    perror("bind tcp");
    return 1;
  }
  printf("ready\n");
  fflush(stdout);
  for (;;) {
    int c = accept(fd, NULL, NULL);
    if (c < 0) continue;
    pthread_create(&t, NULL, tcp_conn, (void*)(long)c);
    pthread_detach(t);
  }
}

static int rr(const char* host, int port, double seconds) {
  int fd = tcp_connect(host, port);
  char b = 'x';
  unsigned long n = 0;
  double t0 = now(), end = t0 + seconds;
  while ((n & 255) != 0 || now() < end) {
    if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1) {
      perror("rr");
      return 1;
    }
    n++;
  }
  printf("%.0f\n", n / (now() - t0));
  return 0;
}

static int crr(const char* host, int port, double seconds) {
  char b = 'x';
  unsigned long n = 0;
  double t0 = now(), end = t0 + seconds;
  while (now() < end) {
    int fd = tcp_connect(host, port);
    if (write(fd, &b, 1) != 1 || read(fd, &b, 1) != 1) {
      perror("crr");
      return 1;
    }
    close(fd);
    n++;
  }
  printf("%.0f\n", n / (now() - t0));
  return 0;
}

static int stream(const char* host, int port, double seconds) {
  int fd = tcp_connect(host, port);
  static char buf[65536];
  memset(buf, 'y', sizeof buf);
  unsigned long bytes = 0;
  double t0 = now(), end = t0 + seconds;
  while (now() < end) {
    ssize_t w = write(fd, buf, sizeof buf);
    if (w <= 0) {
      perror("stream");
      return 1;
    }
    bytes += w;
  }
  printf("%.1f\n", bytes / (now() - t0) / 1e6);
  return 0;
}

static int udp(const char* host, int port, double seconds) {
  struct sockaddr_in a = addr_of(host, port);
  int fd = socket(AF_INET, SOCK_DGRAM, 0);
  char buf[64];
  memset(buf, 'u', sizeof buf);
  unsigned long n = 0;
  double t0 = now(), end = t0 + seconds;
  while ((n & 255) != 0 || now() < end) {
    if (sendto(fd, buf, sizeof buf, 0, (struct sockaddr*)&a, sizeof a) == sizeof buf) n++;
    else if (errno != ENOBUFS && errno != EAGAIN) {
      perror("sendto");
      return 1;
    }
  }
  printf("%.0f\n", n / (now() - t0));
  return 0;
}

static int count(const char* host, int port) {
  int fd = tcp_connect(host, port);
  char buf[64];
  if (write(fd, "q", 1) != 1) return 1;
  ssize_t n = read(fd, buf, sizeof buf - 1);
  if (n <= 0) return 1;
  buf[n] = 0;
  fputs(buf, stdout);
  return 0;
}

int main(int argc, char** argv) {
  if (argc >= 3 && strcmp(argv[1], "serve") == 0) return serve(atoi(argv[2]));
  if (argc >= 4 && strcmp(argv[1], "count") == 0) return count(argv[2], atoi(argv[3]));
  if (argc >= 5) {
    double s = atof(argv[4]);
    if (strcmp(argv[1], "rr") == 0) return rr(argv[2], atoi(argv[3]), s);
    if (strcmp(argv[1], "crr") == 0) return crr(argv[2], atoi(argv[3]), s);
    if (strcmp(argv[1], "stream") == 0) return stream(argv[2], atoi(argv[3]), s);
    if (strcmp(argv[1], "udp") == 0) return udp(argv[2], atoi(argv[3]), s);
  }
  fprintf(stderr, "usage: serve PORT | rr|crr|stream|udp HOST PORT SECONDS | count HOST PORT\n");
  return 2;
}
