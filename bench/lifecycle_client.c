/*
 * A lean load client for bench/http.py: create+resume lifecycles over HTTP/1.1 keep-alive.
 *
 * Why C: on a 2-core machine the bench client shares the cores with the server it measures.
 * The aiohttp client spends about 0.5 ms of CPU per lifecycle (40-44 % of a core), so it takes
 * from the server the core a second worker would use. This one makes the same two requests
 * (same paths, headers and bodies) with one blocking socket per thread and a few syscalls per
 * request, so nearly all of the CPU is left to the server under test.
 *
 * Usage: lifecycle_client HOST PORT SECONDS CONCURRENCY CREATE_BODY RESUME_BODY
 * Prints "count wall_s cpu_s" on the first line, then each lifecycle's latency in microseconds.
 * Any unexpected status or malformed response: the response on stderr and exit status 1.
 *
 * Built by bench/native_client.py with the machine's cc; no library beyond libc and pthreads.
 */
#define _GNU_SOURCE
#include <errno.h>
#include <netdb.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/socket.h>
#include <time.h>
#include <unistd.h>

#define BUFFER 65536

struct worker {
    int index;
    int fd;
    long count;
    long capacity;
    unsigned *latencies_us;
    char buffer[BUFFER];
    size_t filled; /* bytes in buffer not yet consumed */
    char body[BUFFER];
    size_t body_length;
};

static const char *host;
static const char *port;
static const char *create_body;
static const char *resume_body;
static double deadline;
static pthread_barrier_t ready;

static double now(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (double)t.tv_sec + (double)t.tv_nsec / 1e9;
}

static void die(const char *what, const struct worker *w) {
    fprintf(stderr, "lifecycle_client: %s\n", what);
    if (w != NULL && w->body_length > 0) {
        fprintf(stderr, "%.*s\n", (int)w->body_length, w->body);
    }
    exit(1);
}

static int connect_to(void) {
    struct addrinfo hints = {0}, *found;
    hints.ai_family = AF_UNSPEC;
    hints.ai_socktype = SOCK_STREAM;
    if (getaddrinfo(host, port, &hints, &found) != 0) die("cannot resolve the host", NULL);
    int fd = socket(found->ai_family, found->ai_socktype, found->ai_protocol);
    if (fd < 0 || connect(fd, found->ai_addr, found->ai_addrlen) != 0) die("cannot connect", NULL);
    freeaddrinfo(found);
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
    return fd;
}

static void send_all(int fd, const char *data, size_t length) {
    while (length > 0) {
        ssize_t sent = send(fd, data, length, MSG_NOSIGNAL);
        if (sent < 0 && errno == EINTR) continue;
        if (sent <= 0) die("send failed", NULL);
        data += sent;
        length -= (size_t)sent;
    }
}

/* Reads more bytes into the buffer; dies on EOF (the server closed a keep-alive connection). */
static void fill(struct worker *w) {
    if (w->filled == BUFFER) die("response header larger than the buffer", w);
    ssize_t got;
    do {
        got = recv(w->fd, w->buffer + w->filled, BUFFER - w->filled, 0);
    } while (got < 0 && errno == EINTR);
    if (got <= 0) die("connection closed by the server", w);
    w->filled += (size_t)got;
}

static void consume(struct worker *w, size_t n) {
    memmove(w->buffer, w->buffer + n, w->filled - n);
    w->filled -= n;
}

/* Appends n bytes of the buffer to the body and consumes them. */
static void take_body(struct worker *w, size_t n) {
    if (w->body_length + n >= BUFFER) die("response body larger than the buffer", w);
    memcpy(w->body + w->body_length, w->buffer, n);
    w->body_length += n;
    consume(w, n);
}

static char *find_line_end(struct worker *w) {
    return memmem(w->buffer, w->filled, "\r\n", 2);
}

/* Reads one response; returns its status code, its body in w->body (NUL-terminated). */
static int read_response(struct worker *w) {
    char *end;
    w->body_length = 0;
    while ((end = memmem(w->buffer, w->filled, "\r\n\r\n", 4)) == NULL) fill(w);
    size_t head = (size_t)(end - w->buffer) + 4;
    int status = 0;
    if (sscanf(w->buffer, "HTTP/1.%*d %d", &status) != 1) die("not an HTTP response", w);
    long content_length = -1;
    int chunked = 0;
    for (char *line = strstr(w->buffer, "\r\n") + 2; line < end; line = strstr(line, "\r\n") + 2) {
        if (strncasecmp(line, "content-length:", 15) == 0) content_length = strtol(line + 15, NULL, 10);
        if (strncasecmp(line, "transfer-encoding:", 18) == 0 && strcasestr(line, "chunked") != NULL &&
            strcasestr(line, "chunked") < strstr(line, "\r\n"))
            chunked = 1;
    }
    consume(w, head);
    if (chunked) {
        for (;;) {
            char *line_end;
            while ((line_end = find_line_end(w)) == NULL) fill(w);
            size_t size = strtoul(w->buffer, NULL, 16);
            consume(w, (size_t)(line_end - w->buffer) + 2);
            while (w->filled < size + 2) fill(w);
            take_body(w, size);
            consume(w, 2); /* the CRLF after the chunk */
            if (size == 0) break;
        }
    } else if (content_length >= 0) {
        while (w->filled < (size_t)content_length) fill(w);
        take_body(w, (size_t)content_length);
    } else {
        die("response with neither Content-Length nor chunked encoding", w);
    }
    w->body[w->body_length] = '\0';
    return status;
}

