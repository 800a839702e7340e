/*
 * rocast-verbs-lead: a group's leader and sender on a real RNIC (or Soft-RoCE), with
 * the controller in the same process as the paper runs it on the leader host (Cepheus
 * §III-C). The group's control lifecycle is rocast's group session, the same state
 * machine `rocast mcast lead` runs, through its C ABI (rocast_session.h, crates/ffi):
 * member discovery (TCP port 4793), MRP registration (UDP 4792) with its
 * resends and the leased refreshes every second, per-buffer announcements and
 * verdicts, evicting a member whose connection breaks, the close and the switch's
 * release. This program keeps only I/O: the sockets, the clock, and the one RC QP
 * connected to (McstID, QPN 1) on which it posts each buffer's messages when the
 * session says TRANSFER, reporting their completions (the switch's aggregated ACKs).
 * It runs the switch path only: a refused registration (the session's fallback to an
 * overlay) ends the run. MRP is not sealed (no --fabric-key): a keyed switch ignores
 * this leader.
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

#include <fcntl.h>
#include <unistd.h>

#include "rocast_session.h"

#define MAX_MEMBERS 64
/* Connections the leader accepts: the group's members, and a few more it refuses. */
#define MAX_CONNS (MAX_MEMBERS + 8)

struct conn { int fd; };

/* Sends everything the session queued: control frames to their member's connection
 * (a connection that fails a write is closed and reported), MRP to the McstID. */
