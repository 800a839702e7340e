/*
 * session_check: one leader and three members of rocast's group session, driven
 * through its C ABI (rocast_session.h, librocast_ffi.a) in one process, with an
 * in-memory "network": each leader-member control connection is a pair of byte
 * queues, and the MRP the leader sends to the McstID reaches every member from the
 * leader's address, as the switch delivers it. The data path is simulated: after
 * TRANSFER each member holds a copy of the buffer (WRITE: the leader's DONE tells it).
 *
 * usage: session_check ok|corrupt|evict
 *   ok:      three buffers, every member intact, closed ok
 *   corrupt: member 2's copy of buffer 2 is damaged: that buffer fails, the close says so
 *   evict:   member 3's connection breaks once the group is up: it is evicted, the
 *            others hear of it and get every buffer
 * Prints one line per event and "sizes E L M" (the ABI structs' sizes), and exits 0
 * when the run ended as the scenario says.
 */
#include "rocast_session.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define N 3
#define BUF (64 * 1024)
#define BUFFERS 3

static uint64_t now_ns = 1000000;

struct member_state {
    struct rocast_gs_member *s;
    uint8_t ip[4];
    uint8_t data[BUF];
    uint8_t want[32];
    uint64_t bytes;
    int connected, closed, closed_ok, received, failed;
};

