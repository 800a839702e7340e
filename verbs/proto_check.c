/*
 * proto_check: the C side of crates/core/tests/c_header.rs, which compiles it against
 * rocast_proto.h alone (no libibverbs) and compares it with rocast_core::wire::group_control.
 *
 *   proto_check emit    writes one frame of every message the C programs send or
 *                       receive, with fixed field values, to stdout (binary);
 *   proto_check parse   reads frames from stdin and prints one line per frame: the
 *                       message's fields as the C parsers read them, or
 *                       "<name> error <code>" when a parser refuses the body, or
 *                       "frame error" when the header is refused (and stops);
 *   proto_check stream  feeds stdin through a socketpair to ctl_recv (the
 *                       programs' framed reader), then closes the writing end, and
 *                       prints "frame <type> <len>" per frame and "end" when
 *                       ctl_recv reports the peer gone (EOF mid-frame included)
 *                       or "stuck" if it never does.
 *
 * The values and the line format are the Rust test's; change them together.
 */
#include "rocast_proto.h"

#include <inttypes.h>
#include <stdio.h>
#include <string.h>
#include <unistd.h>

static void frame(uint8_t ty, const uint8_t *body, uint16_t len) {
    uint8_t h[ROCAST_FRAME_HEADER_LEN];
    rocast_frame_header(h, ty, len);
    fwrite(h, 1, sizeof(h), stdout);
    fwrite(body, 1, len, stdout);
}

static int emit(void) {
    uint8_t b[ROCAST_MAX_BODY_LEN];
    const uint8_t member[4] = {10, 0, 0, 7}, group[4] = {10, 77, 0, 200};
    frame(ROCAST_MSG_PARAMS, b, rocast_emit_params(b, 1, 0x0102030405060708ull, 0x0a0b0c0d, 0xabcdef));
    frame(ROCAST_MSG_JOIN, b, rocast_emit_join(b, member, 0x123456, 0x10000000, 0x5a5a));
    frame(ROCAST_MSG_CONFIRM, b, rocast_emit_confirm(b, group, member, 0x107));
    frame(ROCAST_MSG_DONE, b, rocast_emit_done(b, 0x01020304));
    uint8_t digest[ROCAST_SHA256_LEN];
    for (int i = 0; i < ROCAST_SHA256_LEN; i++) digest[i] = (uint8_t)i;
    frame(ROCAST_MSG_RESULT, b, rocast_emit_result(b, 1, digest, 0x1122334455667788ull));
    frame(ROCAST_MSG_READY, b, 0);
    memset(digest, 0xa5, sizeof(digest));
    frame(ROCAST_MSG_ANNOUNCE, b, rocast_emit_announce(b, 1, 70000, digest));
    frame(ROCAST_MSG_CLOSE, b, rocast_emit_close(b, 0));
    frame(ROCAST_MSG_EVICTED, b, rocast_emit_evicted(b, member));
    memset(b, 7, ROCAST_INVITATION_LEN);
    frame(ROCAST_MSG_INVITATION, b, ROCAST_INVITATION_LEN);
    put32(b + ROCAST_RESUME_SEQ, 2);
    put64(b + ROCAST_RESUME_OFFSET, 0x010203040506ull);
    frame(ROCAST_MSG_RESUME, b, ROCAST_RESUME_LEN);
    return fflush(stdout) ? 1 : 0;
}

static void ip(const uint8_t *a) { printf(" %u.%u.%u.%u", a[0], a[1], a[2], a[3]); }

/* A digest as lower-case hex into out (2 * ROCAST_SHA256_LEN + 1 bytes). */
static const char *to_hex(const uint8_t *d, char *out) {
    for (int i = 0; i < ROCAST_SHA256_LEN; i++) sprintf(out + 2 * i, "%02x", d[i]);
    return out;
}

