/*
 * rocast_nack.h: the C ABI of rocast's NACK multicast (crates/ffi, librocast_ffi.a),
 * the reliable UD multicast of the broadcast-select paper (002 §II-A, §IV), run by
 * the same sans-IO state machines as rocast's simulator and namespace lab.
 *
 * The driver owns the QP, the clock and the buffers: it hands every received UD
 * payload to *_handle_packet, calls *_handle_timeout when *_poll_timeout says, and
 * sends each packet *_poll_transmit writes as one UD SEND (a sender's packets and a
 * receiver's NACKs to the group, a receiver's STATUS to the sender). Times are
 * CLOCK_MONOTONIC nanoseconds. Negative returns are the ROCAST_NM_ERR_* codes.
 * Link with librocast_ffi.a and -lpthread -ldl -lm.
 */
#ifndef ROCAST_NACK_H
#define ROCAST_NACK_H

#include <stddef.h>
#include <stdint.h>

#define ROCAST_NM_ERR_NULL (-1)
#define ROCAST_NM_ERR_WINDOW_FULL (-2)
#define ROCAST_NM_ERR_TOO_LARGE (-3)
#define ROCAST_NM_ERR_BUFFER (-4)
#define ROCAST_NM_ERR_PANIC (-5)
#define ROCAST_NM_NEVER UINT64_MAX
#define ROCAST_NM_EVENT_MESSAGE 1
#define ROCAST_NM_EVENT_UNRECOVERABLE 2
/* The protocol's DATA header: max_payload = UD MTU - this. */
#define ROCAST_NM_DATA_HEADER_LEN 32
/* Bytes a group key's MAC adds to every packet (the *_new_keyed constructors). */
#define ROCAST_NM_AUTH_TAG_LEN 16

struct rocast_nm_sender_config {
    uint32_t session;
    uint32_t max_payload;
    uint32_t window;
    uint32_t expected_receivers;
    uint64_t heartbeat_interval_ns;
    uint64_t receiver_timeout_ns;
    uint64_t repair_linger_ns;
    uint32_t max_pending_repairs;
    uint32_t initial_receiver_window;
};

struct rocast_nm_receiver_config {
    uint32_t receiver_id;
    uint32_t window;
    uint32_t group_size;
    uint32_t max_nack_ranges;
    uint64_t nack_max_backoff_ns;
    uint64_t nack_holdoff_ns;
    uint64_t status_interval_ns;
    uint64_t seed;
};

struct rocast_nm_sender_counters {
    uint64_t messages, data_packets, repair_packets, heartbeats, nacks_in, status_in,
        malformed, receivers;
};

struct rocast_nm_receiver_counters {
    uint64_t data_packets, repair_packets, duplicates, heartbeats, messages, nacks_sent,
        nacks_suppressed, nacks_heard, status_sent, lost_messages, malformed;
};

struct rocast_nm_event {
    uint32_t kind; /* ROCAST_NM_EVENT_* */
    uint32_t session;
    uint64_t msg_seq;    /* the message, or the first unrecoverable one */
    uint64_t len_or_end; /* the message's length, or one past the last unrecoverable */
};

typedef struct RocastNmSender rocast_nm_sender;
typedef struct RocastNmReceiver rocast_nm_receiver;

void rocast_nm_sender_config_default(struct rocast_nm_sender_config *cfg, uint32_t session,
                                     uint32_t max_payload);
rocast_nm_sender *rocast_nm_sender_new(const struct rocast_nm_sender_config *cfg);
/* With a group key (32 bytes; NULL: none): every packet sealed with HMAC-SHA256/16,
 * only sealed STATUS and NACKs taken. Size max_payload for the MTU less
 * ROCAST_NM_DATA_HEADER_LEN and ROCAST_NM_AUTH_TAG_LEN. */
rocast_nm_sender *rocast_nm_sender_new_keyed(const struct rocast_nm_sender_config *cfg,
                                             const uint8_t *key);
