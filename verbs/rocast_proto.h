/*
 * rocast's group control channel (TCP) in C: the message type codes, body layouts and
 * protocol version of rocast_core::wire::group_control (whose module docs are the
 * specification), frame and message helpers, and the big-endian helpers both of
 * rocast-verbs' programs use. Header-only.
 *
 * Every #define with a number here is checked against the Rust definitions by
 * crates/core/tests/c_header.rs, which also compiles verbs/proto_check.c and has Rust
 * parse what these helpers emit (and these parsers read what Rust emits). Change a
 * layout on both sides together, and bump ROCAST_GROUP_CONTROL_VERSION.
 *
 * The C programs speak the switch path only: they never send Overlay, and a member
 * that receives one gives up, so Overlay's body layout is not spelled out here.
 */
#ifndef ROCAST_PROTO_H
#define ROCAST_PROTO_H

#include <errno.h>
#include <stddef.h>
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

/* --- The group control protocol (rocast_core::wire::group_control) --- */

/* First body byte of Params and Join; a peer with another is refused. */
#define ROCAST_GROUP_CONTROL_VERSION 3

/* Frame: type (1) | body length (2, big-endian) | body. */
#define ROCAST_FRAME_HEADER_LEN 3
/* No frame's body is longer (an Overlay of 256 ranks): a longer one is an error. */
#define ROCAST_MAX_BODY_LEN 1034

/* Message types (8 is reserved and refused). */
#define ROCAST_MSG_PARAMS 1   /* leader -> member */
#define ROCAST_MSG_JOIN 2     /* member -> leader */
#define ROCAST_MSG_CONFIRM 3  /* member -> leader */
#define ROCAST_MSG_DONE 4     /* leader -> member, WRITE groups */
#define ROCAST_MSG_RESULT 5   /* member -> leader */
#define ROCAST_MSG_OVERLAY 6  /* leader -> member */
#define ROCAST_MSG_READY 7    /* member -> leader, empty */
#define ROCAST_MSG_ANNOUNCE 9 /* leader -> member */
#define ROCAST_MSG_CLOSE 10   /* leader -> member */
#define ROCAST_MSG_EVICTED 11 /* leader -> member: another member left the group */
#define ROCAST_MSG_INVITATION 12 /* member -> leader: its invitation token, before Join */
#define ROCAST_MSG_RESUME 13  /* leader -> member: a buffer goes on through the overlay */

/* Body lengths and field offsets. */
#define ROCAST_PARAMS_LEN 18
#define ROCAST_PARAMS_VERSION 0
#define ROCAST_PARAMS_OP 1
#define ROCAST_PARAMS_CAPACITY 2
#define ROCAST_PARAMS_MESSAGE_BYTES 10
#define ROCAST_PARAMS_START_PSN 14

#define ROCAST_JOIN_LEN 21
#define ROCAST_JOIN_VERSION 0
#define ROCAST_JOIN_IP 1
#define ROCAST_JOIN_QPN 5
#define ROCAST_JOIN_VA 9
#define ROCAST_JOIN_RKEY 17

#define ROCAST_CONFIRM_LEN 12
#define ROCAST_CONFIRM_MCST_ID 0
#define ROCAST_CONFIRM_IP 4
#define ROCAST_CONFIRM_QPN 8

#define ROCAST_DONE_LEN 4
#define ROCAST_DONE_SEQ 0

/* The buffer verdict is a SHA-256 (32 bytes): a CRC-32 can be kept by injected bytes. */
#define ROCAST_SHA256_LEN 32

#define ROCAST_RESULT_LEN 41
#define ROCAST_RESULT_OK 0
#define ROCAST_RESULT_SHA256 1
#define ROCAST_RESULT_HELD_NS 33

#define ROCAST_READY_LEN 0

#define ROCAST_ANNOUNCE_LEN 44
#define ROCAST_ANNOUNCE_SEQ 0
#define ROCAST_ANNOUNCE_BYTES 4
#define ROCAST_ANNOUNCE_SHA256 12

