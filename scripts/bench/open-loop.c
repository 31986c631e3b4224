/*
 * An open-loop HTTP/1.1 load generator for npm run bench (scripts/bench/open-loop.ts):
 * requests are due at a fixed rate, one every 1/RATE s from the start, whatever the
 * answers do, and each one's latency counts from when it was due, not from when it was
 * sent: a server that stalls sees the requests due meanwhile wait, as independent clients'
 * requests would, instead of the generator slowing its offer down ("coordinated
 * omission"). wrk2's method, written small: one thread, epoll, a timerfd armed at the next
 * due time (microseconds, not epoll_wait's milliseconds), up to CONNECTIONS keep-alive
 * connections with one request in flight each; a due request with no free connection
 * waits in the generator, its wait counted.
 *
 *   open-loop HOST PORT RATE SECONDS CONNECTIONS REQUEST_FILE...
 *
 * REQUEST_FILEs hold whole requests (head and body), sent in turn. Answers must carry
 * Content-Length. Prints one JSON object: counts, the latency percentiles in ms, and how
 * late the generator itself sent (its own floor). Linux only (epoll, timerfd).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <sys/timerfd.h>
#include <time.h>
#include <unistd.h>

#define MAX_CONNECTIONS 4096
#define BUFFER 65536

struct connection {
  int fd;
  int busy;
  int64_t due; /* ns, of the request in flight */
  size_t have;
  char buf[BUFFER];
};

static struct sockaddr_in address;
static struct connection *connections;
static int connection_count;
static int epoll_fd;
static char **requests;
static size_t *request_lengths;
static int request_count;
static int64_t next_request;

static int64_t *latencies; /* ns */
static int64_t *send_lags; /* ns from due to written */
static int64_t done, non2xx, errors, lags;

static int64_t now_ns(void) {
  struct timespec ts;
  clock_gettime(CLOCK_MONOTONIC, &ts);
  return (int64_t)ts.tv_sec * 1000000000LL + ts.tv_nsec;
}

static void die(const char *what) {
  perror(what);
  exit(2);
}

