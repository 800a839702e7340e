/*
 * The framing of rocast's multicast control channel (rocast_net::mcast): frames of
 * type (1) | length (2, big-endian) | body on a TCP stream, and the big-endian helpers
 * both of rocast-verbs' programs use. Header-only.
 */
#ifndef ROCAST_PROTO_H
#define ROCAST_PROTO_H

#include <errno.h>
#include <stdint.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

static inline uint32_t be32(const uint8_t *b) { return (uint32_t)b[0] << 24 | (uint32_t)b[1] << 16 | (uint32_t)b[2] << 8 | b[3]; }
static inline uint64_t be64(const uint8_t *b) { uint64_t v = 0; for (int i = 0; i < 8; i++) v = v << 8 | b[i]; return v; }
static inline void put32(uint8_t *b, uint32_t v) { for (int i = 0; i < 4; i++) b[i] = (uint8_t)(v >> (24 - 8 * i)); }
static inline void put64(uint8_t *b, uint64_t v) { for (int i = 0; i < 8; i++) b[i] = (uint8_t)(v >> (56 - 8 * i)); }

/* The leader's control channel (TCP) and every host's MRP agent (UDP). */
#define CONTROL_PORT 4793
#define MRP_PORT 4792

/* CLOCK_MONOTONIC in ns (a member reports when it held a buffer on it). */
static inline uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A framed control connection. */
struct ctl { int fd; uint8_t in[1 << 16]; size_t have; };

static inline int ctl_send(struct ctl *c, uint8_t ty, const uint8_t *body, uint16_t len) {
    uint8_t h[3] = {ty, (uint8_t)(len >> 8), (uint8_t)len};
    if (send(c->fd, h, 3, MSG_NOSIGNAL) != 3) return -1;
    if (len && send(c->fd, body, len, MSG_NOSIGNAL) != len) return -1;
    return 0;
}

/* 1 and the frame when one is complete, 0 if not yet, -1 when the peer is gone. */
static inline int ctl_recv(struct ctl *c, uint8_t *ty, uint8_t *body, uint16_t *len) {
    ssize_t n = recv(c->fd, c->in + c->have, sizeof(c->in) - c->have, MSG_DONTWAIT);
    if (n == 0 && c->have == 0) return -1;
    if (n > 0) c->have += (size_t)n;
    if (n < 0 && errno != EAGAIN && errno != EWOULDBLOCK) return -1;
    if (c->have < 3) return 0;
    uint16_t l = (uint16_t)(c->in[1] << 8 | c->in[2]);
    if (c->have < 3u + l) return 0;
    *ty = c->in[0];
    *len = l;
    memcpy(body, c->in + 3, l);
    memmove(c->in, c->in + 3 + l, c->have - 3 - l);
    c->have -= 3u + l;
    return 1;
}

#endif
