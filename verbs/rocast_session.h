/*
 * rocast_session.h: the C ABI of rocast's group session (crates/ffi, librocast_ffi.a):
 * the leader's and a member's control lifecycle -- discovery, MRP registration and
 * its refreshes (Cepheus §III-C), per-buffer announcements and verdicts, evictions,
 * the close -- run by the same sans-IO state machines as `rocast mcast`.
 *
 * The driver owns the sockets, the QP and the clock: it hands every input to a
 * rocast_gs_*_handle_* call, sends what *_poll_transmit writes where `dest` says (a
 * member's TCP connection, the leader's, or one UDP datagram to the McstID's MRP
 * port 4792), acts on each *_poll_event, and calls *_handle_timeout when
 * *_poll_timeout says. Times are CLOCK_MONOTONIC nanoseconds; addresses are 4 bytes
 * in network order. Negative returns are the ROCAST_GS_ERR_* codes.
 * Link with librocast_ffi.a and -lpthread -ldl -lm.
 */
#ifndef ROCAST_SESSION_H
#define ROCAST_SESSION_H

#include <stddef.h>
#include <stdint.h>

#define ROCAST_GS_ERR_NULL (-1)
#define ROCAST_GS_ERR_CONFIG (-2)
#define ROCAST_GS_ERR_STATE (-3)
#define ROCAST_GS_ERR_BUFFER (-4)
#define ROCAST_GS_ERR_PANIC (-5)
#define ROCAST_GS_NEVER UINT64_MAX
/* The output buffer every *_poll_transmit needs at least. */
#define ROCAST_GS_MAX_TRANSMIT 1500
#define ROCAST_GS_TEXT_LEN 256

#define ROCAST_GS_DEST_MEMBER 1
#define ROCAST_GS_DEST_LEADER 2
#define ROCAST_GS_DEST_MRP 3

/* Leader events. */
#define ROCAST_GS_REGISTERED 1      /* bytes: ns the registration took */
#define ROCAST_GS_USE_OVERLAY 2     /* text: why (the C programs run no overlay) */
#define ROCAST_GS_UP 3              /* ready for rocast_gs_leader_start_buffer */
#define ROCAST_GS_MEMBER_EVICTED 4  /* ip, text */
#define ROCAST_GS_REROUTE 5         /* seq (safeguard; not configured from C) */
#define ROCAST_GS_RESUME_TRANSFER 6 /* seq, offset */
#define ROCAST_GS_TRANSFER 7        /* seq: every member is ready, send it */
#define ROCAST_GS_BUFFER_DONE 8     /* seq, ok, members_ok, members */
#define ROCAST_GS_CLOSED 9          /* ok: the outcome every member was told */
#define ROCAST_GS_FAILED 10         /* text */
/* Member events (and CLOSED, FAILED, USE_OVERLAY above). */
#define ROCAST_GS_OPEN_QP 20        /* write, bytes (capacity), message_bytes, start_psn */
#define ROCAST_GS_POST_RECEIVES 21  /* seq, bytes, sha256 */
#define ROCAST_GS_RESUME_RECEIVE 22 /* seq, offset, bytes */
#define ROCAST_GS_WRITE_DONE 23     /* seq: the region holds the buffer */
#define ROCAST_GS_RECEIVED 24       /* seq, ok, sha256: the verdict went to the leader */
#define ROCAST_GS_PEER_EVICTED 25   /* ip */

struct rocast_gs_leader_config {
    uint8_t local[4];
    uint32_t local_qpn;
    uint8_t mcst_id[4];
    uint8_t group_space[4]; /* the block McstIDs come from */
    uint8_t group_space_prefix;
    uint8_t write; /* 1: RDMA WRITE; 0: SEND */
    uint32_t members;
    uint64_t capacity;
    uint32_t message_bytes;
    uint32_t start_psn;
    uint64_t timeout_ns; /* discovery, members' Ready, verdicts */
    uint64_t registration_timeout_ns;
    uint32_t registration_retries;
    uint64_t refresh_ns; /* 0: never */
};

struct rocast_gs_member_config {
    uint8_t local[4];
    uint8_t mcst_id[4];
    uint8_t group_space[4];
    uint8_t group_space_prefix;
    uint8_t has_invitation;
    uint8_t invitation[16];
    uint64_t max_capacity;
    uint64_t timeout_ns;
};

struct rocast_gs_event {
    uint32_t kind;
    uint32_t seq;
    uint8_t ok;
    uint8_t write;
    uint8_t ip[4];
    uint32_t members_ok;
    uint32_t members;
    uint64_t bytes;
    uint64_t offset;
    uint32_t message_bytes;
    uint32_t start_psn;
    uint8_t sha256[32];
    char text[ROCAST_GS_TEXT_LEN];
};

