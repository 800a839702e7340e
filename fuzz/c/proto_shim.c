/* The C group-control helpers of verbs/rocast_proto.h, callable from the Rust fuzz
 * target `c_framing`, which compares them with the Rust decoder on the same bytes. */
#include <errno.h>
#include <sys/socket.h>
#include <unistd.h>
#include "../../verbs/rocast_proto.h"

/* 0 when the C parser accepts the body of type `ty`, its error code when it refuses,
 * 1 for a type the C side only recognises (Overlay, Ready), -3 for an unknown type. */
int rocast_shim_parse(uint8_t ty, const uint8_t *b, uint16_t len) {
    int w, ok;
    uint64_t u64a, u64b;
    uint32_t u32a, u32b;
    uint8_t ip[4], ip2[4], digest[ROCAST_SHA256_LEN];
    switch (ty) {
    case ROCAST_MSG_PARAMS: return rocast_parse_params(b, len, &w, &u64a, &u32a, &u32b);
    case ROCAST_MSG_JOIN: return rocast_parse_join(b, len, ip, &u32a, &u64a, &u32b);
    case ROCAST_MSG_CONFIRM: return rocast_parse_confirm(b, len, ip, ip2, &u32a);
    case ROCAST_MSG_DONE: return rocast_parse_done(b, len, &u32a);
    case ROCAST_MSG_RESULT: return rocast_parse_result(b, len, &ok, digest, &u64a);
    case ROCAST_MSG_ANNOUNCE: return rocast_parse_announce(b, len, &u32a, &u64b, digest);
    case ROCAST_MSG_CLOSE: return rocast_parse_close(b, len, &ok);
    case ROCAST_MSG_EVICTED: return rocast_parse_evicted(b, len, ip);
    case ROCAST_MSG_RESUME: return rocast_parse_resume(b, len, &u32a, &u64a);
    case ROCAST_MSG_INVITATION: {
        uint8_t t[ROCAST_INVITATION_LEN];
        return rocast_parse_invitation(b, len, t);
    }
    case ROCAST_MSG_OVERLAY:
    case ROCAST_MSG_READY: return 1;
    default: return -3;
    }
}

static struct ctl shim_ctl;

/* Writes `data` into a stream socket in pieces of `step` bytes, closes the writing end,
 * and reads frames with ctl_recv as rocast-verbs-lead/member do. Stores each frame's
 * type and length (up to `max`) and returns how many came out; *end is ctl_recv's last
 * answer (-1: EOF or a framing error). Returns -1 if the sockets fail. */
int rocast_shim_frames(const uint8_t *data, size_t n, size_t step, uint8_t *tys, uint16_t *lens,
                       uint8_t *bodies, int max, int *end) {
    int sv[2];
    if (socketpair(AF_UNIX, SOCK_STREAM, 0, sv)) return -1;
    shim_ctl.fd = sv[0];
    shim_ctl.have = 0;
    int frames = 0;
    size_t off = 0;
    uint8_t ty, body[ROCAST_MAX_BODY_LEN];
    uint16_t len;
    int r = 0;
    for (;;) {
        if (off < n) {
            size_t k = n - off < step ? n - off : step;
            if (write(sv[1], data + off, k) != (ssize_t)k) break;
            off += k;
        }
        /* Everything written: the end closes, and the reader meets EOF after it. */
        if (off == n && sv[1] >= 0) {
            close(sv[1]);
            sv[1] = -1;
        }
        r = ctl_recv(&shim_ctl, &ty, body, &len);
        while (r == 1) {
            if (frames < max) {
                tys[frames] = ty;
                lens[frames] = len;
                memcpy(bodies + (size_t)frames * ROCAST_MAX_BODY_LEN, body, len);
            }
            frames++;
            r = ctl_recv(&shim_ctl, &ty, body, &len);
        }
        if (r < 0) break;
    }
    if (sv[1] >= 0) close(sv[1]);
    close(sv[0]);
    *end = r;
    return frames;
}
