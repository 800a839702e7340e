/*
 * rocast-verbs-member: a group member on a real RNIC (or Soft-RoCE), joining a
 * `rocast mcast lead` or `rocast-verbs-lead` leader: TCP control channel (port 4793),
 * MRP member agent (UDP 4792), and one RC QP connected to the group's virtual remote
 * (McstID, QPN 1) through the Cepheus switch. The control side is rocast's group
 * session, the same state machine `rocast mcast join` runs, through its C ABI
 * (rocast_session.h, crates/ffi): Params, the Join (with an invitation),
 * confirming the member's MRP record and the leader's refreshes, announcements,
 * verdicts, evictions and the close. This program keeps only I/O: the sockets, the
 * clock, the QP and its receives, and the SHA-256 of what arrived.
 *
 * usage: rocast-verbs-member --bind IP --leader IP [--group 10.77.0.200] [--dev rxe0]
 *                            [--port 1] [--gid 1] [--mtu 1024] [--out FILE] [--timeout S]
 *                            [--invitation TOKEN]
 *
 * Prints "received N bytes (crc32 X): ok|FAILED" per buffer and exits 0 when every
 * buffer matched and the leader closed the group successfully; 1 otherwise; 2 on bad
 * arguments. Only the switch path is supported: an overlay (the leader fell back to
 * an overlay broadcast) ends the member with an error.
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
#include <fcntl.h>
#include <time.h>
#include <unistd.h>

#include "rocast_session.h"


static void usage(void) {
    fprintf(stderr, "usage: rocast-verbs-member --bind IP --leader IP [--group IP] [--dev NAME]"
                    " [--port N] [--gid N] [--mtu 256|512|1024|2048|4096] [--out FILE] [--timeout S]"
                    " [--invitation TOKEN]\n");
}

int main(int argc, char **argv) {
    const char *bind_ip = NULL, *leader_ip = NULL, *group_ip = "10.77.0.200", *dev = NULL, *out_path = NULL,
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
        else if (!strcmp(a, "--out")) out_path = v;
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
    fcntl(mrp, F_SETFL, O_NONBLOCK);

    int fd = -1;
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons(CONTROL_PORT), .sin_addr = leader};
    const uint64_t timeout_ns = (uint64_t)timeout_s * 1000000000ull;
    uint64_t deadline = mono_ns() + timeout_ns;
    for (;;) {
        fd = socket(AF_INET, SOCK_STREAM, 0);
        struct sockaddr_in src = {.sin_family = AF_INET, .sin_addr = me};
        bind(fd, (struct sockaddr *)&src, sizeof(src));
        if (connect(fd, (struct sockaddr *)&la, sizeof(la)) == 0) break;
        close(fd);
        if (mono_ns() > deadline) { fprintf(stderr, "no leader at %s\n", leader_ip); return 1; }
        usleep(100000);
    }

    struct rocast_gs_member_config mc;
    rocast_gs_member_config_default(&mc);
    memcpy(mc.local, &me.s_addr, 4);
    memcpy(mc.mcst_id, &mcst.s_addr, 4);
    rocast_gs_default_group_space((const uint8_t *)&me.s_addr, (const uint8_t *)&mcst.s_addr, mc.group_space,
                                  &mc.group_space_prefix);
    mc.max_capacity = 1ull << 31;
    mc.timeout_ns = timeout_ns;
    if (invitation) {
        /* 32 hex digits from `rocast mcast invite`, presented before the Join. */
        for (int k = 0; k < ROCAST_INVITATION_LEN; k++) {
            unsigned x;
            if (strlen(invitation) != 2 * ROCAST_INVITATION_LEN || sscanf(invitation + 2 * k, "%2x", &x) != 1) {
                fprintf(stderr, "--invitation: expected %d hex digits\n", 2 * ROCAST_INVITATION_LEN);
                return 2;
            }
            mc.invitation[k] = (uint8_t)x;
        }
        mc.has_invitation = 1;
    }
    struct rocast_gs_member *s = rocast_gs_member_new(&mc, mono_ns());
    if (!s) { fprintf(stderr, "the group session refused the configuration\n"); return 2; }

    struct rv_group_qp g;
    int qp_open = 0, write = 0, all_ok = 1, received = 0, exit_code = -1;
    uint32_t msg = 0;
    /* The buffer being received: its sequence, size, progress. */
    uint32_t seq = 0, parts = 0, parts_done = 0;
    uint64_t bytes = 0, held_ns = 0;
    int active = 0, done = 0;
    struct rocast_gs_event ev;
    while (exit_code < 0) {
        uint64_t now = mono_ns();
        uint8_t in[4096];
        ssize_t n = fd >= 0 ? recv(fd, in, sizeof(in), MSG_DONTWAIT) : -1;
        if (n > 0) rocast_gs_member_handle_stream(s, now, in, (size_t)n);
        else if (fd >= 0 && (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK))) {
            close(fd);
            fd = -1;
            rocast_gs_member_handle_conn_error(s, now);
        }
        /* MRP: the session's agent confirms the record that lists us (Cepheus §III-C). */
        uint8_t d[1500];
        struct sockaddr_in from;
        socklen_t fl = sizeof(from);
        ssize_t dn;
        while ((dn = recvfrom(mrp, d, sizeof(d), MSG_DONTWAIT, (struct sockaddr *)&from, &fl)) > 0) {
            rocast_gs_member_handle_mrp(s, now, d, (size_t)dn, (const uint8_t *)&from.sin_addr.s_addr,
                                        (const uint8_t *)&leader.s_addr);
            fl = sizeof(from);
        }
        uint64_t due = rocast_gs_member_poll_timeout(s);
        if (due != ROCAST_GS_NEVER && due <= now) rocast_gs_member_handle_timeout(s, now);
        /* Completions: each receive of the announced buffer (SEND). */
        if (qp_open) {
            struct ibv_wc wc;
            int r;
            while ((r = rv_poll(&g, &wc)) > 0) {
                if (wc.status != IBV_WC_SUCCESS) {
                    fprintf(stderr, "completion error: %s\n", ibv_wc_status_str(wc.status));
                    exit_code = 1;
                    break;
                }
                if (wc.opcode == IBV_WC_RECV && active && (wc.wr_id >> 32) == seq && ++parts_done == parts) {
                    held_ns = mono_ns();
                    done = 1;
                }
            }
            if (r < 0) { fprintf(stderr, "poll_cq failed\n"); exit_code = 1; }
        }
        if (active && done) {
            uint8_t digest[ROCAST_SHA256_LEN];
            rocast_gs_sha256(g.buf, (size_t)bytes, digest);
            rocast_gs_member_handle_received(s, mono_ns(), digest, held_ns);
            active = 0;
        }
        /* Everything the session queued goes to the leader. */
        uint8_t out[ROCAST_GS_MAX_TRANSMIT];
        int64_t tn;
        while ((tn = rocast_gs_member_poll_transmit(s, mono_ns(), out, sizeof(out))) > 0)
            if (fd >= 0 && send(fd, out, (size_t)tn, MSG_NOSIGNAL) != (ssize_t)tn) {
                close(fd);
                fd = -1;
                rocast_gs_member_handle_conn_error(s, mono_ns());
            }
        while (exit_code < 0 && rocast_gs_member_poll_event(s, &ev) == 1) {
            switch (ev.kind) {
            case ROCAST_GS_OPEN_QP: {
                if (!ev.message_bytes || !ev.bytes || ev.bytes > (1ull << 31)) {
                    fprintf(stderr, "sizes out of range\n");
                    exit_code = 1;
                    break;
                }
                write = ev.write;
                msg = ev.message_bytes;
                int e = rv_open(&g, dev, (uint8_t)port, gid, (size_t)ev.bytes, write);
                if (!e) e = rv_connect_group(&g, mcst, imtu, ev.start_psn);
                if (e) { fprintf(stderr, "verbs: %s\n", strerror(-e)); exit_code = 1; break; }
                qp_open = 1;
                rocast_gs_member_handle_qp_ready(s, mono_ns(), rv_qpn(&g), write ? rv_va(&g) : 0, write ? rv_rkey(&g) : 0);
                printf("joined %s as QPN %#x (VA %#llx, RKey %#x)\n", group_ip, rv_qpn(&g),
                       (unsigned long long)rv_va(&g), rv_rkey(&g));
                fflush(stdout);
                break;
            }
            case ROCAST_GS_POST_RECEIVES:
                seq = ev.seq;
                bytes = ev.bytes;
                parts = (uint32_t)((bytes + msg - 1) / msg);
                parts_done = 0;
                done = 0;
                active = 1;
                if (!write) {
                    for (uint32_t i = 0; i < parts && exit_code < 0; i++) {
                        uint64_t off = (uint64_t)i * msg, l = bytes - off < msg ? bytes - off : msg;
                        int e = rv_post_recv(&g, (uint64_t)seq << 32 | i, (size_t)off, (size_t)l);
                        if (e) { fprintf(stderr, "post_recv: %s\n", strerror(-e)); exit_code = 1; }
                    }
                }
                rocast_gs_member_handle_receives_posted(s, mono_ns());
                break;
            case ROCAST_GS_WRITE_DONE:
                if (active && ev.seq == seq) {
                    held_ns = mono_ns();
                    done = 1;
                }
                break;
            case ROCAST_GS_RECEIVED: {
                uint32_t crc = rv_crc32(g.buf, (size_t)bytes);
                int ok = ev.ok;
                printf("received %llu bytes (crc32 %08x): %s\n", (unsigned long long)bytes, crc, ok ? "ok" : "FAILED");
                fflush(stdout);
                /* Only verified bytes take the --out name: written beside it, then renamed. */
                if (out_path && ok) {
                    char tmp[4096];
                    snprintf(tmp, sizeof(tmp), "%s.partial", out_path);
                    FILE *f = fopen(tmp, "wb");
                    int written = f && fwrite(g.buf, 1, (size_t)bytes, f) == (size_t)bytes;
                    if (f && fclose(f)) written = 0;
                    if (!written || rename(tmp, out_path)) {
                        unlink(tmp);
                        fprintf(stderr, "could not write %s\n", out_path);
                        ok = 0;
                    }
                }
                all_ok &= ok;
                received++;
                break;
            }
            case ROCAST_GS_PEER_EVICTED:
                printf("the leader evicted member %u.%u.%u.%u; the group goes on\n", ev.ip[0], ev.ip[1], ev.ip[2],
                       ev.ip[3]);
                fflush(stdout);
                break;
            case ROCAST_GS_USE_OVERLAY:
                fprintf(stderr, "%s; rocast-verbs-member only joins switch groups\n", ev.text);
                exit_code = 1;
                break;
            case ROCAST_GS_CLOSED:
                printf("group closed by the leader: %s\n", ev.ok ? "ok" : "FAILED");
                exit_code = all_ok && ev.ok && received ? 0 : 1;
                break;
            case ROCAST_GS_FAILED:
                fprintf(stderr, "%s\n", ev.text);
                exit_code = 1;
                break;
            default:
                break;
            }
        }
        if (exit_code >= 0) break;
        struct pollfd p[2] = {{.fd = fd, .events = POLLIN}, {.fd = mrp, .events = POLLIN}};
        poll(p, 2, 1);
    }
    if (qp_open) rv_close(&g);
    rocast_gs_member_free(s);
    if (fd >= 0) close(fd);
    return exit_code;
}
