/*
 * rocast_proto.h: what rocast-verbs' C programs share besides the C ABIs of
 * crates/ffi (rocast_session.h, rocast_nack.h): the control channel's TCP port, MRP's
 * UDP port, the virtual remote's QPN, the invitation token's and SHA-256's lengths, and
 * the monotonic clock.
 * Header-only.
 *
 * The C programs carry no codec of the group control channel: the
 * group session (rocast_core::control::session, through rocast_session.h) frames,
 * parses and decides, the same code as `rocast mcast`. Every #define here is checked
 * against the Rust definitions by crates/core/tests/c_header.rs.
 */
#ifndef ROCAST_PROTO_H
#define ROCAST_PROTO_H

#include <stdint.h>
#include <time.h>

/* The group control channel (TCP) and MRP (UDP) ports. */
#define CONTROL_PORT 4793
#define MRP_PORT 4792

/* The QPN of every member's virtual remote (McstID, ROCAST_VIRTUAL_QPN): an ordinary
 * QPN, not the paper's 0x1, which is the GSI QP on the wire (VIRTUAL_QPN in
 * crates/core/src/fabric/cepheus/bridge.rs). */
#define ROCAST_VIRTUAL_QPN 0x100

/* An invitation token (`rocast mcast invite`), and a SHA-256 digest. */
#define ROCAST_INVITATION_LEN 16
#define ROCAST_SHA256_LEN 32

/* CLOCK_MONOTONIC in ns (a member reports when it held a buffer on it; the session's
 * clock). */
static inline uint64_t mono_ns(void) {
    struct timespec t;
    clock_gettime(CLOCK_MONOTONIC, &t);
    return (uint64_t)t.tv_sec * 1000000000ull + (uint64_t)t.tv_nsec;
}

#endif