#define ROCAST_CLOSE_LEN 1
#define ROCAST_CLOSE_OK 0

#define ROCAST_EVICTED_LEN 4
#define ROCAST_EVICTED_IP 0

#define ROCAST_INVITATION_LEN 16
#define ROCAST_INVITATION_TOKEN 0

#define ROCAST_RESUME_LEN 12
#define ROCAST_RESUME_SEQ 0
#define ROCAST_RESUME_OFFSET 4

/* The longest body a frame of type `ty` may carry; -1 for an unknown type. */
static inline int rocast_max_body_len(uint8_t ty) {
    switch (ty) {
    case ROCAST_MSG_PARAMS: return ROCAST_PARAMS_LEN;
    case ROCAST_MSG_JOIN: return ROCAST_JOIN_LEN;
    case ROCAST_MSG_CONFIRM: return ROCAST_CONFIRM_LEN;
    case ROCAST_MSG_DONE: return ROCAST_DONE_LEN;
    case ROCAST_MSG_RESULT: return ROCAST_RESULT_LEN;
    case ROCAST_MSG_OVERLAY: return ROCAST_MAX_BODY_LEN;
    case ROCAST_MSG_READY: return ROCAST_READY_LEN;
    case ROCAST_MSG_ANNOUNCE: return ROCAST_ANNOUNCE_LEN;
    case ROCAST_MSG_CLOSE: return ROCAST_CLOSE_LEN;
    case ROCAST_MSG_EVICTED: return ROCAST_EVICTED_LEN;
    case ROCAST_MSG_INVITATION: return ROCAST_INVITATION_LEN;
    case ROCAST_MSG_RESUME: return ROCAST_RESUME_LEN;
    default: return -1;
    }
}

/* Emitters: write the body into b (at least the message's _LEN bytes); return its length. */
/* start_psn: the leader's first data PSN (24 bits). */
static inline uint16_t rocast_emit_params(uint8_t *b, int write, uint64_t capacity, uint32_t message_bytes, uint32_t start_psn) {
    b[ROCAST_PARAMS_VERSION] = ROCAST_GROUP_CONTROL_VERSION;
    b[ROCAST_PARAMS_OP] = write ? 1 : 0;
    put64(b + ROCAST_PARAMS_CAPACITY, capacity);
    put32(b + ROCAST_PARAMS_MESSAGE_BYTES, message_bytes);
    put32(b + ROCAST_PARAMS_START_PSN, start_psn & 0xffffff);
    return ROCAST_PARAMS_LEN;
}
/* ip: 4 bytes in network order; qpn: 24 bits. */
static inline uint16_t rocast_emit_join(uint8_t *b, const uint8_t *ip, uint32_t qpn, uint64_t va, uint32_t rkey) {
    b[ROCAST_JOIN_VERSION] = ROCAST_GROUP_CONTROL_VERSION;
    memcpy(b + ROCAST_JOIN_IP, ip, 4);
    put32(b + ROCAST_JOIN_QPN, qpn & 0xffffff);
    put64(b + ROCAST_JOIN_VA, va);
    put32(b + ROCAST_JOIN_RKEY, rkey);
    return ROCAST_JOIN_LEN;
}
static inline uint16_t rocast_emit_confirm(uint8_t *b, const uint8_t *mcst_id, const uint8_t *ip, uint32_t qpn) {
    memcpy(b + ROCAST_CONFIRM_MCST_ID, mcst_id, 4);
    memcpy(b + ROCAST_CONFIRM_IP, ip, 4);
    put32(b + ROCAST_CONFIRM_QPN, qpn & 0xffffff);
    return ROCAST_CONFIRM_LEN;
}
static inline uint16_t rocast_emit_done(uint8_t *b, uint32_t seq) {
    put32(b + ROCAST_DONE_SEQ, seq);
    return ROCAST_DONE_LEN;
}
/* sha256: ROCAST_SHA256_LEN bytes. */
static inline uint16_t rocast_emit_result(uint8_t *b, int ok, const uint8_t *sha256, uint64_t held_ns) {
    b[ROCAST_RESULT_OK] = ok ? 1 : 0;
    memcpy(b + ROCAST_RESULT_SHA256, sha256, ROCAST_SHA256_LEN);
    put64(b + ROCAST_RESULT_HELD_NS, held_ns);
    return ROCAST_RESULT_LEN;
}
/* sha256: ROCAST_SHA256_LEN bytes. */
static inline uint16_t rocast_emit_announce(uint8_t *b, uint32_t seq, uint64_t bytes, const uint8_t *sha256) {
    put32(b + ROCAST_ANNOUNCE_SEQ, seq);
    put64(b + ROCAST_ANNOUNCE_BYTES, bytes);
    memcpy(b + ROCAST_ANNOUNCE_SHA256, sha256, ROCAST_SHA256_LEN);
    return ROCAST_ANNOUNCE_LEN;
}
static inline uint16_t rocast_emit_close(uint8_t *b, int ok) {
    b[ROCAST_CLOSE_OK] = ok ? 1 : 0;
    return ROCAST_CLOSE_LEN;
}
/* ip: 4 bytes in network order. */
static inline uint16_t rocast_emit_evicted(uint8_t *b, const uint8_t *ip) {
    memcpy(b + ROCAST_EVICTED_IP, ip, 4);
    return ROCAST_EVICTED_LEN;
}

