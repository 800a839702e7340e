/*
 * rocast-verbs-lead: a group's leader and sender on a real RNIC (or Soft-RoCE): the
 * leader side of rocast's multicast API (rocast_net::mcast), with the controller in the
 * same process as the paper runs it on the leader host (Cepheus §III-C):
 *   1. members connect over TCP (port 4793) and send their QPN (and VA/RKey);
 *   2. the leader sends the MRP registration (UDP 4792) to the McstID, with its own QP
 *      as the first record, and waits for every member's confirmation (resending up to
 *      three times); a switch's refusal ends the run;
 *   3. per buffer: announce, wait for every member's Ready, post the messages on the
 *      one RC QP connected to (McstID, QPN 1), wait for their completions (the switch's
 *      aggregated ACKs), and for WRITE tell the members it is there; collect verdicts;
 *   4. close, and free the switch's state with an MRP release.
 * The registration is resent every second while the group lives: the switch's entries
 * are soft state with a lease (rocast switch --group-lease-ms), which also makes a
 * restarted switch relearn the group. MRP is not sealed (no --fabric-key support):
 * against a keyed switch this leader's registration goes unanswered.
 *
 * usage: rocast-verbs-lead --bind IP --members N [--group 10.77.0.200] [--op send|write]
 *          [--size BYTES] [--message BYTES] [--repeat K] [--dev rxe0] [--port 1] [--gid 1]
 *          [--mtu 1024] [--seed S] [--timeout S]
 * Exits 0 when every member reported every buffer intact; 1 otherwise; 2 on bad arguments.
 */
#include "rocast_verbs.h"
#include "rocast_proto.h"

#include <arpa/inet.h>
#include <errno.h>
#include <poll.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <time.h>

/* How often the registration is resent (rocast_core's DEFAULT_REFRESH_MS). */
#define REFRESH_NS 1000000000ull
#include <unistd.h>

#define MAX_MEMBERS 64

struct member { struct ctl c; uint8_t ip[4], peer[4]; uint32_t qpn; uint64_t va; uint32_t rkey; int joined, confirmed, ready, verdict; };

static void usage(void) {
    fprintf(stderr, "usage: rocast-verbs-lead --bind IP --members N [--group IP] [--op send|write] [--size B]"
                    " [--message B] [--repeat K] [--dev NAME] [--port N] [--gid N] [--mtu M] [--seed S] [--timeout S]\n");
}