void rocast_nm_sender_free(rocast_nm_sender *s);
/* The message's sequence number, or WINDOW_FULL (retry later) or TOO_LARGE. */
int64_t rocast_nm_sender_send(rocast_nm_sender *s, uint64_t now_ns, const uint8_t *msg, size_t len);
int64_t rocast_nm_sender_handle_packet(rocast_nm_sender *s, uint64_t now_ns, const uint8_t *buf,
                                       size_t len);
/* The same with the payload's UD source (src_ip: 4 bytes, network order, as s_addr):
 * feedback is then taken only from each receiver's own address (forged: counted). */
int64_t rocast_nm_sender_handle_packet_from(rocast_nm_sender *s, uint64_t now_ns,
                                            const uint8_t *src_ip, uint32_t src_qpn,
                                            const uint8_t *buf, size_t len);
int64_t rocast_nm_sender_handle_timeout(rocast_nm_sender *s, uint64_t now_ns);
uint64_t rocast_nm_sender_poll_timeout(const rocast_nm_sender *s);
size_t rocast_nm_sender_max_packet_len(const rocast_nm_sender *s);
/* The next packet's length (to the group), 0 if none. */
int64_t rocast_nm_sender_poll_transmit(rocast_nm_sender *s, uint64_t now_ns, uint8_t *buf, size_t cap);
int32_t rocast_nm_sender_all_delivered(const rocast_nm_sender *s);
size_t rocast_nm_sender_free_window(const rocast_nm_sender *s);
void rocast_nm_sender_counters(const rocast_nm_sender *s, struct rocast_nm_sender_counters *out);

void rocast_nm_receiver_config_default(struct rocast_nm_receiver_config *cfg, uint32_t receiver_id,
                                       uint32_t group_size, uint64_t seed);
rocast_nm_receiver *rocast_nm_receiver_new(const struct rocast_nm_receiver_config *cfg);
/* With a group key (32 bytes; NULL: none): only sealed packets taken (the others
 * counted), every NACK and STATUS sealed. */
rocast_nm_receiver *rocast_nm_receiver_new_keyed(const struct rocast_nm_receiver_config *cfg,
                                                 const uint8_t *key);
void rocast_nm_receiver_free(rocast_nm_receiver *r);
int64_t rocast_nm_receiver_handle_packet(rocast_nm_receiver *r, uint64_t now_ns, const uint8_t *buf,
                                         size_t len);
/* The same with the payload's UD source: each stream is bound to its first sender
 * packet's source, and its packets from elsewhere are counted drops. */
int64_t rocast_nm_receiver_handle_packet_from(rocast_nm_receiver *r, uint64_t now_ns,
                                              const uint8_t *src_ip, uint32_t src_qpn,
                                              const uint8_t *buf, size_t len);
int64_t rocast_nm_receiver_handle_timeout(rocast_nm_receiver *r, uint64_t now_ns);
uint64_t rocast_nm_receiver_poll_timeout(const rocast_nm_receiver *r);
size_t rocast_nm_receiver_max_packet_len(const rocast_nm_receiver *r);
/* The next packet's length, 0 if none; *to_sender: 1 STATUS (unicast), 0 NACK (group). */
int64_t rocast_nm_receiver_poll_transmit(rocast_nm_receiver *r, uint64_t now_ns, uint8_t *buf,
                                         size_t cap, int32_t *to_sender);
/* 1 and *ev (a message's bytes in buf), 0 if none, ROCAST_NM_ERR_BUFFER if the message
 * is longer than cap (it stays queued; ev->len_or_end says its length). */
int64_t rocast_nm_receiver_poll_event(rocast_nm_receiver *r, struct rocast_nm_event *ev, uint8_t *buf,
                                      size_t cap);
void rocast_nm_receiver_counters(const rocast_nm_receiver *r, struct rocast_nm_receiver_counters *out);

/* 1 if buf is a sender's packet (DATA, repair, heartbeat), 0 if a receiver's. */
int32_t rocast_nm_is_from_sender(const uint8_t *buf, size_t len);

#endif
