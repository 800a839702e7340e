/*
 * rocast-verbs-member: a group member on a real RNIC (or Soft-RoCE), speaking the
 * member side of rocast's multicast API (rocast_net::mcast) to a `rocast mcast lead`
 * leader: TCP control channel (port 4793), MRP member agent (UDP 4792), and one RC QP
 * connected to the group's virtual remote (McstID, QPN 1) through the Cepheus switch.
 *
 * usage: rocast-verbs-member --bind IP --leader IP [--group 10.77.0.200] [--dev rxe0]
 *                            [--port 1] [--gid 1] [--mtu 1024] [--out FILE] [--timeout S]
 *
 * Prints "received N bytes (crc32 X): ok|FAILED" per buffer and exits 0 when every
 * buffer matched and the leader closed the group successfully; 1 otherwise; 2 on bad
 * arguments. Only the switch path is supported: an Overlay message (the leader fell
 * back to an overlay broadcast) ends the member with an error.
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
#include <unistd.h>


static void usage(void) {
    fprintf(stderr, "usage: rocast-verbs-member --bind IP --leader IP [--group IP] [--dev NAME]"
                    " [--port N] [--gid N] [--mtu 256|512|1024|2048|4096] [--out FILE] [--timeout S]"
                    " [--invitation TOKEN]\n");
}

int main(int argc, char **argv) {
    const char *bind_ip = NULL, *leader_ip = NULL, *group_ip = "10.77.0.200", *dev = NULL, *out = NULL,
               *invitation = NULL;
    int port = 1, gid = 1, mtu = 1024, timeout_s = 30;
    for (int i = 1; i < argc; i++) {
        const char *a = argv[i], *v = i + 1 < argc ? argv[i + 1] : NULL;
        if (!v) { usage(); return 2; }
        if (!strcmp(a, "--bind")) bind_ip = v;
        else if (!strcmp(a, "--leader")) leader_ip = v;
        else if (!strcmp(a, "--group")) group_ip = v;
        else if (!strcmp(a, "--dev")) dev = v;
        else if (!strcmp(a, "--port")) port = atoi(v);
        else if (!strcmp(a, "--gid")) gid = atoi(v);
        else if (!strcmp(a, "--mtu")) mtu = atoi(v);
        else if (!strcmp(a, "--out")) out = v;
        else if (!strcmp(a, "--timeout")) timeout_s = atoi(v);
        else if (!strcmp(a, "--invitation")) invitation = v;
        else { usage(); return 2; }
        i++;
    }
    struct in_addr me, leader, mcst;
    if (!bind_ip || !leader_ip || !inet_aton(bind_ip, &me) || !inet_aton(leader_ip, &leader) ||
        !inet_aton(group_ip, &mcst) || port < 1 || port > 255 || gid < 0 || timeout_s <= 0) {
        usage();
        return 2;
    }
    enum ibv_mtu imtu = rv_mtu(mtu);
    if (!imtu) {
        usage();
        return 2;
    }

    /* The MRP agent's socket first: the switch may deliver our record right after Join. */
    int mrp = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in ma = {.sin_family = AF_INET, .sin_port = htons(MRP_PORT), .sin_addr = me};
    if (mrp < 0 || bind(mrp, (struct sockaddr *)&ma, sizeof(ma))) { perror("bind MRP"); return 1; }

    struct ctl c = {.fd = -1};
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons(CONTROL_PORT), .sin_addr = leader};
    uint64_t deadline = mono_ns() + (uint64_t)timeout_s * 1000000000ull;
    for (;;) {
        c.fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr = me};
        bind(c.fd, (struct sockaddr *)&src, sizeof(src));
        if (connect(c.fd, (struct sockaddr *)&la, sizeof(la)) == 0) break;
        close(c.fd);
        if (mono_ns() > deadline) { fprintf(stderr, "no leader at %s\n", leader_ip); return 1; }
        usleep(100000);
    }
    uint8_t ty, body[1 << 16];
    uint16_t len;
    int r;
    while ((r = ctl_recv(&c, &ty, body, &len)) == 0) usleep(1000);
    int write;
    uint64_t capacity;
    uint32_t msg, start_psn;
    if (r < 0 || ty != ROCAST_MSG_PARAMS) { fprintf(stderr, "no Params from the leader\n"); return 1; }
    r = rocast_parse_params(body, len, &write, &capacity, &msg, &start_psn);
    if (r == ROCAST_PARSE_VERSION) {
        fprintf(stderr, "the leader speaks control protocol version %u, this member %d\n", body[0],
                ROCAST_GROUP_CONTROL_VERSION);
        return 1;
    }
    if (r) { fprintf(stderr, "bad Params\n"); return 1; }
    if (!msg || !capacity || capacity > (1ull << 31)) { fprintf(stderr, "sizes out of range\n"); return 1; }

    struct rv_group_qp g;
    int e = rv_open(&g, dev, (uint8_t)port, gid, (size_t)capacity, write);
    if (e) { fprintf(stderr, "rv_open: %s\n", strerror(-e)); return 1; }
    e = rv_connect_group(&g, mcst, imtu, start_psn);
    if (e) { fprintf(stderr, "rv_connect_group: %s\n", strerror(-e)); return 1; }
    if (invitation) {
        /* 32 hex digits from `rocast mcast invite`, presented before the Join. */
        uint8_t token[ROCAST_INVITATION_LEN];
        for (int k = 0; k < ROCAST_INVITATION_LEN; k++) {
            unsigned x;
            if (strlen(invitation) != 2 * ROCAST_INVITATION_LEN || sscanf(invitation + 2 * k, "%2x", &x) != 1) {
                fprintf(stderr, "--invitation: expected %d hex digits\n", 2 * ROCAST_INVITATION_LEN);
                return 2;
            }
            token[k] = (uint8_t)x;
        }
        if (ctl_send(&c, ROCAST_MSG_INVITATION, token, ROCAST_INVITATION_LEN)) { fprintf(stderr, "send Invitation\n"); return 1; }
    }
    uint8_t join[ROCAST_JOIN_LEN];
    uint16_t join_len = rocast_emit_join(join, (const uint8_t *)&me.s_addr, rv_qpn(&g), rv_va(&g), rv_rkey(&g));
    if (ctl_send(&c, ROCAST_MSG_JOIN, join, join_len)) { fprintf(stderr, "send Join\n"); return 1; }
    printf("joined %s as QPN %#x (VA %#llx, RKey %#x)\n", group_ip, rv_qpn(&g),
           (unsigned long long)rv_va(&g), rv_rkey(&g));
    fflush(stdout);

    int all_ok = 1, received = 0;
    /* The buffer being received: its sequence, size, expected SHA-256 and progress. */
    uint32_t seq = 0, parts = 0, parts_done = 0;
    uint8_t want[ROCAST_SHA256_LEN] = {0};
    uint64_t bytes = 0, held_ns = 0;
    int active = 0, done = 0;
    uint64_t last = mono_ns();
    for (;;) {
        /* MRP: confirm the record that lists us (Cepheus §III-C step 3). */
        uint8_t m[1500];
        ssize_t n;
        while ((n = recv(mrp, m, sizeof(m), MSG_DONTWAIT)) >= 8) {
            int rec = (m[7] & 1) ? 20 : 8;
            size_t count = m[6];
            if ((size_t)n != 8 + count * (size_t)rec) continue;
            for (size_t i = 0; i < count; i++) {
                const uint8_t *r0 = m + 8 + i * (size_t)rec;
                if (memcmp(r0, &me.s_addr, 4) == 0) {
                    uint8_t conf[ROCAST_CONFIRM_LEN];
                    uint16_t conf_len = rocast_emit_confirm(conf, m, r0, be32(r0 + 4));
                    ctl_send(&c, ROCAST_MSG_CONFIRM, conf, conf_len);
                }
            }
        }
        /* Completions. */
        struct ibv_wc wc;
        while ((r = rv_poll(&g, &wc)) > 0) {
            if (wc.status != IBV_WC_SUCCESS) {
                fprintf(stderr, "completion error: %s\n", ibv_wc_status_str(wc.status));
                return 1;
            }
            if (wc.opcode == IBV_WC_RECV && active && (wc.wr_id >> 32) == seq) {
                parts_done++;
                last = mono_ns();
                if (parts_done == parts) { held_ns = last; done = 1; }
            }
        }
        if (r < 0) { fprintf(stderr, "poll_cq failed\n"); return 1; }
        /* Control. */
        r = ctl_recv(&c, &ty, body, &len);
        if (r < 0) { fprintf(stderr, "the leader closed the connection\n"); return 1; }
        if (r > 0) {
            last = mono_ns();
            uint32_t done_seq;
            int closed_ok;
            if (ty == ROCAST_MSG_ANNOUNCE && rocast_parse_announce(body, len, &seq, &bytes, want) == 0) {
                if (!bytes || bytes > capacity) { fprintf(stderr, "buffer over capacity\n"); return 1; }
                parts = (uint32_t)((bytes + msg - 1) / msg);
                parts_done = 0;
                done = 0;
                active = 1;
                if (!write) {
                    for (uint32_t i = 0; i < parts; i++) {
                        uint64_t off = (uint64_t)i * msg, l = bytes - off < msg ? bytes - off : msg;
                        e = rv_post_recv(&g, (uint64_t)seq << 32 | i, (size_t)off, (size_t)l);
                        if (e) { fprintf(stderr, "post_recv: %s\n", strerror(-e)); return 1; }
                    }
                }
                ctl_send(&c, ROCAST_MSG_READY, NULL, 0);
            } else if (ty == ROCAST_MSG_DONE && rocast_parse_done(body, len, &done_seq) == 0 && write && active &&
                       done_seq == seq) {
                held_ns = mono_ns();
                done = 1;
            } else if (ty == ROCAST_MSG_CLOSE) {
                int ok = rocast_parse_close(body, len, &closed_ok) == 0 && closed_ok;
                printf("group closed by the leader: %s\n", ok ? "ok" : "FAILED");
                rv_close(&g);
                return all_ok && ok && received ? 0 : 1;
            } else if (ty == ROCAST_MSG_EVICTED) {
                uint8_t gone[4];
                if (rocast_parse_evicted(body, len, gone) == 0)
                    printf("the leader evicted member %u.%u.%u.%u; the group goes on\n", gone[0], gone[1],
                           gone[2], gone[3]);
            } else if (ty == ROCAST_MSG_OVERLAY) {
                fprintf(stderr, "the leader chose an overlay broadcast; rocast-verbs-member only joins switch groups\n");
                return 1;
            }
        }
        if (active && done) {
            uint32_t crc = rv_crc32(g.buf, (size_t)bytes);
            uint8_t digest[ROCAST_SHA256_LEN];
            rocast_sha256(g.buf, (size_t)bytes, digest);
            int ok = !memcmp(digest, want, ROCAST_SHA256_LEN);
            uint8_t res[ROCAST_RESULT_LEN];
            uint16_t res_len = rocast_emit_result(res, ok, digest, held_ns);
            ctl_send(&c, ROCAST_MSG_RESULT, res, res_len);
            printf("received %llu bytes (crc32 %08x): %s\n", (unsigned long long)bytes, crc,
                   ok ? "ok" : "FAILED");
            fflush(stdout);
            /* Only verified bytes take the --out name: written beside it, then renamed. */
            if (out && ok) {
                char tmp[4096];
                snprintf(tmp, sizeof(tmp), "%s.partial", out);
                FILE *f = fopen(tmp, "wb");
                int written = f && fwrite(g.buf, 1, (size_t)bytes, f) == (size_t)bytes;
                if (f && fclose(f)) written = 0;
                if (!written || rename(tmp, out)) {
                    unlink(tmp);
                    fprintf(stderr, "could not write %s\n", out);
                    ok = 0;
                }
            }
            all_ok &= ok;
            received++;
            active = 0;
        }
        if (mono_ns() - last > (uint64_t)timeout_s * 1000000000ull) {
            fprintf(stderr, "timed out waiting for the leader\n");
            return 1;
        }
        struct pollfd p[2] = {{.fd = c.fd, .events = POLLIN}, {.fd = mrp, .events = POLLIN}};
        poll(p, 2, 1);
    }
}
