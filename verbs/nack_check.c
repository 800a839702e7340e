/*
 * nack_check: rocast_nack.h's ABI end to end without a NIC (crates/ffi/tests/c_abi.rs
 * compiles and runs it). One sender and RECEIVERS receivers on an in-memory
 * broadcast medium with a fixed delay and seeded loss on every packet (data, repairs,
 * heartbeats, NACKs and STATUS alike); MESSAGES messages of 1 to 3,000 bytes (so
 * messages span packets). Every receiver must get every message exactly once, in
 * order, byte for byte; the sender must see all delivered.
 *
 * usage: nack_check MESSAGES LOSS_PER_MILLION SEED
 * Prints one line per receiver and a verdict; exit 0 only when all checks hold.
 */
#include "rocast_nack.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define RECEIVERS 3
#define MTU 1024
#define DELAY_NS 20000ull
#define STEP_NS 5000ull

struct pkt {
    struct pkt *next;
    uint64_t at;
    size_t len;
    uint8_t data[MTU];
};
/* One FIFO per endpoint: 0 the sender, 1.. the receivers (constant delay keeps order). */
struct fifo {
    struct pkt *head, *tail;
};
static struct fifo q[RECEIVERS + 1];
static uint64_t rng;
static unsigned loss_ppm;
static uint64_t dropped;

static unsigned next_rand(void)
{
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return (unsigned)(rng >> 33);
}

static void push(int to, uint64_t now, const uint8_t *b, size_t len)
{
    if (next_rand() % 1000000u < loss_ppm) {
        dropped++;
        return;
    }
    struct pkt *p = malloc(sizeof *p);
    if (!p) {
        perror("malloc");
        exit(2);
    }
    p->next = NULL;
    p->at = now + DELAY_NS;
    p->len = len;
    memcpy(p->data, b, len);
    if (q[to].tail)
        q[to].tail->next = p;
    else
        q[to].head = p;
    q[to].tail = p;
}

static struct pkt *pop_due(int at, uint64_t now)
{
    struct pkt *p = q[at].head;
    if (!p || p->at > now)
        return NULL;
    q[at].head = p->next;
    if (!q[at].head)
        q[at].tail = NULL;
    return p;
}

static size_t msg_len(uint64_t i) { return 1 + (size_t)((i * 2654435761u) % 3000); }
static uint8_t msg_byte(uint64_t i, size_t j) { return (uint8_t)(i * 131 + j * 7); }