int main(int argc, char **argv) {
    const char *mode = argc > 1 ? argv[1] : "ok";
    int corrupt = !strcmp(mode, "corrupt"), evict = !strcmp(mode, "evict");
    printf("sizes %zu %zu %zu\n", sizeof(struct rocast_gs_event), sizeof(struct rocast_gs_leader_config),
           sizeof(struct rocast_gs_member_config));

    uint8_t leader_ip[4] = {10, 77, 0, 1}, mcst[4] = {10, 77, 0, 200}, space[4] = {10, 77, 0, 128};
    struct rocast_gs_leader_config lc;
    rocast_gs_leader_config_default(&lc);
    memcpy(lc.local, leader_ip, 4);
    lc.local_qpn = 0xabcdef;
    memcpy(lc.mcst_id, mcst, 4);
    memcpy(lc.group_space, space, 4);
    lc.group_space_prefix = 25;
    lc.write = 1;
    lc.members = N;
    lc.capacity = BUF;
    lc.message_bytes = 4096;
    lc.start_psn = 0x123456;
    struct rocast_gs_leader *l = rocast_gs_leader_new(&lc, now_ns);
    if (!l) { printf("leader_new failed\n"); return 1; }

    static struct member_state m[N];
    for (int i = 0; i < N; i++) {
        struct rocast_gs_member_config mc;
        rocast_gs_member_config_default(&mc);
        uint8_t ip[4] = {10, 77, 0, (uint8_t)(2 + i)};
        memcpy(m[i].ip, ip, 4);
        memcpy(mc.local, ip, 4);
        memcpy(mc.mcst_id, mcst, 4);
        memcpy(mc.group_space, space, 4);
        mc.group_space_prefix = 25;
        m[i].s = rocast_gs_member_new(&mc, now_ns);
        if (!m[i].s) { printf("member_new failed\n"); return 1; }
        rocast_gs_leader_handle_connected(l, now_ns, (uint32_t)i, ip);
        m[i].connected = 1;
    }
    /* The leader's buffer: seeded bytes. */
    static uint8_t buf[BUF];
    for (int k = 0; k < BUF; k++) buf[k] = (uint8_t)(k * 131 + 7);
    uint8_t digest[32];
    rocast_gs_sha256(buf, BUF, digest);

    uint8_t out[ROCAST_GS_MAX_TRANSMIT];
    struct rocast_gs_event ev;
    int buffers_done = 0, buffers_ok = 0, leader_closed = -1, evicted = 0, up = 0, seq_sent = 0;
    for (int round = 0; round < 100000 && leader_closed < 0; round++) {
        now_ns += 10000;
        int busy = 0;
        uint32_t dest, conn;
        int64_t n;
        while ((n = rocast_gs_leader_poll_transmit(l, now_ns, out, sizeof(out), &dest, &conn)) > 0) {
            busy = 1;
            if (dest == ROCAST_GS_DEST_MEMBER && conn < N && m[conn].connected)
                rocast_gs_member_handle_stream(m[conn].s, now_ns, out, (size_t)n);
            else if (dest == ROCAST_GS_DEST_MRP)
                for (int i = 0; i < N; i++)
                    if (m[i].connected) rocast_gs_member_handle_mrp(m[i].s, now_ns, out, (size_t)n, leader_ip, leader_ip);
        }
        if (n < 0) { printf("leader poll_transmit: %lld\n", (long long)n); return 1; }
        for (int i = 0; i < N; i++) {
            if (!m[i].connected) continue;
            while ((n = rocast_gs_member_poll_transmit(m[i].s, now_ns, out, sizeof(out))) > 0) {
                busy = 1;
                rocast_gs_leader_handle_stream(l, now_ns, (uint32_t)i, out, (size_t)n);
            }
            while (rocast_gs_member_poll_event(m[i].s, &ev) == 1) {
                busy = 1;
                switch (ev.kind) {
                case ROCAST_GS_OPEN_QP:
                    printf("member %d open_qp write %u capacity %llu message %u psn %#x\n", i + 1, ev.write,
                           (unsigned long long)ev.bytes, ev.message_bytes, ev.start_psn);
                    rocast_gs_member_handle_qp_ready(m[i].s, now_ns, 0x100u + (uint32_t)i, 0x1000, 0x77);
                    break;
                case ROCAST_GS_POST_RECEIVES:
                    memcpy(m[i].want, ev.sha256, 32);
                    m[i].bytes = ev.bytes;
                    rocast_gs_member_handle_receives_posted(m[i].s, now_ns);
                    break;
                case ROCAST_GS_WRITE_DONE: {
                    uint8_t h[32];
                    if (corrupt && i == 1 && ev.seq == 2) m[i].data[100] ^= 1;
                    rocast_gs_sha256(m[i].data, (size_t)m[i].bytes, h);
                    rocast_gs_member_handle_received(m[i].s, now_ns, h, now_ns);
                    break;
                }
                case ROCAST_GS_RECEIVED:
                    printf("member %d received %u %s\n", i + 1, ev.seq, ev.ok ? "ok" : "FAILED");
                    m[i].received++;
                    break;
                case ROCAST_GS_PEER_EVICTED:
                    printf("member %d heard %u.%u.%u.%u evicted\n", i + 1, ev.ip[0], ev.ip[1], ev.ip[2], ev.ip[3]);
                    break;
                case ROCAST_GS_CLOSED:
                    printf("member %d closed %s\n", i + 1, ev.ok ? "ok" : "FAILED");
                    m[i].closed = 1;
                    m[i].closed_ok = ev.ok;
                    break;
                case ROCAST_GS_FAILED:
                    printf("member %d failed: %s\n", i + 1, ev.text);
                    m[i].failed = 1;
                    break;
                default:
                    printf("member %d event %u\n", i + 1, ev.kind);
                }
            }
        }
        while (rocast_gs_leader_poll_event(l, &ev) == 1) {
            busy = 1;
            switch (ev.kind) {
            case ROCAST_GS_REGISTERED:
                printf("registered\n");
                break;
            case ROCAST_GS_UP:
                if (!up && evict) {
                    /* Member 3's connection breaks once the group is up. */
                    m[2].connected = 0;
                    rocast_gs_leader_handle_conn_error(l, now_ns, 2);
                }
                up = 1;
                if (seq_sent < BUFFERS) {
                    int64_t s = rocast_gs_leader_start_buffer(l, now_ns, BUF, digest);
                    if (s < 0) { printf("start_buffer: %lld\n", (long long)s); return 1; }
                    seq_sent++;
                } else {
                    printf("close -> %lld\n", (long long)rocast_gs_leader_close(l, now_ns, 1));
                }
                break;
            case ROCAST_GS_TRANSFER:
                /* The data path: every member still connected holds the bytes. */
                for (int i = 0; i < N; i++)
                    if (m[i].connected) memcpy(m[i].data, buf, BUF);
                rocast_gs_leader_handle_acked(l, now_ns, BUF);
                rocast_gs_leader_handle_transfer_done(l, now_ns, 1, NULL);
                break;
            case ROCAST_GS_BUFFER_DONE:
                printf("buffer %u %s: %u of %u members ok\n", ev.seq, ev.ok ? "ok" : "FAILED", ev.members_ok,
                       ev.members);
                buffers_done++;
                buffers_ok += ev.ok;
                break;
            case ROCAST_GS_MEMBER_EVICTED:
                printf("evicted %u.%u.%u.%u: %s\n", ev.ip[0], ev.ip[1], ev.ip[2], ev.ip[3], ev.text);
                evicted++;
                break;
            case ROCAST_GS_CLOSED:
                printf("leader closed %s\n", ev.ok ? "ok" : "FAILED");
                leader_closed = ev.ok;
                break;
            case ROCAST_GS_FAILED:
                printf("leader failed: %s\n", ev.text);
                return 1;
            default:
                printf("leader event %u\n", ev.kind);
            }
        }
        if (!busy) {
            uint64_t t = rocast_gs_leader_poll_timeout(l);
            if (t != ROCAST_GS_NEVER && t <= now_ns) rocast_gs_leader_handle_timeout(l, now_ns);
        }
    }
    /* Deliver the close to the members. */
    uint32_t dest, conn;
    int64_t n;
    while ((n = rocast_gs_leader_poll_transmit(l, now_ns, out, sizeof(out), &dest, &conn)) > 0)
        if (dest == ROCAST_GS_DEST_MEMBER && conn < N && m[conn].connected)
            rocast_gs_member_handle_stream(m[conn].s, now_ns, out, (size_t)n);
    for (int i = 0; i < N; i++) {
        while (rocast_gs_member_poll_event(m[i].s, &ev) == 1)
            if (ev.kind == ROCAST_GS_CLOSED) {
                printf("member %d closed %s\n", i + 1, ev.ok ? "ok" : "FAILED");
                m[i].closed = 1;
                m[i].closed_ok = ev.ok;
            }
    }
    int pass;
    if (corrupt) {
        pass = leader_closed == 0 && buffers_done == BUFFERS && buffers_ok == BUFFERS - 1;
        for (int i = 0; i < N; i++) pass &= m[i].closed && !m[i].closed_ok;
    } else if (evict) {
        pass = leader_closed == 1 && evicted == 1 && buffers_ok == BUFFERS;
        for (int i = 0; i < 2; i++) pass &= m[i].closed && m[i].closed_ok && m[i].received == BUFFERS;
    } else {
        pass = leader_closed == 1 && buffers_ok == BUFFERS && evicted == 0;
        for (int i = 0; i < N; i++) pass &= m[i].closed && m[i].closed_ok && m[i].received == BUFFERS;
    }
    /* Null handles are errors, not crashes. */
    pass &= rocast_gs_leader_handle_stream(NULL, 0, 0, out, 1) == ROCAST_GS_ERR_NULL;
    pass &= rocast_gs_member_poll_event(NULL, &ev) == ROCAST_GS_ERR_NULL;
    for (int i = 0; i < N; i++) rocast_gs_member_free(m[i].s);
    rocast_gs_leader_free(l);
    printf("result: %s\n", pass ? "PASS" : "FAIL");
    return pass ? 0 : 1;
}