static void open_connection(struct connection *c) {
  c->fd = socket(AF_INET, SOCK_STREAM, 0);
  if (c->fd < 0) die("socket");
  int one = 1;
  setsockopt(c->fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
  if (connect(c->fd, (struct sockaddr *)&address, sizeof address) != 0) die("connect");
  fcntl(c->fd, F_SETFL, O_NONBLOCK);
  c->busy = 0;
  c->have = 0;
  struct epoll_event ev = {.events = EPOLLIN, .data.ptr = c};
  if (epoll_ctl(epoll_fd, EPOLL_CTL_ADD, c->fd, &ev) != 0) die("epoll_ctl");
}

static void reopen(struct connection *c) {
  epoll_ctl(epoll_fd, EPOLL_CTL_DEL, c->fd, NULL);
  close(c->fd);
  open_connection(c);
}

/* Writes the next request on c (small requests: one write on a fresh socket buffer). */
static void send_on(struct connection *c, int64_t due) {
  const char *r = requests[next_request % request_count];
  size_t n = request_lengths[next_request % request_count];
  next_request++;
  size_t off = 0;
  while (off < n) {
    ssize_t w = write(c->fd, r + off, n - off);
    if (w < 0 && errno == EAGAIN) continue;
    if (w <= 0) {
      errors++;
      reopen(c);
      return;
    }
    off += (size_t)w;
  }
  c->busy = 1;
  c->due = due;
  c->have = 0;
  send_lags[lags++] = now_ns() - due;
}

/* A whole answer in the buffer: its length, or 0 while incomplete. */
static size_t answer_length(struct connection *c, int *status) {
  c->buf[c->have < BUFFER ? c->have : BUFFER - 1] = 0;
  char *end = strstr(c->buf, "\r\n\r\n");
  if (!end) return 0;
  size_t head = (size_t)(end - c->buf) + 4;
  *status = atoi(c->buf + 9);
  char *cl = strcasestr(c->buf, "\r\ncontent-length:");
  size_t body = (cl && cl < end) ? (size_t)strtoul(cl + 17, NULL, 10) : 0;
  return c->have >= head + body ? head + body : 0;
}

static int cmp(const void *a, const void *b) {
  int64_t x = *(const int64_t *)a, y = *(const int64_t *)b;
  return (x > y) - (x < y);
}

/* The p-th percentile in ms; requests never answered count as the slowest: a percentile among them is -1. */
static double pct(const int64_t *xs, int64_t n, int64_t missing, double p) {
  int64_t all = n + missing;
  if (all == 0) return -1;
  int64_t i = (int64_t)((p / 100.0) * (double)all + 0.999999) - 1;
  if (i < 0) i = 0;
  if (i >= n) return -1;
  return (double)xs[i] / 1e6;
}

int main(int argc, char **argv) {
  if (argc < 7) {
    fprintf(stderr, "usage: open-loop HOST PORT RATE SECONDS CONNECTIONS REQUEST_FILE...\n");
    return 2;
  }
  address.sin_family = AF_INET;
  address.sin_port = htons((uint16_t)atoi(argv[2]));
  if (inet_pton(AF_INET, argv[1], &address.sin_addr) != 1) die("address");
  double rate = atof(argv[3]);
  double seconds = atof(argv[4]);
  connection_count = atoi(argv[5]);
  if (rate <= 0 || seconds <= 0 || connection_count < 1 || connection_count > MAX_CONNECTIONS) {
    fprintf(stderr, "RATE and SECONDS must be > 0, CONNECTIONS 1..%d\n", MAX_CONNECTIONS);
    return 2;
  }
  request_count = argc - 6;
  requests = calloc((size_t)request_count, sizeof *requests);
  request_lengths = calloc((size_t)request_count, sizeof *request_lengths);
  for (int i = 0; i < request_count; i++) {
    FILE *f = fopen(argv[6 + i], "rb");
    if (!f) die(argv[6 + i]);
    requests[i] = malloc(BUFFER);
    request_lengths[i] = fread(requests[i], 1, BUFFER, f);
    fclose(f);
  }
  int64_t total = (int64_t)(rate * seconds);
  int64_t interval = (int64_t)(1e9 / rate);
  latencies = calloc((size_t)total + 1, sizeof *latencies);
  send_lags = calloc((size_t)total + 1, sizeof *send_lags);
  connections = calloc((size_t)connection_count, sizeof *connections);

  epoll_fd = epoll_create1(0);
  if (epoll_fd < 0) die("epoll_create1");
  for (int i = 0; i < connection_count; i++) open_connection(&connections[i]);
  int timer = timerfd_create(CLOCK_MONOTONIC, TFD_NONBLOCK);
  struct epoll_event tev = {.events = EPOLLIN, .data.ptr = NULL};
  epoll_ctl(epoll_fd, EPOLL_CTL_ADD, timer, &tev);

  int64_t start = now_ns() + 10000000LL; /* 10 ms to settle */
  int64_t issued = 0;                    /* requests whose due time has come */
  int64_t sent = 0;                      /* of those, the ones written */
  int64_t deadline = start + (int64_t)(seconds * 1e9) + 2000000000LL; /* 2 s more for the last answers */
  struct epoll_event events[256];

  while (done + errors < total && now_ns() < deadline) {
    int64_t t = now_ns();
    while (issued < total && start + issued * interval <= t) issued++;
    /* Due requests go out oldest first on free connections. */
    for (int i = 0; i < connection_count && sent < issued; i++) {
      if (!connections[i].busy) {
        send_on(&connections[i], start + sent * interval);
        sent++;
      }
    }
    if (issued < total) {
      int64_t next = start + issued * interval;
      struct itimerspec at = {.it_value = {.tv_sec = next / 1000000000LL, .tv_nsec = next % 1000000000LL}};
      timerfd_settime(timer, TFD_TIMER_ABSTIME, &at, NULL);
    }
    int n = epoll_wait(epoll_fd, events, 256, 100);
    for (int i = 0; i < n; i++) {
      struct connection *c = events[i].data.ptr;
      if (!c) {
        uint64_t expirations;
        if (read(timer, &expirations, sizeof expirations) < 0 && errno != EAGAIN) die("timerfd");
        continue;
      }
      for (;;) {
        ssize_t r = read(c->fd, c->buf + c->have, BUFFER - 1 - c->have);
        if (r < 0 && errno == EAGAIN) break;
        if (r <= 0) {
          if (c->busy) errors++;
          reopen(c);
          break;
        }
        c->have += (size_t)r;
        int status = 0;
        size_t len = answer_length(c, &status);
        if (len == 0) continue;
        if (c->busy) {
          latencies[done++] = now_ns() - c->due;
          if (status < 200 || status > 299) non2xx++;
        }
        c->busy = 0;
        memmove(c->buf, c->buf + len, c->have - len);
        c->have -= len;
        /* The next due request at once, on this connection now free. */
        if (sent < issued) {
          send_on(c, start + sent * interval);
          sent++;
        }
        break;
      }
    }
  }
  int64_t unanswered = total - done - errors;

  qsort(latencies, (size_t)done, sizeof *latencies, cmp);
  qsort(send_lags, (size_t)lags, sizeof *send_lags, cmp);
  printf("{\"offered\":%lld,\"answered\":%lld,\"non2xx\":%lld,\"errors\":%lld,\"unanswered\":%lld,"
         "\"p50\":%.3f,\"p90\":%.3f,\"p95\":%.3f,\"p99\":%.3f,\"p999\":%.3f,\"max\":%.3f,"
         "\"sendLagP99\":%.3f,\"sendLagP999\":%.3f,\"sendLagMax\":%.3f}\n",
         (long long)total, (long long)done, (long long)non2xx, (long long)errors, (long long)unanswered,
         pct(latencies, done, unanswered + errors, 50), pct(latencies, done, unanswered + errors, 90),
         pct(latencies, done, unanswered + errors, 95),
         pct(latencies, done, unanswered + errors, 99), pct(latencies, done, unanswered + errors, 99.9),
         done ? (double)latencies[done - 1] / 1e6 : -1, pct(send_lags, lags, 0, 99), pct(send_lags, lags, 0, 99.9),
         lags ? (double)send_lags[lags - 1] / 1e6 : -1);
  return 0;
}