int main(int argc, char **argv)
{
    if (argc != 4 && !(argc == 5 && !strcmp(argv[4], "keyed"))) {
        fprintf(stderr, "usage: nack_check MESSAGES LOSS_PER_MILLION SEED [keyed]\n");
        return 2;
    }
    /* keyed: every packet sealed with a group key (the *_new_keyed constructors). */
    uint8_t key[32];
    for (int i = 0; i < 32; i++)
        key[i] = (uint8_t)(0x40 + i);
    const uint8_t *k = argc == 5 ? key : NULL;
    uint32_t tag = k ? ROCAST_NM_AUTH_TAG_LEN : 0;
    uint64_t messages = strtoull(argv[1], NULL, 10);
    loss_ppm = (unsigned)strtoul(argv[2], NULL, 10);
    rng = strtoull(argv[3], NULL, 10) | 1;

    struct rocast_nm_sender_config sc;
    rocast_nm_sender_config_default(&sc, 7, MTU - ROCAST_NM_DATA_HEADER_LEN - tag);
    sc.expected_receivers = RECEIVERS;
    sc.window = 1024;
    sc.heartbeat_interval_ns = 200000;
    sc.repair_linger_ns = 100000;
    rocast_nm_sender *s = rocast_nm_sender_new_keyed(&sc, k);
    rocast_nm_receiver *r[RECEIVERS];
    for (int i = 0; i < RECEIVERS; i++) {
        struct rocast_nm_receiver_config rc;
        rocast_nm_receiver_config_default(&rc, (uint32_t)i + 1, RECEIVERS, 99 + (uint64_t)i);
        rc.nack_holdoff_ns = 200000;
        rc.status_interval_ns = 100000;
        r[i] = rocast_nm_receiver_new_keyed(&rc, k);
        if (!r[i]) {
            fprintf(stderr, "receiver config refused\n");
            return 1;
        }
    }
    if (!s || rocast_nm_sender_new(NULL) != NULL) {
        fprintf(stderr, "sender config handling wrong\n");
        return 1;
    }
    static uint8_t buf[MTU], msg[4096];
    uint64_t queued = 0, got[RECEIVERS] = {0}, bad[RECEIVERS] = {0}, lost[RECEIVERS] = {0};
    uint64_t now = 1000000, from_sender = 0;
    for (uint64_t step = 0; step < 20000000; step++, now += STEP_NS) {
        /* The application: queue while the window allows. */
        while (queued < messages) {
            size_t len = msg_len(queued);
            for (size_t j = 0; j < len; j++)
                msg[j] = msg_byte(queued, j);
            int64_t seq = rocast_nm_sender_send(s, now, msg, len);
            if (seq == ROCAST_NM_ERR_WINDOW_FULL)
                break;
            if (seq != (int64_t)queued) {
                fprintf(stderr, "send %llu returned %lld\n", (unsigned long long)queued, (long long)seq);
                return 1;
            }
            queued++;
        }
        if (rocast_nm_sender_poll_timeout(s) <= now)
            rocast_nm_sender_handle_timeout(s, now);
        int64_t n;
        while ((n = rocast_nm_sender_poll_transmit(s, now, buf, sizeof buf)) > 0)
            for (int i = 0; i < RECEIVERS; i++)
                push(i + 1, now, buf, (size_t)n);
        if (n < 0)
            return 1;
        for (int i = 0; i < RECEIVERS; i++) {
            if (rocast_nm_receiver_poll_timeout(r[i]) <= now)
                rocast_nm_receiver_handle_timeout(r[i], now);
            int32_t to_sender = 0;
            while ((n = rocast_nm_receiver_poll_transmit(r[i], now, buf, sizeof buf, &to_sender)) > 0) {
                push(0, now, buf, (size_t)n);
                if (!to_sender) /* NACKs are multicast: the other receivers hear them */
                    for (int k = 0; k < RECEIVERS; k++)
                        if (k != i)
                            push(k + 1, now, buf, (size_t)n);
            }
            struct rocast_nm_event ev;
            int64_t e;
            while ((e = rocast_nm_receiver_poll_event(r[i], &ev, msg, sizeof msg)) == 1) {
                if (ev.kind == ROCAST_NM_EVENT_UNRECOVERABLE) {
                    lost[i] += ev.len_or_end - ev.msg_seq;
                    continue;
                }
                int ok = ev.session == 7 && ev.msg_seq == got[i] && ev.len_or_end == msg_len(got[i]);
                for (size_t j = 0; ok && j < ev.len_or_end; j++)
                    ok = msg[j] == msg_byte(got[i], j);
                bad[i] += !ok;
                got[i]++;
            }
            if (e < 0)
                return 1;
        }
        struct pkt *p;
        while ((p = pop_due(0, now))) {
            rocast_nm_sender_handle_packet(s, now, p->data, p->len);
            free(p);
        }
        for (int i = 0; i < RECEIVERS; i++)
            while ((p = pop_due(i + 1, now))) {
                from_sender += rocast_nm_is_from_sender(p->data, p->len);
                rocast_nm_receiver_handle_packet(r[i], now, p->data, p->len);
                free(p);
            }
        int done = queued == messages && rocast_nm_sender_all_delivered(s);
        for (int i = 0; i < RECEIVERS; i++)
            done = done && got[i] == messages;
        if (done)
            break;
    }
    int pass = rocast_nm_sender_all_delivered(s);
    for (int i = 0; i < RECEIVERS; i++) {
        struct rocast_nm_receiver_counters c;
        rocast_nm_receiver_counters(r[i], &c);
        printf("receiver %d delivered %llu corrupt_or_out_of_order %llu unrecoverable %llu "
               "nacks_sent %llu repairs_received %llu duplicates %llu\n",
               i + 1, (unsigned long long)got[i], (unsigned long long)bad[i],
               (unsigned long long)lost[i], (unsigned long long)c.nacks_sent,
               (unsigned long long)c.repair_packets, (unsigned long long)c.duplicates);
        pass = pass && got[i] == messages && bad[i] == 0 && lost[i] == 0;
        rocast_nm_receiver_free(r[i]);
    }
    struct rocast_nm_sender_counters sc2;
    rocast_nm_sender_counters(s, &sc2);
    printf("sender messages %llu data_packets %llu repair_packets %llu nacks_in %llu "
           "receivers %llu dropped %llu from_sender %llu\n",
           (unsigned long long)sc2.messages, (unsigned long long)sc2.data_packets,
           (unsigned long long)sc2.repair_packets, (unsigned long long)sc2.nacks_in,
           (unsigned long long)sc2.receivers, (unsigned long long)dropped,
           (unsigned long long)from_sender);
    rocast_nm_sender_free(s);
    printf("result: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
