/*
 * hostile_app -- a program that uses cpprof in the unusual but legal ways
 * for test/http_hostile.sh:
 *
 *   hostile_app HOST:PORT   serves /debug/pprof/ with accounting on while
 *                           a thread holds one label set of 40 keys, whose
 *                           keys and values carry bytes that are not valid
 *                           UTF-8 and keys that sanitise to the same
 *                           Prometheus name; prints "serving" and runs
 *                           until killed.
 *   hostile_app --json FILE exits 0 when jansson parses FILE (jansson
 *                           refuses text that is not valid UTF-8).
 *   hostile_app --post-symbols PORT N FIRST
 *                           sends N POSTs to /debug/pprof/symbol on
 *                           127.0.0.1:PORT over one connection, each a
 *                           60 KB body holding POST_ADDRESSES addresses
 *                           no other POST asks for (request FIRST onwards),
 *                           and exits 0 when every one got a 200.
 *
 * The set is built from kv[] strings that are freed right after, so a
 * library keeping pointers into them would read freed memory (ASan,
 * valgrind).
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <cpprof.h>
#include <jansson.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

enum { KEYS = 40, POST_ADDRESSES = 200, POST_BYTES = 60000 };

/* Builds the 40-key set: k00..k35 with values "v\xffNN" (a lone byte that
 * starts no UTF-8 sequence), a key with a cut-short sequence, and three
 * keys that all sanitise to "a_b". */
static cpprof_labelset *hostile_set(void)
{
    char *kv[2 * KEYS];
    for (int i = 0; i < KEYS - 4; i++) {
        if (asprintf(&kv[2 * i], "k%02d", i) < 0 ||
            asprintf(&kv[2 * i + 1], "v\xff%02d", i) < 0)
            abort();
    }
    const char *odd[] = {"bad\xc3key", "cut\xe2\x82", "a.b", "x",
                         "a-b", "y", "a_b", "z\xed\xa0\x80"};
    for (int i = 0; i < 8; i++)
        if ((kv[2 * (KEYS - 4) + i] = strdup(odd[i])) == NULL)
            abort();
    cpprof_labelset *set;
    int rc = cpprof_labels(&set, 2 * KEYS, (const char *const *)kv);
    for (int i = 0; i < 2 * KEYS; i++) {
        memset(kv[i], 'X', strlen(kv[i]));
        free(kv[i]);
    }
    if (rc < 0) {
        fprintf(stderr, "hostile_app: %s\n", cpprof_strerror(rc));
        exit(1);
    }
    return set;
}

/* Holds the set for good, allocating now and then so that its row's
 * counters move, and otherwise asleep (the machine is shared). */
static void *holder(void *arg)
{
    cpprof_set_thread_labels(arg);
    for (;;) {
        free(malloc(4096));
        usleep(10000);
    }
    return NULL;
}

static int parse_json(const char *path)
{
    json_error_t err;
    json_t *doc = json_load_file(path, 0, &err);
    if (doc == NULL) {
        fprintf(stderr, "%s: %s\n", path, err.text);
        return 1;
    }
    json_decref(doc);
    return 0;
}

/* Request `i`'s body: POST_ADDRESSES addresses of its own (spread over
 * the address space, most mapped by nothing), padded with spaces to
 * POST_BYTES, as a client sending a large symbolization would. */
static size_t symbol_body(char *buf, unsigned long i)
{
    size_t len = 0;
    for (unsigned long a = 0; a < POST_ADDRESSES; a++)
        len += (size_t)sprintf(buf + len, "%s%#lx", a ? "+" : "",
                               0x10000ul + (i * POST_ADDRESSES + a) * 4099ul);
    memset(buf + len, ' ', POST_BYTES - len);
    return POST_BYTES;
}

/* Reads one response (headers with Content-Length, then the body) and
 * returns its status, or -1. */
static int read_response(FILE *in)
{
    char line[1024];
    int status = -1;
    long length = -1;
    if (fgets(line, sizeof line, in) == NULL ||
        sscanf(line, "HTTP/1.1 %d", &status) != 1)
        return -1;
    while (fgets(line, sizeof line, in) != NULL && strcmp(line, "\r\n") != 0)
        if (strncasecmp(line, "Content-Length:", 15) == 0)
            length = atol(line + 15);
    if (length < 0)
        return -1;
    for (; length > 0; length--)
        if (fgetc(in) == EOF)
            return -1;
    return status;
}

static int post_symbols(int port, unsigned long n, unsigned long first)
{
    struct sockaddr_in a = {.sin_family = AF_INET,
                            .sin_port = htons((in_port_t)port),
                            .sin_addr.s_addr = htonl(INADDR_LOOPBACK)};
    int fd = socket(AF_INET, SOCK_STREAM, 0);
    if (fd < 0 || connect(fd, (struct sockaddr *)&a, sizeof a) < 0) {
        perror("connect");
        return 1;
    }
    FILE *in = fdopen(dup(fd), "r");
    /* One write per request: headers and body in two would meet the
     * peer's delayed ACK (40 ms a request). */
    static char request[POST_BYTES + 256];
    for (unsigned long i = first; i < first + n; i++) {
        int hl = sprintf(request,
                         "POST /debug/pprof/symbol HTTP/1.1\r\nHost: localhost\r\n"
                         "Content-Length: %d\r\n\r\n", POST_BYTES);
        size_t len = (size_t)hl + symbol_body(request + hl, i);
        if (write(fd, request, len) != (ssize_t)len) {
            perror("write");
            return 1;
        }
        int status = read_response(in);
        if (status != 200) {
            fprintf(stderr, "POST %lu: status %d\n", i, status);
            return 1;
        }
    }
    fclose(in);
    close(fd);
    return 0;
}

int main(int argc, char **argv)
{
    if (argc == 3 && strcmp(argv[1], "--json") == 0)
        return parse_json(argv[2]);
    if (argc == 5 && strcmp(argv[1], "--post-symbols") == 0)
        return post_symbols(atoi(argv[2]), strtoul(argv[3], NULL, 10),
                            strtoul(argv[4], NULL, 10));
    if (argc != 2) {
        fprintf(stderr, "usage: hostile_app HOST:PORT | --json FILE | "
                        "--post-symbols PORT N FIRST\n");
        return 2;
    }
    int rc = cpprof_accounting_enable();
    pthread_t t;
    if (rc == 0)
        rc = -pthread_create(&t, NULL, holder, hostile_set());
    if (rc == 0)
        rc = cpprof_http_start(argv[1]);
    if (rc < 0) {
        fprintf(stderr, "hostile_app: %s\n", cpprof_strerror(rc));
        return 1;
    }
    printf("serving\n");
    fflush(stdout);
    for (;;)
        pause();
}