struct rocast_gs_leader;
struct rocast_gs_member;

void rocast_gs_leader_config_default(struct rocast_gs_leader_config *cfg);
struct rocast_gs_leader *rocast_gs_leader_new(const struct rocast_gs_leader_config *cfg, uint64_t now_ns);
void rocast_gs_leader_free(struct rocast_gs_leader *l);
int64_t rocast_gs_leader_handle_connected(struct rocast_gs_leader *l, uint64_t now_ns, uint32_t conn, const uint8_t *peer);
int64_t rocast_gs_leader_handle_stream(struct rocast_gs_leader *l, uint64_t now_ns, uint32_t conn, const uint8_t *data,
                                       size_t len);
int64_t rocast_gs_leader_handle_conn_error(struct rocast_gs_leader *l, uint64_t now_ns, uint32_t conn);
int64_t rocast_gs_leader_handle_mrp(struct rocast_gs_leader *l, uint64_t now_ns, const uint8_t *data, size_t len);
int64_t rocast_gs_leader_start_buffer(struct rocast_gs_leader *l, uint64_t now_ns, uint64_t bytes, const uint8_t *sha256);
int64_t rocast_gs_leader_handle_acked(struct rocast_gs_leader *l, uint64_t now_ns, uint64_t bytes);
int64_t rocast_gs_leader_handle_transfer_done(struct rocast_gs_leader *l, uint64_t now_ns, uint32_t ok, const char *why);
int64_t rocast_gs_leader_close(struct rocast_gs_leader *l, uint64_t now_ns, uint32_t ok);
uint64_t rocast_gs_leader_poll_timeout(const struct rocast_gs_leader *l);
void rocast_gs_leader_handle_timeout(struct rocast_gs_leader *l, uint64_t now_ns);
int64_t rocast_gs_leader_poll_transmit(struct rocast_gs_leader *l, uint64_t now_ns, uint8_t *buf, size_t cap,
                                       uint32_t *dest, uint32_t *conn);
int64_t rocast_gs_leader_poll_event(struct rocast_gs_leader *l, struct rocast_gs_event *ev);

void rocast_gs_member_config_default(struct rocast_gs_member_config *cfg);
struct rocast_gs_member *rocast_gs_member_new(const struct rocast_gs_member_config *cfg, uint64_t now_ns);
void rocast_gs_member_free(struct rocast_gs_member *m);
int64_t rocast_gs_member_handle_stream(struct rocast_gs_member *m, uint64_t now_ns, const uint8_t *data, size_t len);
int64_t rocast_gs_member_handle_conn_error(struct rocast_gs_member *m, uint64_t now_ns);
int64_t rocast_gs_member_handle_mrp(struct rocast_gs_member *m, uint64_t now_ns, const uint8_t *data, size_t len,
                                    const uint8_t *from, const uint8_t *leader);
int64_t rocast_gs_member_handle_qp_ready(struct rocast_gs_member *m, uint64_t now_ns, uint32_t qpn, uint64_t va,
                                         uint32_t rkey);
int64_t rocast_gs_member_handle_receives_posted(struct rocast_gs_member *m, uint64_t now_ns);
int64_t rocast_gs_member_handle_received(struct rocast_gs_member *m, uint64_t now_ns, const uint8_t *sha256,
                                         uint64_t held_ns);
uint64_t rocast_gs_member_poll_timeout(const struct rocast_gs_member *m);
void rocast_gs_member_handle_timeout(struct rocast_gs_member *m, uint64_t now_ns);
int64_t rocast_gs_member_poll_transmit(struct rocast_gs_member *m, uint64_t now_ns, uint8_t *buf, size_t cap);
int64_t rocast_gs_member_poll_event(struct rocast_gs_member *m, struct rocast_gs_event *ev);

/* SHA-256 of len bytes into out[32] (rocast_core::payload::sha256). */
int64_t rocast_gs_sha256(const uint8_t *data, size_t len, uint8_t *out);

/* The group space rocast uses when none is given (rocast_net::lab::default_group_space):
 * the upper half of the bind address's /24, x.y.z.128/25; a McstID outside it is its
 * own /32 block. */
static inline void rocast_gs_default_group_space(const uint8_t bind[4], const uint8_t mcst[4], uint8_t space[4],
                                                 uint8_t *prefix) {
    if (mcst[0] == bind[0] && mcst[1] == bind[1] && mcst[2] == bind[2] && mcst[3] >= 128) {
        space[0] = bind[0]; space[1] = bind[1]; space[2] = bind[2]; space[3] = 128;
        *prefix = 25;
    } else {
        space[0] = mcst[0]; space[1] = mcst[1]; space[2] = mcst[2]; space[3] = mcst[3];
        *prefix = 32;
    }
}

#endif
