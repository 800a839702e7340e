/*
 * rocast-verbs-ud: reliable multicast over RDMA UD on an unmodified RNIC or Soft-RoCE
 * (the broadcast-select paper's transport, 002 §II-A/§IV). The protocol is
 * rocast's core NACK multicast through its C ABI (rocast_nack.h): this program only
 * moves its packets, one UD SEND each, and keeps time.
 *
 *   send: joins GROUP (to hear NACKs), sends MESSAGES messages of SIZE bytes (seeded
 *         content) to the group, repairs what receivers NACK, and exits when every
 *         expected receiver has everything (its STATUS reports say so).
 *   recv: joins GROUP, NACKs gaps (to the group: others hear and suppress theirs),
 *         STATUS to the sender (unicast, to the QP its packets came from), checks each
 *         message's bytes and order, and lingers after the last one so the sender
 *         hears it is done.
 *
 * usage: rocast-verbs-ud send|recv --bind IP --group IP [--id N] [--receivers N]
 *        [--messages N] [--size BYTES] [--seed N] [--dev rxe0] [--port 1] [--gid 1]
 *        [--mtu 1024] [--qkey N] [--timeout S] [--group-key HEX64]
 *
 * Prints one summary line; a receiver's is
 *   "ud recv ID delivered N duplicates D out_of_order O corrupt C unrecoverable U crc32 X"
 * and the sender's "ud send messages N crc32 X data_packets … repair_packets … ".
 * Exit 0 when everything arrived (receiver: all N messages, in order, intact;
 * sender: all delivered), 1 otherwise, 2 on bad arguments.
 */
#include "rocast_nack.h"
#include "rocast_proto.h"
#include "rocast_verbs.h"

#include <arpa/inet.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* Protocol timing for a LAN of software RoCE hosts (TCG guests answer in about a
 * millisecond; a loaded one later): rocast's assumption, stated in the README. */
#define HEARTBEAT_NS 2000000ull
#define REPAIR_LINGER_NS 5000000ull
#define RECEIVER_TIMEOUT_NS 60000000000ull
#define NACK_BACKOFF_NS 2000000ull
#define NACK_HOLDOFF_NS 20000000ull
#define STATUS_NS 5000000ull
#define LINGER_NS 2000000000ull
#define WINDOW 256
#define RECV_SLOTS 1024
#define SEND_SLOTS 128

struct host {
    struct rv_ud ud;
    struct ibv_ah *group_ah;
    struct ibv_ah *sender_ah; /* a receiver's: the sender's QP, learnt from its packets */
    uint32_t sender_qpn;
    rocast_nm_sender *s;
    rocast_nm_receiver *r;
    uint64_t own_in, from_sender_in, ah_errors;
};

static void usage(void)
{
    fprintf(stderr, "usage: rocast-verbs-ud send|recv --bind IP --group IP [--id N] [--receivers N]"
                    " [--messages N] [--size BYTES] [--seed N] [--dev NAME] [--port N] [--gid N]"
                    " [--mtu 256|512|1024|2048|4096] [--qkey N] [--timeout S] [--group-key HEX64]\n");
}

/* Message `i`'s byte `j` under `seed` (what both sides agree on). */
static uint8_t msg_byte(uint64_t seed, uint64_t i, size_t j)
{
    uint64_t x = (seed ^ (i * 0x9e3779b97f4a7c15ull)) + j * 0xbf58476d1ce4e5b9ull;
    x ^= x >> 31;
    x *= 0x94d049bb133111ebull;
    return (uint8_t)(x >> 56);
}

static void on_recv(void *ctx, const struct ibv_wc *wc, const uint8_t *grh, const uint8_t *p, size_t len)
{
    struct host *h = ctx;
    uint64_t now = mono_ns();
    /* A host that joined its group hears its own packets back: not protocol input. */
    if (wc->src_qp == h->ud.qp->qp_num && rv_ud_grh_src(grh).s_addr == h->ud.local.s_addr) {
        h->own_in++;
        return;
    }
    /* The source goes with every payload: the state machines bind streams and
     * receivers to it (a forged packet from elsewhere is a counted drop). */
    struct in_addr src = rv_ud_grh_src(grh);
    const uint8_t *src_ip = (const uint8_t *)&src.s_addr;
    if (h->s) {
        rocast_nm_sender_handle_packet_from(h->s, now, src_ip, wc->src_qp, p, len);
        return;
    }
    if (rocast_nm_is_from_sender(p, len)) {
        h->from_sender_in++;
        if (!h->sender_ah) {
            /* Built from the GRH's IPv4 source: ibv_create_ah_from_wc refuses RoCEv2 IPv4
             * on rxe 6.1 (EINVAL, measured). */
            h->sender_ah = rv_ud_ah(&h->ud, rv_ud_grh_src(grh));
            h->sender_qpn = wc->src_qp;
            if (!h->sender_ah && h->ah_errors++ == 0)
                fprintf(stderr, "rocast-verbs-ud: address handle to the sender: %s\n", strerror(errno));
        }
    }
    rocast_nm_receiver_handle_packet_from(h->r, now, src_ip, wc->src_qp, p, len);
}