int main(int argc, char **argv) {
    const char *bind_ip = NULL, *group_ip = "10.77.0.200", *dev = NULL, *op = "send";
    long members = 0, size = 1 << 20, message = 1 << 20, repeat = 1, port = 1, gid = 1, mtu = 1024, timeout_s = 60;
    unsigned long seed = 1;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { usage(); return 2; }
        if (!strcmp(a, "--bind")) bind_ip = v;
        else if (!strcmp(a, "--members")) members = atol(v);
        else if (!strcmp(a, "--group")) group_ip = v;
        else if (!strcmp(a, "--op")) op = v;
        else if (!strcmp(a, "--size")) size = atol(v);
        else if (!strcmp(a, "--message")) message = atol(v);
        else if (!strcmp(a, "--repeat")) repeat = atol(v);
        else if (!strcmp(a, "--dev")) dev = v;
        else if (!strcmp(a, "--port")) port = atol(v);
        else if (!strcmp(a, "--gid")) gid = atol(v);
        else if (!strcmp(a, "--mtu")) mtu = atol(v);
        else if (!strcmp(a, "--seed")) seed = strtoul(v, NULL, 0);
        else if (!strcmp(a, "--timeout")) timeout_s = atol(v);
        else { usage(); return 2; }
        i++;
    }
    struct in_addr me, mcst;
    int write = !strcmp(op, "write");
    enum ibv_mtu imtu = rv_mtu(mtu);
    if (!bind_ip || !inet_aton(bind_ip, &me) || !inet_aton(group_ip, &mcst) || members < 1 ||
        members > MAX_MEMBERS || size < 1 || size > (1L << 30) || message < 1 || repeat < 1 ||
        (!write && strcmp(op, "send")) || !imtu || port < 1 || port > 255 || timeout_s < 1) {
        usage();
        return 2;
    }
    struct rv_group_qp g;
    int e = rv_open(&g, dev, (uint8_t)port, (int)gid, (size_t)size, 0);
    /* A random start PSN (issue 45): with the kernel-chosen QPN, what a stranger must
     * guess to inject into the group; the members learn it from Params. */
    uint32_t start_psn;
    if (!e) e = rv_random_psn(&start_psn);
    if (e || (e = rv_connect_group(&g, mcst, imtu, start_psn))) { fprintf(stderr, "verbs: %s\n", strerror(-e)); return 1; }
    /* The data: seeded bytes (xorshift); members are checked by SHA-256. */
    uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
    for (long i = 0; i < size; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; g.buf[i] = (uint8_t)(x >> 24); }
    uint32_t crc = rv_crc32(g.buf, (size_t)size);
    uint8_t digest[ROCAST_SHA256_LEN];
    rocast_sha256(g.buf, (size_t)size, digest);

    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons(CONTROL_PORT), .sin_addr = me};
    int mrp = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in ma = {.sin_family = AF_INET, .sin_port = htons(MRP_PORT), .sin_addr = me};
    if (bind(ls, (struct sockaddr *)&la, sizeof(la)) || listen(ls, MAX_MEMBERS) ||
        bind(mrp, (struct sockaddr *)&ma, sizeof(ma))) { perror("bind"); return 1; }

    /* 1. Member discovery. */
    static struct member m[MAX_MEMBERS];
    uint8_t params[ROCAST_PARAMS_LEN], ty, body[1 << 16];
    uint16_t len, params_len = rocast_emit_params(params, write, (uint64_t)size, (uint32_t)message, start_psn);
    const uint64_t timeout_ns = (uint64_t)timeout_s * 1000000000ull;
    uint64_t deadline = mono_ns() + timeout_ns;
    int joined = 0, accepted = 0;
    while (joined < members) {
        if (mono_ns() > deadline) { fprintf(stderr, "%d of %ld members joined\n", joined, members); return 1; }
        struct pollfd p = {.fd = ls, .events = POLLIN};
        if (accepted < members && poll(&p, 1, 5) > 0) {
            struct sockaddr_in pa;
            socklen_t pl = sizeof(pa);
            m[accepted].c.fd = accept(ls, (struct sockaddr *)&pa, &pl);
            /* The Join must name the address the connection came from (issue 24). */
            memcpy(m[accepted].peer, &pa.sin_addr.s_addr, 4);
            if (m[accepted].c.fd >= 0 && ctl_send(&m[accepted].c, ROCAST_MSG_PARAMS, params, params_len) == 0) accepted++;
        }
        for (int i = 0; i < accepted; i++) {
            if (!m[i].joined && ctl_recv(&m[i].c, &ty, body, &len) > 0 && ty == ROCAST_MSG_JOIN) {
                int r = rocast_parse_join(body, len, m[i].ip, &m[i].qpn, &m[i].va, &m[i].rkey);
                if (r == ROCAST_PARSE_VERSION) {
                    fprintf(stderr, "a member speaks control protocol version %u, this leader %d\n", body[0],
                            ROCAST_GROUP_CONTROL_VERSION);
                    return 1;
                }
                if (r) { fprintf(stderr, "a member sent a malformed Join\n"); return 1; }
                if (memcmp(m[i].ip, m[i].peer, 4)) {
                    fprintf(stderr, "a Join names %u.%u.%u.%u from %u.%u.%u.%u: refused\n", m[i].ip[0], m[i].ip[1],
                            m[i].ip[2], m[i].ip[3], m[i].peer[0], m[i].peer[1], m[i].peer[2], m[i].peer[3]);
                    return 1;
                }
                m[i].joined = 1;
                joined++;
            }
        }
    }

    /* Discovery is over: stop listening, so a member starting for the next group is
     * refused (and retries) instead of landing in this closing leader's backlog. */
    close(ls);

    /* 2. Registration: one MRP packet (groups here are small), the leader first. */
    int rec = write ? 20 : 8;
    uint8_t pkt[1472];
    size_t plen = 8 + (size_t)(members + 1) * (size_t)rec;
    if (plen > sizeof(pkt)) { fprintf(stderr, "group too large for one MRP packet\n"); return 1; }
    memset(pkt, 0, plen);
    memcpy(pkt, &mcst.s_addr, 4);
    /* Flags: bit 0 WRITE; bit 4 marks this leader's first registration as a new
     * incarnation, so a switch still holding a predecessor's group (restarted within
     * its lease) starts the ACK state afresh. Refreshes clear it (below). */
    pkt[4] = 0; pkt[5] = 1; pkt[6] = (uint8_t)(members + 1); pkt[7] = (uint8_t)(write | 0x10);
    memcpy(pkt + 8, &me.s_addr, 4);
    put32(pkt + 12, rv_qpn(&g));
    for (long i = 0; i < members; i++) {
        uint8_t *r = pkt + 8 + (size_t)(i + 1) * (size_t)rec;
        memcpy(r, m[i].ip, 4);
        put32(r + 4, m[i].qpn);
        if (write) { put64(r + 8, m[i].va); put32(r + 16, m[i].rkey); }
    }
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(MRP_PORT), .sin_addr = mcst};
    uint64_t t_reg = mono_ns();
    int confirmed = 0;
    for (int attempt = 0; attempt < 4 && confirmed < members; attempt++) {
        sendto(mrp, pkt, plen, 0, (struct sockaddr *)&to, sizeof(to));
        uint64_t until = mono_ns() + 500000000ull;
        while (confirmed < members && mono_ns() < until) {
            uint8_t rj[64];
            ssize_t n = recv(mrp, rj, sizeof(rj), MSG_DONTWAIT);
            if (n == 13 && !memcmp(rj, "RCRJ", 4)) {
                fprintf(stderr, "the switch refused the group (reason %u)\n", rj[12]);
                return 1;
            }
            for (long i = 0; i < members; i++) {
                uint8_t c_mcst[4], c_ip[4];
                uint32_t c_qpn;
                if (!m[i].confirmed && ctl_recv(&m[i].c, &ty, body, &len) > 0 && ty == ROCAST_MSG_CONFIRM &&
                    rocast_parse_confirm(body, len, c_mcst, c_ip, &c_qpn) == 0 &&
                    !memcmp(c_mcst, &mcst.s_addr, 4) && !memcmp(c_ip, m[i].ip, 4)) {
                    m[i].confirmed = 1;
                    confirmed++;
                }
            }
            usleep(200);
        }
    }
    if (confirmed < members) { fprintf(stderr, "%d of %ld members confirmed\n", confirmed, members); return 1; }
    pkt[7] &= (uint8_t)~0x10; /* from now on: refreshes of this incarnation */
    printf("registered %s with %ld members in %.1f ms (QPN %#x)\n", group_ip, members,
           (double)(mono_ns() - t_reg) / 1e6, rv_qpn(&g));
    fflush(stdout);

    /* 3. The buffers. The switch's entries are leased soft state: the registration is
     * sent again every REFRESH_NS while the group lives (every wait below refreshes). */
    uint64_t last_refresh = mono_ns();
