/* The floor of a native relay: bytes pumped between each client connection and a
 * connection of its own to the upstream, nothing parsed. One thread, epoll, level-triggered.
 * What a relay in C costs per request before it does any of kcoord's work (framing, the header
 * check, the slot FIFO): bench/relay_floor.py starts it next to kcoord and the Python floor.
 * With a fourth argument ``splice`` the bytes never enter the process: each direction moves
 * through a pipe of its own with splice(2), the zero-copy floor of a relay on Linux
 * (bench/fetch_hop.py: what a large Fetch answer costs through each kind of relay).
 *
 *     cc -O2 -o relay_floor relay_floor.c && ./relay_floor LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT [splice]
 */
#define _GNU_SOURCE
#include <arpa/inet.h>
#include <errno.h>
#include <fcntl.h>
#include <netinet/in.h>
#include <netinet/tcp.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/socket.h>
#include <unistd.h>

#define MAXFD 65536
static int peer[MAXFD];
static int pipe_r[MAXFD], pipe_w[MAXFD]; /* splice mode: the pipe bytes read from fd pass through */

/* Until fd takes more (a large answer can fill a socket): blocking here stalls every other
 * connection, as any one-thread pump without buffers must, but costs no CPU while it waits. */
static void wait_writable(int fd) {
    struct pollfd p = {.fd = fd, .events = POLLOUT};
    poll(&p, 1, -1);
}

static void nodelay(int fd) {
    int one = 1;
    setsockopt(fd, IPPROTO_TCP, TCP_NODELAY, &one, sizeof one);
}

static void drop(int ep, int fd) {
    int other = peer[fd];
    epoll_ctl(ep, EPOLL_CTL_DEL, fd, NULL);
    close(fd);
    peer[fd] = -1;
    if (other >= 0) {
        epoll_ctl(ep, EPOLL_CTL_DEL, other, NULL);
        close(other);
        peer[other] = -1;
    }
    for (int i = 0; i < 2; i++) {
        int f = i ? other : fd;
        if (f >= 0 && pipe_r[f] >= 0) {
            close(pipe_r[f]);
            close(pipe_w[f]);
            pipe_r[f] = pipe_w[f] = -1;
        }
    }
}

/* Splice mode: what one read would take, moved from fd into its pipe and on to its peer. */
static int splice_once(int fd) {
    ssize_t r = splice(fd, NULL, pipe_w[fd], NULL, 1 << 20, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
    if (r < 0 && (errno == EAGAIN || errno == EINTR)) return 0;
    if (r <= 0) return -1;
    while (r > 0) {
        ssize_t w = splice(pipe_r[fd], NULL, peer[fd], NULL, (size_t)r, SPLICE_F_MOVE | SPLICE_F_NONBLOCK);
        if (w < 0) {
            if (errno == EAGAIN) wait_writable(peer[fd]);
            if (errno == EAGAIN || errno == EINTR) continue;
            return -1;
        }
        r -= w;
    }
    return 0;
}

/* Write all of buf. */
static int write_all(int fd, const char *buf, ssize_t n) {
    while (n > 0) {
        ssize_t w = write(fd, buf, (size_t)n);
        if (w < 0) {
            if (errno == EAGAIN) wait_writable(fd);
            if (errno == EAGAIN || errno == EINTR) continue;
            return -1;
        }
        buf += w;
        n -= w;
    }
    return 0;
}

int main(int argc, char **argv) {
    if (argc != 4 && !(argc == 5 && strcmp(argv[4], "splice") == 0)) {
        fprintf(stderr, "usage: %s LISTEN_PORT UPSTREAM_HOST UPSTREAM_PORT [splice]\n", argv[0]);
        return 2;
    }
    int use_splice = argc == 5;
    struct sockaddr_in up = {0};
    up.sin_family = AF_INET;
    up.sin_port = htons((unsigned short)atoi(argv[3]));
    inet_pton(AF_INET, argv[2], &up.sin_addr);

    int ls = socket(AF_INET, SOCK_STREAM, 0);
    int one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
    struct sockaddr_in addr = {0};
    addr.sin_family = AF_INET;
    addr.sin_port = htons((unsigned short)atoi(argv[1]));
    addr.sin_addr.s_addr = htonl(INADDR_LOOPBACK);
    if (bind(ls, (struct sockaddr *)&addr, sizeof addr) || listen(ls, 1024)) {
        perror("listen");
        return 1;
    }
    for (int i = 0; i < MAXFD; i++) peer[i] = pipe_r[i] = pipe_w[i] = -1;
    int ep = epoll_create1(0);
    struct epoll_event ev = {.events = EPOLLIN, .data.fd = ls};
    epoll_ctl(ep, EPOLL_CTL_ADD, ls, &ev);
    printf("serving\n");
    fflush(stdout);
    static char buf[1 << 18]; /* uvloop's read size: 256 KiB */
    struct epoll_event events[256];
    for (;;) {
        int n = epoll_wait(ep, events, 256, -1);
        for (int i = 0; i < n; i++) {
            int fd = events[i].data.fd;
            if (fd == ls) {
                int c = accept(ls, NULL, NULL);
                if (c < 0 || c >= MAXFD) continue;
                int u = socket(AF_INET, SOCK_STREAM, 0);
                if (u < 0 || u >= MAXFD || connect(u, (struct sockaddr *)&up, sizeof up)) {
                    close(c);
                    if (u >= 0) close(u);
                    continue;
                }
                nodelay(c);
                nodelay(u);
                fcntl(c, F_SETFL, O_NONBLOCK);
                fcntl(u, F_SETFL, O_NONBLOCK);
                peer[c] = u;
                peer[u] = c;
                if (use_splice) {
                    int pc[2], pu[2];
                    if (pipe2(pc, O_NONBLOCK) || pipe2(pu, O_NONBLOCK)) {
                        drop(ep, c);
                        continue;
                    }
                    fcntl(pc[1], F_SETPIPE_SZ, 1 << 20);
                    fcntl(pu[1], F_SETPIPE_SZ, 1 << 20);
                    pipe_r[c] = pc[0], pipe_w[c] = pc[1];
                    pipe_r[u] = pu[0], pipe_w[u] = pu[1];
                }
                struct epoll_event e1 = {.events = EPOLLIN, .data.fd = c};
                struct epoll_event e2 = {.events = EPOLLIN, .data.fd = u};
                epoll_ctl(ep, EPOLL_CTL_ADD, c, &e1);
                epoll_ctl(ep, EPOLL_CTL_ADD, u, &e2);
                continue;
            }
            if (peer[fd] < 0) continue;
            if (use_splice) {
                if (splice_once(fd)) drop(ep, fd);
                continue;
            }
            ssize_t r = read(fd, buf, sizeof buf);
            if (r <= 0) {
                if (r < 0 && (errno == EAGAIN || errno == EINTR)) continue;
                drop(ep, fd);
                continue;
            }
            if (write_all(peer[fd], buf, r)) drop(ep, fd);
        }
    }
}