/* Sends what the state machine has queued. 0, or -errno. */
static int flush(struct host *h, uint8_t *buf, size_t cap)
{
    for (;;) {
        uint64_t now = mono_ns();
        int32_t to_sender = 0;
        int64_t n = h->s ? rocast_nm_sender_poll_transmit(h->s, now, buf, cap)
                         : rocast_nm_receiver_poll_transmit(h->r, now, buf, cap, &to_sender);
        if (n < 0)
            return -EINVAL;
        if (n == 0)
            return 0;
        int rc;
        if (to_sender) {
            if (!h->sender_ah)
                continue; /* no sender heard yet: nothing to report to */
            rc = rv_ud_send(&h->ud, h->sender_ah, h->sender_qpn, buf, (size_t)n, on_recv, h);
        } else {
            rc = rv_ud_send(&h->ud, h->group_ah, RV_MULTICAST_QPN, buf, (size_t)n, on_recv, h);
        }
        if (rc)
            return rc;
    }
}

int main(int argc, char **argv)
{
    if (argc < 2 || (strcmp(argv[1], "send") && strcmp(argv[1], "recv"))) {
        usage();
        return 2;
    }
    int sender = !strcmp(argv[1], "send");
    const char *bind_ip = NULL, *group_ip = NULL, *dev = NULL, *key_hex = NULL;
    long id = 1, receivers = 3, size = 512, port = 1, gid = 1, mtu = 1024, timeout_s = 200;
    unsigned long long messages = 100000, seed = 1, qkey = 0x11111111;
    for (int i = 2; i < argc; i += 2) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        char *end = NULL;
        if (!v) {
            usage();
            return 2;
        }
        if (!strcmp(a, "--bind")) bind_ip = v;
        else if (!strcmp(a, "--group")) group_ip = v;
        else if (!strcmp(a, "--dev")) dev = v;
        else if (!strcmp(a, "--id")) id = strtol(v, &end, 10);
        else if (!strcmp(a, "--receivers")) receivers = strtol(v, &end, 10);
        else if (!strcmp(a, "--messages")) messages = strtoull(v, &end, 10);
        else if (!strcmp(a, "--size")) size = strtol(v, &end, 10);
        else if (!strcmp(a, "--seed")) seed = strtoull(v, &end, 10);
        else if (!strcmp(a, "--port")) port = strtol(v, &end, 10);
        else if (!strcmp(a, "--gid")) gid = strtol(v, &end, 10);
        else if (!strcmp(a, "--mtu")) mtu = strtol(v, &end, 10);
        else if (!strcmp(a, "--qkey")) qkey = strtoull(v, &end, 0);
        else if (!strcmp(a, "--timeout")) timeout_s = strtol(v, &end, 10);
        else if (!strcmp(a, "--group-key")) key_hex = v;
        else {
            usage();
            return 2;
        }
        if (end && *end) {
            fprintf(stderr, "rocast-verbs-ud: %s %s: not a number\n", a, v);
            return 2;
        }
    }
    struct in_addr me, group;
    if (!bind_ip || !group_ip || !inet_aton(bind_ip, &me) || !inet_aton(group_ip, &group) ||
        (ntohl(group.s_addr) >> 28) != 0xe || !rv_mtu(mtu) || port < 1 || port > 255 || gid < 0 ||
        gid > 255 || id < 1 || receivers < 1 || receivers > 1024 || messages < 1 || size < 1 ||
        size > 1 << 20 || timeout_s < 1 || qkey > 0x7fffffffull) {
        usage();
        return 2;
    }

    /* The group key: 64 hex digits, the same at the sender and every
     * receiver. With it every packet carries HMAC-SHA256/16 (the core's, through the
     * FFI) and only sealed packets are taken. */
    uint8_t key[32];
    const uint8_t *k = NULL;
    if (key_hex) {
        for (int i = 0; i < 32; i++) {
            unsigned x;
            if (strlen(key_hex) != 64 || sscanf(key_hex + 2 * i, "%2x", &x) != 1) {
                fprintf(stderr, "rocast-verbs-ud: --group-key: expected 64 hex digits\n");
                return 2;
            }
            key[i] = (uint8_t)x;
        }
        k = key;
    }
    uint32_t tag = k ? ROCAST_NM_AUTH_TAG_LEN : 0;

    struct host h;
    memset(&h, 0, sizeof(h));
    int rc = rv_ud_open(&h.ud, dev, (uint8_t)port, (int)gid, (size_t)mtu, RECV_SLOTS, SEND_SLOTS,
                        (uint32_t)qkey, me);
    if (rc) {
        fprintf(stderr, "rocast-verbs-ud: opening the UD QP: %s\n", strerror(-rc));
        return 1;
    }
    if ((rc = rv_ud_join(&h.ud, group))) {
        fprintf(stderr, "rocast-verbs-ud: joining %s: %s\n", group_ip, strerror(-rc));
        return 1;
    }
    h.group_ah = rv_ud_ah(&h.ud, group);
    if (!h.group_ah) {
        fprintf(stderr, "rocast-verbs-ud: address handle to %s: %s\n", group_ip, strerror(errno));
        return 1;
    }
    if (sender) {
        struct rocast_nm_sender_config c;
        /* A fresh stream id per start: a restarted sender is a new
         * stream, never the old one's continuation, and an off-path host cannot guess
         * it. getrandom(2) is the OS CSPRNG. */
        uint32_t stream_id = 0;
        if ((rc = rv_random_u32(&stream_id))) {
            fprintf(stderr, "rocast-verbs-ud: getrandom: %s\n", strerror(-rc));
            return 1;
        }
        rocast_nm_sender_config_default(&c, stream_id, (uint32_t)mtu - ROCAST_NM_DATA_HEADER_LEN - tag);
        c.window = 4 * WINDOW;
        c.expected_receivers = (uint32_t)receivers;
        c.heartbeat_interval_ns = HEARTBEAT_NS;
        c.repair_linger_ns = REPAIR_LINGER_NS;
        c.receiver_timeout_ns = RECEIVER_TIMEOUT_NS;
        c.initial_receiver_window = WINDOW;
        h.s = rocast_nm_sender_new_keyed(&c, k);
    } else {
        struct rocast_nm_receiver_config c;
        rocast_nm_receiver_config_default(&c, (uint32_t)id, (uint32_t)receivers, seed ^ ((uint64_t)id << 20));
        c.window = WINDOW;
        c.nack_max_backoff_ns = NACK_BACKOFF_NS;
        c.nack_holdoff_ns = NACK_HOLDOFF_NS;
        c.status_interval_ns = STATUS_NS;
        h.r = rocast_nm_receiver_new_keyed(&c, k);
    }
    if (!h.s && !h.r) {
        fprintf(stderr, "rocast-verbs-ud: protocol configuration refused\n");
        return 1;
    }

    uint8_t *pkt = malloc((size_t)mtu), *msg = malloc((size_t)size);
    if (!pkt || !msg)
        return 1;
    uint64_t t0 = mono_ns(), deadline = t0 + (uint64_t)timeout_s * 1000000000ull;
    uint64_t staged = UINT64_MAX, queued = 0, delivered = 0, dups = 0, order = 0, corrupt = 0, lost = 0, done_at = 0;
    uint32_t crc = 0, sent_crc = 0;
    int ok = 0;
    for (;;) {
        uint64_t now = mono_ns();
        if (now >= deadline) {
            fprintf(stderr, "rocast-verbs-ud: timed out after %ld s\n", timeout_s);
            break;
        }
        if (h.s) {
            while (queued < messages) {
                /* Written once per message, not on every retry while the window is full. */
                if (staged != queued) {
                    for (long j = 0; j < size; j++)
                        msg[j] = msg_byte(seed, queued, (size_t)j);
                    staged = queued;
                }
                int64_t r = rocast_nm_sender_send(h.s, now, msg, (size_t)size);
                if (r == ROCAST_NM_ERR_WINDOW_FULL)
                    break;
                if (r < 0) {
                    fprintf(stderr, "rocast-verbs-ud: send refused (%lld)\n", (long long)r);
                    return 1;
                }
                sent_crc = rv_crc32_update(sent_crc, msg, (size_t)size);
                queued++;
            }
            if (rocast_nm_sender_poll_timeout(h.s) <= now)
                rocast_nm_sender_handle_timeout(h.s, now);
        } else if (rocast_nm_receiver_poll_timeout(h.r) <= now) {
            rocast_nm_receiver_handle_timeout(h.r, now);
        }
        if ((rc = flush(&h, pkt, (size_t)mtu))) {
            fprintf(stderr, "rocast-verbs-ud: send: %s\n", strerror(-rc));
            break;
        }
        if (h.r) {
            struct rocast_nm_event ev;
            int64_t e;
            while ((e = rocast_nm_receiver_poll_event(h.r, &ev, msg, (size_t)size)) != 0) {
                if (e == ROCAST_NM_ERR_BUFFER) {
                    /* Longer than SIZE: not this stream's message. Taken off the queue
                     * (into a buffer of its length) and counted as corrupt. */
                    uint8_t *big = malloc((size_t)ev.len_or_end);
                    if (!big || rocast_nm_receiver_poll_event(h.r, &ev, big, (size_t)ev.len_or_end) != 1) {
                        fprintf(stderr, "rocast-verbs-ud: cannot take a %llu-byte message\n",
                                (unsigned long long)ev.len_or_end);
                        free(big);
                        goto out;
                    }
                    free(big);
                    corrupt++;
                    delivered = ev.msg_seq + 1;
                    continue;
                }
                if (e < 0) {
                    fprintf(stderr, "rocast-verbs-ud: receiver event error (%lld)\n", (long long)e);
                    goto out;
                }
                if (ev.kind == ROCAST_NM_EVENT_UNRECOVERABLE) {
                    lost += ev.len_or_end - ev.msg_seq;
                    delivered = ev.len_or_end;
                    continue;
                }
                if (ev.msg_seq < delivered) {
                    dups++;
                    continue;
                }
                if (ev.msg_seq != delivered)
                    order++;
                int good = ev.len_or_end == (uint64_t)size;
                for (long j = 0; good && j < size; j++)
                    good = msg[j] == msg_byte(seed, ev.msg_seq, (size_t)j);
                corrupt += !good;
                crc = rv_crc32_update(crc, msg, (size_t)ev.len_or_end);
                delivered = ev.msg_seq + 1;
            }
            if (delivered >= messages && !done_at)
                done_at = now;
            /* Linger so the sender hears (by STATUS) that this receiver is done. */
            if (done_at && now - done_at >= LINGER_NS) {
                ok = 1;
                break;
            }
        } else if (queued == messages && rocast_nm_sender_all_delivered(h.s)) {
            ok = 1;
            break;
        }
        uint64_t next = h.s ? rocast_nm_sender_poll_timeout(h.s) : rocast_nm_receiver_poll_timeout(h.r);
        now = mono_ns();
        int wait_ms = next <= now ? 0 : (int)((next - now) / 1000000ull);
        if (wait_ms > 10)
            wait_ms = 10;
        if (rv_ud_poll(&h.ud, wait_ms, on_recv, &h) < 0) {
            fprintf(stderr, "rocast-verbs-ud: completion queue error\n");
            break;
        }
    }