static void flush(struct rocast_gs_leader *s, struct conn *c, int nconns, int mrp, const struct sockaddr_in *to) {
    uint8_t out[ROCAST_GS_MAX_TRANSMIT];
    uint32_t dest, id;
    int64_t n;
    while ((n = rocast_gs_leader_poll_transmit(s, mono_ns(), out, sizeof(out), &dest, &id)) > 0) {
        if (dest == ROCAST_GS_DEST_MRP) {
            sendto(mrp, out, (size_t)n, 0, (const struct sockaddr *)to, sizeof(*to));
        } else if (dest == ROCAST_GS_DEST_MEMBER && id < (uint32_t)nconns && c[id].fd >= 0) {
            size_t sent = 0;
            while (sent < (size_t)n) {
                ssize_t w = send(c[id].fd, out + sent, (size_t)n - sent, MSG_NOSIGNAL);
                if (w <= 0) break;
                sent += (size_t)w;
            }
            if (sent < (size_t)n) {
                close(c[id].fd);
                c[id].fd = -1;
                rocast_gs_leader_handle_conn_error(s, mono_ns(), id);
            }
        }
    }
}

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
    /* A random start PSN: with the kernel-chosen QPN, what a stranger must
     * guess to inject into the group; the members learn it from Params. */
    uint32_t start_psn;
    if (!e) e = rv_random_psn(&start_psn);
    if (e || (e = rv_connect_group(&g, mcst, imtu, start_psn))) { fprintf(stderr, "verbs: %s\n", strerror(-e)); return 1; }
    /* The data: seeded bytes (xorshift); members are checked by SHA-256. */
    uint64_t x = seed * 0x9e3779b97f4a7c15ull | 1;
    for (long i = 0; i < size; i++) { x ^= x << 13; x ^= x >> 7; x ^= x << 17; g.buf[i] = (uint8_t)(x >> 24); }
    uint32_t crc = rv_crc32(g.buf, (size_t)size);
    uint8_t digest[ROCAST_SHA256_LEN];
    rocast_gs_sha256(g.buf, (size_t)size, digest);

    int ls = socket(AF_INET, SOCK_STREAM, 0), one = 1;
    setsockopt(ls, SOL_SOCKET, SO_REUSEADDR, &one, sizeof(one));
    struct sockaddr_in la = {.sin_family = AF_INET, .sin_port = htons(CONTROL_PORT), .sin_addr = me};
    int mrp = socket(AF_INET, SOCK_DGRAM, 0);
    struct sockaddr_in ma = {.sin_family = AF_INET, .sin_port = htons(MRP_PORT), .sin_addr = me};
    if (bind(ls, (struct sockaddr *)&la, sizeof(la)) || listen(ls, MAX_MEMBERS) ||
        bind(mrp, (struct sockaddr *)&ma, sizeof(ma))) { perror("bind"); return 1; }
    fcntl(ls, F_SETFL, O_NONBLOCK);
    fcntl(mrp, F_SETFL, O_NONBLOCK);
    struct sockaddr_in to = {.sin_family = AF_INET, .sin_port = htons(MRP_PORT), .sin_addr = mcst};

    /* The session: rocast mcast lead's settings, this program's group. */
    struct rocast_gs_leader_config lc;
    rocast_gs_leader_config_default(&lc);
    memcpy(lc.local, &me.s_addr, 4);
    lc.local_qpn = rv_qpn(&g);
    memcpy(lc.mcst_id, &mcst.s_addr, 4);
    rocast_gs_default_group_space((const uint8_t *)&me.s_addr, (const uint8_t *)&mcst.s_addr, lc.group_space,
                                  &lc.group_space_prefix);
    lc.write = (uint8_t)write;
    lc.members = (uint32_t)members;
    lc.capacity = (uint64_t)size;
    lc.message_bytes = (uint32_t)message;
    lc.start_psn = start_psn;
    lc.timeout_ns = (uint64_t)timeout_s * 1000000000ull;
    struct rocast_gs_leader *s = rocast_gs_leader_new(&lc, mono_ns());
    if (!s) { fprintf(stderr, "the group session refused the configuration\n"); return 2; }

    static struct conn c[MAX_CONNS];
    int nconns = 0, all_ok = 1, exit_code = -1;
    long k = 0, n_msgs = (size + message - 1) / message, done = 0;
    int transferring = 0;
    uint64_t t0 = 0, last_completion = 0;
    double transfer_ms = 0;
    struct rocast_gs_event ev;
    while (exit_code < 0) {
        uint64_t now = mono_ns();
        /* Members connecting (until the group is up). */
        while (ls >= 0 && nconns < MAX_CONNS) {
            struct sockaddr_in pa;
            socklen_t pl = sizeof(pa);
            int fd = accept(ls, (struct sockaddr *)&pa, &pl);
            if (fd < 0) break;
            c[nconns].fd = fd;
            rocast_gs_leader_handle_connected(s, now, (uint32_t)nconns, (const uint8_t *)&pa.sin_addr.s_addr);
            nconns++;
        }
        for (int i = 0; i < nconns; i++) {
            if (c[i].fd < 0) continue;
            uint8_t in[4096];
            ssize_t n = recv(c[i].fd, in, sizeof(in), MSG_DONTWAIT);
            if (n > 0) rocast_gs_leader_handle_stream(s, now, (uint32_t)i, in, (size_t)n);
            else if (n == 0 || (errno != EAGAIN && errno != EWOULDBLOCK)) {
                close(c[i].fd);
                c[i].fd = -1;
                rocast_gs_leader_handle_conn_error(s, now, (uint32_t)i);
            }
        }
        uint8_t d[1500];
        ssize_t dn;
        while ((dn = recv(mrp, d, sizeof(d), MSG_DONTWAIT)) > 0) rocast_gs_leader_handle_mrp(s, now, d, (size_t)dn);
        uint64_t due = rocast_gs_leader_poll_timeout(s);
        if (due != ROCAST_GS_NEVER && due <= now) rocast_gs_leader_handle_timeout(s, now);
        flush(s, c, nconns, mrp, &to);
        /* The data path: the buffer's completions are its progress. */
        if (transferring) {
            struct ibv_wc wc;
            int r;
            while ((r = rv_poll(&g, &wc)) > 0) {
                if (wc.status != IBV_WC_SUCCESS) {
                    char why[128];
                    snprintf(why, sizeof(why), "completion error: %s", ibv_wc_status_str(wc.status));
                    fprintf(stderr, "%s\n", why);
                    rocast_gs_leader_handle_transfer_done(s, mono_ns(), 0, why);
                    transferring = 0;
                    break;
                }
                long off = (long)wc.wr_id * message;
                rocast_gs_leader_handle_acked(s, mono_ns(), (uint64_t)(size - off < message ? size - off : message));
                last_completion = mono_ns();
                if (++done == n_msgs) {
                    /* The transfer: first post to the last completion (verdicts follow). */
                    transfer_ms = (double)(mono_ns() - t0) / 1e6;
                    rocast_gs_leader_handle_transfer_done(s, mono_ns(), 1, NULL);
                    transferring = 0;
                    break;
                }
            }
            if (r < 0) {
                rocast_gs_leader_handle_transfer_done(s, mono_ns(), 0, "poll_cq failed");
                transferring = 0;
            } else if (transferring && mono_ns() - last_completion > lc.timeout_ns) {
                fprintf(stderr, "no completions\n");
                rocast_gs_leader_handle_transfer_done(s, mono_ns(), 0, "no completions");
                transferring = 0;
            }
        }
        while (exit_code < 0 && rocast_gs_leader_poll_event(s, &ev) == 1) {
            switch (ev.kind) {
            case ROCAST_GS_REGISTERED:
                /* From the first MRP packet to the last confirmation (the session's clock). */
                printf("registered %s with %ld members in %.1f ms (QPN %#x)\n", group_ip, members,
                       (double)ev.bytes / 1e6, rv_qpn(&g));
                fflush(stdout);
                break;
            case ROCAST_GS_USE_OVERLAY:
                fprintf(stderr, "the group cannot use the switch (%s); rocast-verbs-lead runs no overlay\n", ev.text);
                rocast_gs_leader_close(s, mono_ns(), 0);
                break;
            case ROCAST_GS_UP:
                /* Discovery is over: stop listening, so a member starting for the next
                 * group is refused (and retries) instead of landing in this backlog. */
                if (ls >= 0) { close(ls); ls = -1; }
                if (k < repeat && all_ok) {
                    k++;
                    if (rocast_gs_leader_start_buffer(s, mono_ns(), (uint64_t)size, digest) < 0) {
                        fprintf(stderr, "the session refused the buffer\n");
                        exit_code = 1;
                    }
                } else {
                    rocast_gs_leader_close(s, mono_ns(), (uint32_t)all_ok);
                }
                break;
            case ROCAST_GS_TRANSFER:
                t0 = last_completion = mono_ns();
                done = 0;
                for (long j = 0; j < n_msgs; j++) {
                    long off = j * message, l = size - off < message ? size - off : message;
                    e = rv_post_send(&g, (uint64_t)j, (size_t)off, (size_t)l, write, (uint64_t)off);
                    if (e) { fprintf(stderr, "post_send: %s\n", strerror(-e)); exit_code = 1; break; }
                }
                transferring = exit_code < 0;
                break;
            case ROCAST_GS_BUFFER_DONE: {
                double ms = transfer_ms;
                printf("multicast %ld bytes (crc32 %08x) in %ld %s messages: %.1f ms, %.1f Mbit/s; %u of %ld members ok\n",
                       size, crc, n_msgs, write ? "WRITE" : "SEND", ms, (double)size * 8 / ms / 1e3, ev.members_ok,
                       members);
                fflush(stdout);
                all_ok &= ev.ok && ev.members_ok == (uint32_t)members;
                break;
            }
            case ROCAST_GS_MEMBER_EVICTED:
                printf("evicted member %u.%u.%u.%u: %s\n", ev.ip[0], ev.ip[1], ev.ip[2], ev.ip[3], ev.text);
                fflush(stdout);
                break;
            case ROCAST_GS_CLOSED:
                exit_code = all_ok && ev.ok ? 0 : 1;
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
        /* Wait for a socket or the session's next deadline, at most a millisecond (the
         * CQ is polled, not waited on). */
        struct pollfd p[MAX_CONNS + 2];
        int np = 0;
        p[np++] = (struct pollfd){.fd = mrp, .events = POLLIN};
        if (ls >= 0) p[np++] = (struct pollfd){.fd = ls, .events = POLLIN};
        for (int i = 0; i < nconns; i++)
            if (c[i].fd >= 0) p[np++] = (struct pollfd){.fd = c[i].fd, .events = POLLIN};
        poll(p, (nfds_t)np, transferring ? 0 : 1);
    }
    /* The close and the switch's release go out before the program ends. */
    flush(s, c, nconns, mrp, &to);
    usleep(50000);
    rocast_gs_leader_free(s);
    rv_close(&g);
    return exit_code;
}