static int parse(void) {
    static uint8_t in[1 << 20];
    size_t have = fread(in, 1, sizeof(in), stdin), at = 0;
    while (at < have) {
        if (have - at < ROCAST_FRAME_HEADER_LEN) { printf("frame error\n"); return 0; }
        uint8_t ty = in[at];
        uint16_t len = (uint16_t)(in[at + 1] << 8 | in[at + 2]);
        int max = rocast_max_body_len(ty);
        if (max < 0 || len > max || have - at - ROCAST_FRAME_HEADER_LEN < len) { printf("frame error\n"); return 0; }
        const uint8_t *b = in + at + ROCAST_FRAME_HEADER_LEN;
        at += ROCAST_FRAME_HEADER_LEN + (size_t)len;
        int r = 0, ok = 0;
        uint8_t a1[4], a2[4];
        uint32_t u1 = 0, u2 = 0, u3 = 0;
        uint8_t d[ROCAST_SHA256_LEN];
        char hex[2 * ROCAST_SHA256_LEN + 1];
        uint64_t w1 = 0, w2 = 0;
        switch (ty) {
        case ROCAST_MSG_PARAMS:
            if (!(r = rocast_parse_params(b, len, &ok, &w1, &u1, &u3))) printf("params %d %" PRIu64 " %" PRIu32 " %" PRIu32 "\n", ok, w1, u1, u3);
            else printf("params error %d\n", r);
            break;
        case ROCAST_MSG_JOIN:
            if (!(r = rocast_parse_join(b, len, a1, &u1, &w1, &u2))) {
                printf("join");
                ip(a1);
                printf(" %" PRIu32 " %" PRIu64 " %" PRIu32 "\n", u1, w1, u2);
            } else printf("join error %d\n", r);
            break;
        case ROCAST_MSG_CONFIRM:
            if (!(r = rocast_parse_confirm(b, len, a1, a2, &u1))) {
                printf("confirm");
                ip(a1);
                ip(a2);
                printf(" %" PRIu32 "\n", u1);
            } else printf("confirm error %d\n", r);
            break;
        case ROCAST_MSG_DONE:
            if (!(r = rocast_parse_done(b, len, &u1))) printf("done %" PRIu32 "\n", u1);
            else printf("done error %d\n", r);
            break;
        case ROCAST_MSG_RESULT:
            if (!(r = rocast_parse_result(b, len, &ok, d, &w1))) printf("result %d %s %" PRIu64 "\n", ok, to_hex(d, hex), w1);
            else printf("result error %d\n", r);
            break;
        case ROCAST_MSG_OVERLAY:
            printf("overlay %u\n", len); /* C peers only recognise it */
            break;
        case ROCAST_MSG_READY:
            printf("ready %u\n", len);
            break;
        case ROCAST_MSG_ANNOUNCE:
            if (!(r = rocast_parse_announce(b, len, &u1, &w2, d))) printf("announce %" PRIu32 " %" PRIu64 " %s\n", u1, w2, to_hex(d, hex));
            else printf("announce error %d\n", r);
            break;
        case ROCAST_MSG_CLOSE:
            if (!(r = rocast_parse_close(b, len, &ok))) printf("close %d\n", ok);
            else printf("close error %d\n", r);
            break;
        case ROCAST_MSG_EVICTED:
            if (!(r = rocast_parse_evicted(b, len, a1))) {
                printf("evicted");
                ip(a1);
                printf("\n");
            } else printf("evicted error %d\n", r);
            break;
        case ROCAST_MSG_RESUME:
            if (!(r = rocast_parse_resume(b, len, &u1, &w1))) printf("resume %" PRIu32 " %" PRIu64 "\n", u1, w1);
            else printf("resume error %d\n", r);
            break;
        case ROCAST_MSG_INVITATION: {
            uint8_t t[ROCAST_INVITATION_LEN];
            if (!(r = rocast_parse_invitation(b, len, t))) {
                printf("invitation ");
                for (int k = 0; k < ROCAST_INVITATION_LEN; k++) printf("%02x", t[k]);
                printf("\n");
            } else printf("invitation error %d\n", r);
            break;
        }
        }
    }
    return fflush(stdout) ? 1 : 0;
}

static struct ctl stream_ctl;

static int stream(void) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return 1;
    uint8_t buf[4096];
    size_t n;
    while ((n = fread(buf, 1, sizeof(buf), stdin)) > 0)
        if (write(sv[1], buf, n) != (ssize_t)n) return 1;
    close(sv[1]);
    stream_ctl.fd = sv[0];
    stream_ctl.have = 0;
    uint8_t body[ROCAST_MAX_BODY_LEN], ty;
    uint16_t len;
    /* Everything was written before the first read: a reader that waits for more
     * after EOF would spin here forever, so a bound turns that into "stuck". */
    for (int i = 0; i < 100000; i++) {
        int r = ctl_recv(&stream_ctl, &ty, body, &len);
        if (r < 0) {
            printf("end\n");
            return 0;
        }
        if (r > 0) printf("frame %u %u\n", ty, len);
    }
    printf("stuck\n");
    return 0;
}

/* SHA-256 of stdin, as lower-case hex: checked against Rust's sha2. */
static int sha256(void) {
    static uint8_t in[1 << 20];
    size_t have = fread(in, 1, sizeof(in), stdin);
    uint8_t d[ROCAST_SHA256_LEN];
    char hex[2 * ROCAST_SHA256_LEN + 1];
    rocast_sha256(in, have, d);
    printf("%s\n", to_hex(d, hex));
    return 0;
}

int main(int argc, char **argv) {
    if (argc == 2 && !strcmp(argv[1], "sha256")) return sha256();
    if (argc == 2 && !strcmp(argv[1], "emit")) return emit();
    if (argc == 2 && !strcmp(argv[1], "parse")) return parse();
    if (argc == 2 && !strcmp(argv[1], "stream")) return stream();
    fprintf(stderr, "usage: proto_check emit|parse|stream\n");
    return 2;
}