/* Parsers: 0 when the body is a well-formed message, -1 when it is not (wrong length,
 * a flag other than 0/1, a QPN over 24 bits), -2 for a handshake message of another
 * protocol version (checked first: another version may have another length). */
#define ROCAST_PARSE_MALFORMED (-1)
#define ROCAST_PARSE_VERSION (-2)
static inline int rocast_flag(uint8_t v, int *out) {
    if (v > 1) return ROCAST_PARSE_MALFORMED;
    *out = v;
    return 0;
}
static inline int rocast_parse_params(const uint8_t *b, uint16_t len, int *write, uint64_t *capacity, uint32_t *message_bytes, uint32_t *start_psn) {
    if (len < 1) return ROCAST_PARSE_MALFORMED;
    if (b[ROCAST_PARAMS_VERSION] != ROCAST_GROUP_CONTROL_VERSION) return ROCAST_PARSE_VERSION;
    if (len != ROCAST_PARAMS_LEN || rocast_flag(b[ROCAST_PARAMS_OP], write)) return ROCAST_PARSE_MALFORMED;
    if (be32(b + ROCAST_PARAMS_START_PSN) > 0xffffff) return ROCAST_PARSE_MALFORMED;
    *capacity = be64(b + ROCAST_PARAMS_CAPACITY);
    *message_bytes = be32(b + ROCAST_PARAMS_MESSAGE_BYTES);
    *start_psn = be32(b + ROCAST_PARAMS_START_PSN);
    return 0;
}
/* ip: receives 4 bytes in network order. */
static inline int rocast_parse_join(const uint8_t *b, uint16_t len, uint8_t *ip, uint32_t *qpn, uint64_t *va, uint32_t *rkey) {
    if (len < 1) return ROCAST_PARSE_MALFORMED;
    if (b[ROCAST_JOIN_VERSION] != ROCAST_GROUP_CONTROL_VERSION) return ROCAST_PARSE_VERSION;
    if (len != ROCAST_JOIN_LEN || be32(b + ROCAST_JOIN_QPN) > 0xffffff) return ROCAST_PARSE_MALFORMED;
    memcpy(ip, b + ROCAST_JOIN_IP, 4);
    *qpn = be32(b + ROCAST_JOIN_QPN);
    *va = be64(b + ROCAST_JOIN_VA);
    *rkey = be32(b + ROCAST_JOIN_RKEY);
    return 0;
}
static inline int rocast_parse_confirm(const uint8_t *b, uint16_t len, uint8_t *mcst_id, uint8_t *ip, uint32_t *qpn) {
    if (len != ROCAST_CONFIRM_LEN || be32(b + ROCAST_CONFIRM_QPN) > 0xffffff) return ROCAST_PARSE_MALFORMED;
    memcpy(mcst_id, b + ROCAST_CONFIRM_MCST_ID, 4);
    memcpy(ip, b + ROCAST_CONFIRM_IP, 4);
    *qpn = be32(b + ROCAST_CONFIRM_QPN);
    return 0;
}
static inline int rocast_parse_done(const uint8_t *b, uint16_t len, uint32_t *seq) {
    if (len != ROCAST_DONE_LEN) return ROCAST_PARSE_MALFORMED;
    *seq = be32(b + ROCAST_DONE_SEQ);
    return 0;
}
/* sha256: receives ROCAST_SHA256_LEN bytes. */
static inline int rocast_parse_result(const uint8_t *b, uint16_t len, int *ok, uint8_t *sha256, uint64_t *held_ns) {
    if (len != ROCAST_RESULT_LEN || rocast_flag(b[ROCAST_RESULT_OK], ok)) return ROCAST_PARSE_MALFORMED;
    memcpy(sha256, b + ROCAST_RESULT_SHA256, ROCAST_SHA256_LEN);
    *held_ns = be64(b + ROCAST_RESULT_HELD_NS);
    return 0;
}
/* sha256: receives ROCAST_SHA256_LEN bytes. */
static inline int rocast_parse_announce(const uint8_t *b, uint16_t len, uint32_t *seq, uint64_t *bytes, uint8_t *sha256) {
    if (len != ROCAST_ANNOUNCE_LEN) return ROCAST_PARSE_MALFORMED;
    *seq = be32(b + ROCAST_ANNOUNCE_SEQ);
    *bytes = be64(b + ROCAST_ANNOUNCE_BYTES);
    memcpy(sha256, b + ROCAST_ANNOUNCE_SHA256, ROCAST_SHA256_LEN);
    return 0;
}
static inline int rocast_parse_close(const uint8_t *b, uint16_t len, int *ok) {
    if (len != ROCAST_CLOSE_LEN) return ROCAST_PARSE_MALFORMED;
    return rocast_flag(b[ROCAST_CLOSE_OK], ok);
}
static inline int rocast_parse_resume(const uint8_t *b, uint16_t len, uint32_t *seq, uint64_t *offset) {
    if (len != ROCAST_RESUME_LEN) return ROCAST_PARSE_MALFORMED;
    *seq = be32(b + ROCAST_RESUME_SEQ);
    *offset = be64(b + ROCAST_RESUME_OFFSET);
    return 0;
}
/* token: receives ROCAST_INVITATION_LEN bytes. */
static inline int rocast_parse_invitation(const uint8_t *b, uint16_t len, uint8_t *token) {
    if (len != ROCAST_INVITATION_LEN) return ROCAST_PARSE_MALFORMED;
    memcpy(token, b + ROCAST_INVITATION_TOKEN, ROCAST_INVITATION_LEN);
    return 0;
}
/* ip: receives 4 bytes in network order. */
static inline int rocast_parse_evicted(const uint8_t *b, uint16_t len, uint8_t *ip) {
    if (len != ROCAST_EVICTED_LEN) return ROCAST_PARSE_MALFORMED;
    memcpy(ip, b + ROCAST_EVICTED_IP, 4);
    return 0;
}