#define REFRESH()                                                                  \
    do {                                                                           \
        if (mono_ns() - last_refresh >= REFRESH_NS) {                              \
            sendto(mrp, pkt, plen, 0, (struct sockaddr *)&to, sizeof(to));         \
            last_refresh = mono_ns();                                              \
        }                                                                          \
    } while (0)
    int all_ok = 1;
    long n_msgs = (size + message - 1) / message;
    for (long k = 1; k <= repeat && all_ok; k++) {
        uint8_t ann[ROCAST_ANNOUNCE_LEN];
        uint16_t ann_len = rocast_emit_announce(ann, (uint32_t)k, (uint64_t)size, digest);
        int ready = 0;
        for (long i = 0; i < members; i++) m[i].ready = m[i].verdict = 0;
        for (long i = 0; i < members; i++) ctl_send(&m[i].c, ROCAST_MSG_ANNOUNCE, ann, ann_len);
        deadline = mono_ns() + timeout_ns;
        while (ready < members) {
            for (long i = 0; i < members; i++)
                /* Counted per member: a second Ready from one member is not another's. */
                if (ctl_recv(&m[i].c, &ty, body, &len) > 0 && ty == ROCAST_MSG_READY && !m[i].ready) {
                    m[i].ready = 1;
                    ready++;
                }
            if (mono_ns() > deadline) { fprintf(stderr, "members not ready\n"); return 1; }
            REFRESH();
            usleep(100);
        }
        uint64_t t0 = mono_ns();
        for (long j = 0; j < n_msgs; j++) {
            long off = j * message, l = size - off < message ? size - off : message;
            e = rv_post_send(&g, (uint64_t)j, (size_t)off, (size_t)l, write, (uint64_t)off);
            if (e) { fprintf(stderr, "post_send: %s\n", strerror(-e)); return 1; }
        }
        long done = 0;
        while (done < n_msgs) {
            struct ibv_wc wc;
            int r = rv_poll(&g, &wc);
            if (r < 0) { fprintf(stderr, "poll_cq failed\n"); return 1; }
            if (r == 0) {
                if (mono_ns() - t0 > timeout_ns) { fprintf(stderr, "no completions\n"); return 1; }
                REFRESH();
                continue;
            }
            if (wc.status != IBV_WC_SUCCESS) { fprintf(stderr, "completion error: %s\n", ibv_wc_status_str(wc.status)); return 1; }
            done++;
        }
        double ms = (double)(mono_ns() - t0) / 1e6;
        if (write) {
            uint8_t d[ROCAST_DONE_LEN];
            uint16_t d_len = rocast_emit_done(d, (uint32_t)k);
            for (long i = 0; i < members; i++) ctl_send(&m[i].c, ROCAST_MSG_DONE, d, d_len);
        }
        int verdicts = 0, good = 0;
        deadline = mono_ns() + timeout_ns;
        while (verdicts < members) {
            for (long i = 0; i < members; i++) {
                int ok;
                uint8_t theirs[ROCAST_SHA256_LEN];
                uint64_t held_ns;
                if (ctl_recv(&m[i].c, &ty, body, &len) > 0 && ty == ROCAST_MSG_RESULT && !m[i].verdict) {
                    /* A malformed Result counts as a failed member; one verdict per member. */
                    int r = rocast_parse_result(body, len, &ok, theirs, &held_ns);
                    m[i].verdict = 1;
                    verdicts++;
                    good += r == 0 && ok && !memcmp(theirs, digest, ROCAST_SHA256_LEN);
                }
            }
            if (mono_ns() > deadline) break;
            REFRESH();
            usleep(100);
        }
        printf("multicast %ld bytes (crc32 %08x) in %ld %s messages: %.1f ms, %.1f Mbit/s; %d of %ld members ok\n",
               size, crc, n_msgs, write ? "WRITE" : "SEND", ms, (double)size * 8 / ms / 1e3, good, members);
        fflush(stdout);
        all_ok &= good == members;
    }

    /* 4. Close, and free the switch's tables. */
    uint8_t closing[ROCAST_CLOSE_LEN], rel[8];
    uint16_t closing_len = rocast_emit_close(closing, all_ok);
    for (long i = 0; i < members; i++) ctl_send(&m[i].c, ROCAST_MSG_CLOSE, closing, closing_len);
    memcpy(rel, &mcst.s_addr, 4);
    rel[4] = 0; rel[5] = 1; rel[6] = 0; rel[7] = 2;
    sendto(mrp, rel, 8, 0, (struct sockaddr *)&to, sizeof(to));
    usleep(50000);
    rv_close(&g);
    return all_ok ? 0 : 1;
}