/* Copies the string value of the first "key": "..." in the body into out (JSON whitespace
   allowed around the colon; the values read here are ids and tokens, never escaped). */
static void json_string(const struct worker *w, const char *key, char *out, size_t size) {
    char pattern[64];
    snprintf(pattern, sizeof pattern, "\"%s\"", key);
    const char *start = strstr(w->body, pattern);
    if (start == NULL) die("a field is missing from the created continuation", w);
    start += strlen(pattern);
    start += strspn(start, " \t\r\n");
    if (*start++ != ':') die("a field is malformed", w);
    start += strspn(start, " \t\r\n");
    if (*start++ != '"') die("a field is not a string", w);
    const char *stop = strchr(start, '"');
    if (stop == NULL || (size_t)(stop - start) >= size) die("a field is malformed", w);
    memcpy(out, start, (size_t)(stop - start));
    out[stop - start] = '\0';
}

static void lifecycle(struct worker *w, long n) {
    static __thread char request[BUFFER];
    char id[256], token[1024];
    int length = snprintf(request, sizeof request,
                          "POST /v1/continuations HTTP/1.1\r\nHost: %s:%s\r\n"
                          "Content-Type: application/json\r\nContent-Length: %zu\r\n\r\n%s",
                          host, port, strlen(create_body), create_body);
    send_all(w->fd, request, (size_t)length);
    if (read_response(w) != 201) die("create: unexpected status", w);
    json_string(w, "continuationId", id, sizeof id);
    json_string(w, "resumeToken", token, sizeof token);
    length = snprintf(request, sizeof request,
                      "POST /v1/continuations/%s/resume HTTP/1.1\r\nHost: %s:%s\r\n"
                      "Content-Type: application/json\r\nIdempotency-Key: bench-%d-%ld\r\n"
                      "Authorization: PauseMesh %s\r\nContent-Length: %zu\r\n\r\n%s",
                      id, host, port, w->index, n, token, strlen(resume_body), resume_body);
    send_all(w->fd, request, (size_t)length);
    if (read_response(w) != 200) die("resume: unexpected status", w);
}

static void *run(void *argument) {
    struct worker *w = argument;
    w->fd = connect_to();
    pthread_barrier_wait(&ready);
    for (long n = 0; now() < deadline; n++) {
        double start = now();
        lifecycle(w, n);
        if (w->count == w->capacity) {
            w->capacity = w->capacity ? 2 * w->capacity : 4096;
            w->latencies_us = realloc(w->latencies_us, (size_t)w->capacity * sizeof *w->latencies_us);
            if (w->latencies_us == NULL) die("out of memory", NULL);
        }
        w->latencies_us[w->count++] = (unsigned)((now() - start) * 1e6);
    }
    close(w->fd);
    return NULL;
}

static double cpu_seconds(void) {
    struct rusage usage;
    getrusage(RUSAGE_SELF, &usage);
    return (double)usage.ru_utime.tv_sec + (double)usage.ru_utime.tv_usec / 1e6 +
           (double)usage.ru_stime.tv_sec + (double)usage.ru_stime.tv_usec / 1e6;
}

int main(int argc, char **argv) {
    if (argc != 7) {
        fprintf(stderr, "usage: %s HOST PORT SECONDS CONCURRENCY CREATE_BODY RESUME_BODY\n", argv[0]);
        return 2;
    }
    host = argv[1];
    port = argv[2];
    double seconds = strtod(argv[3], NULL);
    int concurrency = atoi(argv[4]);
    create_body = argv[5];
    resume_body = argv[6];
    if (seconds <= 0 || concurrency <= 0) {
        fprintf(stderr, "SECONDS and CONCURRENCY must be positive\n");
        return 2;
    }
    struct worker *workers = calloc((size_t)concurrency, sizeof *workers);
    pthread_t *threads = calloc((size_t)concurrency, sizeof *threads);
    if (workers == NULL || threads == NULL) die("out of memory", NULL);
    /* The clock starts when every connection is open: the main thread joins the barrier. */
    pthread_barrier_init(&ready, NULL, (unsigned)concurrency + 1);
    for (int i = 0; i < concurrency; i++) {
        workers[i].index = i;
        if (pthread_create(&threads[i], NULL, run, &workers[i]) != 0) die("cannot start a thread", NULL);
    }
    /* Set before the barrier releases the workers (which orders it before their reads). The
       connections are open by then, so connecting is neither timed nor counted. */
    double cpu_before = cpu_seconds();
    double started = now();
    deadline = started + seconds;
    pthread_barrier_wait(&ready);
    for (int i = 0; i < concurrency; i++) pthread_join(threads[i], NULL);
    double wall = now() - started;
    double cpu = cpu_seconds() - cpu_before;
    long count = 0;
    for (int i = 0; i < concurrency; i++) count += workers[i].count;
    printf("%ld %.6f %.6f\n", count, wall, cpu);
    for (int i = 0; i < concurrency; i++)
        for (long j = 0; j < workers[i].count; j++) printf("%u\n", workers[i].latencies_us[j]);
    return 0;
}