/* SHA-256 (FIPS 180-4) of p[0..n] into out: the group's buffer verdict, written out here
 * so the guests need no crypto library. crates/core/tests/c_header.rs checks it against
 * Rust's sha2 through proto_check's `sha256` mode. */
static const uint32_t rocast_sha256_k[64] = {
    0x428a2f98, 0x71374491, 0xb5c0fbcf, 0xe9b5dba5, 0x3956c25b, 0x59f111f1, 0x923f82a4, 0xab1c5ed5,
    0xd807aa98, 0x12835b01, 0x243185be, 0x550c7dc3, 0x72be5d74, 0x80deb1fe, 0x9bdc06a7, 0xc19bf174,
    0xe49b69c1, 0xefbe4786, 0x0fc19dc6, 0x240ca1cc, 0x2de92c6f, 0x4a7484aa, 0x5cb0a9dc, 0x76f988da,
    0x983e5152, 0xa831c66d, 0xb00327c8, 0xbf597fc7, 0xc6e00bf3, 0xd5a79147, 0x06ca6351, 0x14292967,
    0x27b70a85, 0x2e1b2138, 0x4d2c6dfc, 0x53380d13, 0x650a7354, 0x766a0abb, 0x81c2c92e, 0x92722c85,
    0xa2bfe8a1, 0xa81a664b, 0xc24b8b70, 0xc76c51a3, 0xd192e819, 0xd6990624, 0xf40e3585, 0x106aa070,
    0x19a4c116, 0x1e376c08, 0x2748774c, 0x34b0bcb5, 0x391c0cb3, 0x4ed8aa4a, 0x5b9cca4f, 0x682e6ff3,
    0x748f82ee, 0x78a5636f, 0x84c87814, 0x8cc70208, 0x90befffa, 0xa4506ceb, 0xbef9a3f7, 0xc67178f2};