out:;
    double secs = (double)(mono_ns() - t0) / 1e9;
    if (h.s) {
        struct rocast_nm_sender_counters c;
        rocast_nm_sender_counters(h.s, &c);
        printf("ud send messages %llu crc32 %08x data_packets %llu repair_packets %llu heartbeats %llu "
               "nacks_in %llu status_in %llu receivers %llu own_frames %llu seconds %.1f group_key %s: %s\n",
               (unsigned long long)queued, sent_crc, (unsigned long long)c.data_packets,
               (unsigned long long)c.repair_packets, (unsigned long long)c.heartbeats,
               (unsigned long long)c.nacks_in, (unsigned long long)c.status_in,
               (unsigned long long)c.receivers, (unsigned long long)h.own_in, secs,
               k ? "on" : "off", ok ? "ok" : "FAILED");
        ok = ok && queued == messages;
    } else {
        struct rocast_nm_receiver_counters c;
        rocast_nm_receiver_counters(h.r, &c);
        ok = ok && delivered == messages && dups == 0 && order == 0 && corrupt == 0 && lost == 0;
        printf("ud recv %ld delivered %llu duplicates %llu out_of_order %llu corrupt %llu unrecoverable %llu "
               "crc32 %08x nacks_sent %llu nacks_suppressed %llu repairs_received %llu sender_packets %llu "
               "status_sent %llu seconds %.1f group_key %s: %s\n",
               id, (unsigned long long)delivered, (unsigned long long)dups, (unsigned long long)order,
               (unsigned long long)corrupt, (unsigned long long)lost, crc, (unsigned long long)c.nacks_sent,
               (unsigned long long)c.nacks_suppressed, (unsigned long long)c.repair_packets,
               (unsigned long long)h.from_sender_in, (unsigned long long)c.status_sent, secs,
               k ? "on" : "off", ok ? "ok" : "FAILED");
    }
    fflush(stdout);
    rocast_nm_sender_free(h.s);
    rocast_nm_receiver_free(h.r);
    if (h.sender_ah)
        ibv_destroy_ah(h.sender_ah);
    ibv_destroy_ah(h.group_ah);
    rv_ud_close(&h.ud);
    free(pkt);
    free(msg);
    return ok ? 0 : 1;
}