static inline uint32_t rocast_ror(uint32_t x, int n) { return x >> n | x << (32 - n); }

static inline void rocast_sha256_block(uint32_t h[8], const uint8_t *p)
{
    uint32_t w[64];
    for (int i = 0; i < 16; i++)
        w[i] = (uint32_t)p[4 * i] << 24 | (uint32_t)p[4 * i + 1] << 16 | (uint32_t)p[4 * i + 2] << 8 | p[4 * i + 3];
    for (int i = 16; i < 64; i++) {
        uint32_t s0 = rocast_ror(w[i - 15], 7) ^ rocast_ror(w[i - 15], 18) ^ (w[i - 15] >> 3);
        uint32_t s1 = rocast_ror(w[i - 2], 17) ^ rocast_ror(w[i - 2], 19) ^ (w[i - 2] >> 10);
        w[i] = w[i - 16] + s0 + w[i - 7] + s1;
    }
    uint32_t a = h[0], b = h[1], c = h[2], d = h[3], e = h[4], f = h[5], g = h[6], k = h[7];
    for (int i = 0; i < 64; i++) {
        uint32_t t1 = k + (rocast_ror(e, 6) ^ rocast_ror(e, 11) ^ rocast_ror(e, 25)) + ((e & f) ^ (~e & g)) + rocast_sha256_k[i] + w[i];
        uint32_t t2 = (rocast_ror(a, 2) ^ rocast_ror(a, 13) ^ rocast_ror(a, 22)) + ((a & b) ^ (a & c) ^ (b & c));
        k = g; g = f; f = e; e = d + t1; d = c; c = b; b = a; a = t1 + t2;
    }
    h[0] += a; h[1] += b; h[2] += c; h[3] += d; h[4] += e; h[5] += f; h[6] += g; h[7] += k;
}

static inline void rocast_sha256(const uint8_t *p, size_t n, uint8_t out[ROCAST_SHA256_LEN])
{
    uint32_t h[8] = {0x6a09e667, 0xbb67ae85, 0x3c6ef372, 0xa54ff53a,
                     0x510e527f, 0x9b05688c, 0x1f83d9ab, 0x5be0cd19};
    size_t i = 0;
    for (; n - i >= 64; i += 64)
        rocast_sha256_block(h, p + i);
    uint8_t tail[128] = {0};
    size_t rest = n - i, len = rest + 9 <= 64 ? 64 : 128;
    memcpy(tail, p + i, rest);
    tail[rest] = 0x80;
    uint64_t bits = (uint64_t)n * 8;
    for (int k = 0; k < 8; k++)
        tail[len - 1 - k] = (uint8_t)(bits >> (8 * k));
    for (size_t k = 0; k < len; k += 64)
        rocast_sha256_block(h, tail + k);
    for (int k = 0; k < 8; k++)
        for (int j = 0; j < 4; j++)
            out[4 * k + j] = (uint8_t)(h[k] >> (24 - 8 * j));
}

/* The frame header of a body of `len` bytes into h[0..ROCAST_FRAME_HEADER_LEN]. */
static inline void rocast_frame_header(uint8_t *h, uint8_t ty, uint16_t len) {
    h[0] = ty;
    h[1] = (uint8_t)(len >> 8);
    h[2] = (uint8_t)len;
}

/* CLOCK_MONOTONIC in ns (a member reports when it held a buffer on it). */
static inline uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

/* A framed control connection. Frames are at most ROCAST_FRAME_HEADER_LEN +
 * ROCAST_MAX_BODY_LEN bytes, so a whole one always fits `in`. */
struct ctl { int fd; uint8_t in[1 << 16]; size_t have; };

static inline int ctl_send(struct ctl *c, uint8_t ty, const uint8_t *body, uint16_t len) {
    uint8_t h[ROCAST_FRAME_HEADER_LEN];
    rocast_frame_header(h, ty, len);
    if (send(c->fd, h, sizeof(h), MSG_NOSIGNAL) != (ssize_t)sizeof(h)) return -1;
    if (len && send(c->fd, body, len, MSG_NOSIGNAL) != len) return -1;
    return 0;
}

/* 1 and the frame when one is complete, 0 if not yet, -1 when the peer is gone (EOF,
 * a frame cut off by EOF included) or sent a frame of an unknown type or a body longer
 * than its type carries (the stream has lost its framing then). `body` must hold
 * ROCAST_MAX_BODY_LEN bytes. A frame is at most ROCAST_FRAME_HEADER_LEN +
 * ROCAST_MAX_BODY_LEN bytes, far below `in`'s size, so a legal frame always fits. */
static inline int ctl_recv(struct ctl *c, uint8_t *ty, uint8_t *body, uint16_t *len) {
    int eof = 0;
    if (c->have < sizeof(c->in)) {
        ssize_t n = recv(c->fd, c->in + c->have, sizeof(c->in) - c->have, MSG_DONTWAIT);
        if (n == 0) eof = 1;
        else if (n > 0) c->have += (size_t)n;
        else if (errno != EAGAIN && errno != EWOULDBLOCK && errno != EINTR) return -1;
    }
    if (c->have >= ROCAST_FRAME_HEADER_LEN) {
        uint16_t l = (uint16_t)(c->in[1] << 8 | c->in[2]);
        int max = rocast_max_body_len(c->in[0]);
        if (max < 0 || l > max) return -1;
        if (c->have >= ROCAST_FRAME_HEADER_LEN + (size_t)l) {
            *ty = c->in[0];
            *len = l;
            memcpy(body, c->in + ROCAST_FRAME_HEADER_LEN, l);
            memmove(c->in, c->in + ROCAST_FRAME_HEADER_LEN + l, c->have - ROCAST_FRAME_HEADER_LEN - l);
            c->have -= ROCAST_FRAME_HEADER_LEN + (size_t)l;
            return 1;
        }
    }
    /* Nothing complete: at EOF the rest can never arrive. */
    return eof ? -1 : 0;
}

_Static_assert(ROCAST_FRAME_HEADER_LEN + ROCAST_MAX_BODY_LEN <= sizeof(((struct ctl *)0)->in),
               "a legal frame must fit the receive buffer");

#endif
