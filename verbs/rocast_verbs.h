/*
 * rocast-verbs: the end-host side of rocast's in-network multicast on a real RNIC
 * (or the kernel's Soft-RoCE), over rdma-core's libibverbs.
 *
 * A group member's RC QP is connected to the group's *virtual remote*: destination
 * GID = the McstID as an IPv4-mapped GID, destination QPN = 1, with starting PSNs
 * agreed with the leader (its random start PSN, sent in Params). The switch bridges the group's packets to each
 * member's own connection (Cepheus §III-B), so nothing else about the QP is special:
 * the same code works unchanged on a ConnectX-class NIC. The verbs that matter:
 *   - ibv_create_qp (IBV_QPT_RC) and ibv_modify_qp INIT -> RTR -> RTS, with
 *     ah_attr.is_global = 1, grh.dgid = ::ffff:McstID, grh.sgid_index = the
 *     IPv4-mapped RoCEv2 GID of the port (index 1 on rxe), dest_qp_num = 1,
 *     rq_psn = sq_psn = the leader's start PSN;
 *   - ibv_reg_mr with IBV_ACCESS_REMOTE_WRITE for WRITE groups (the switch rewrites
 *     each RETH's VA/RKey to the member's);
 *   - ibv_post_recv / ibv_post_send, ibv_poll_cq.
 *
 * The control protocol spoken with the leader (`rocast mcast lead`, TCP 4793) and the
 * MRP member agent (UDP 4792) are the ones rocast_net::mcast documents.
 */
#ifndef ROCAST_VERBS_H
#define ROCAST_VERBS_H

#include <infiniband/verbs.h>
#include <netinet/in.h>
#include <stdint.h>
#include <stddef.h>

struct rv_group_qp {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;     /* the receive / WRITE region */
    uint8_t *buf;
    size_t buf_len;
    uint8_t port;
    int gid_index;
    enum ibv_mtu mtu;
};

/* Opens device `dev_name` (NULL: the first one), creates an RC QP and a region of
 * `buf_len` bytes (remote-writable when `write` is set). Returns 0 or -errno. */
int rv_open(struct rv_group_qp *g, const char *dev_name, uint8_t port, int gid_index,
            size_t buf_len, int write);

/* Connects the QP to the group's virtual remote: McstID `mcst` (network order),
 * QPN 1, PSNs 0, path MTU `mtu` (IBV_MTU_1024 unless the netdev MTU allows more). */
/* psn: the group's start PSN (the leader's sq_psn, each member's rq_psn). */
int rv_connect_group(struct rv_group_qp *g, struct in_addr mcst, enum ibv_mtu mtu, uint32_t psn);

/* The verbs path MTU for `bytes` (256 ... 4096), or 0 if it names none. */
static inline enum ibv_mtu rv_mtu(long bytes) {
    switch (bytes) {
    case 256: return IBV_MTU_256;
    case 512: return IBV_MTU_512;
    case 1024: return IBV_MTU_1024;
    case 2048: return IBV_MTU_2048;
    case 4096: return IBV_MTU_4096;
    default: return 0;
    }
}

/* Posts a receive of `len` bytes at `offset` of the region, with work request id `wr_id`. */
int rv_post_recv(struct rv_group_qp *g, uint64_t wr_id, size_t offset, size_t len);

/* Posts a SEND (remote_va/rkey 0) or RDMA WRITE of `len` bytes from `offset` of the
 * region, signalled. For a WRITE the remote VA is the offset into the group's virtual
 * region (the switch maps it onto each member's). */
int rv_post_send(struct rv_group_qp *g, uint64_t wr_id, size_t offset, size_t len,
                 int write, uint64_t remote_va);

/* Polls one completion: 1 and fills *wc, 0 if none, -1 on error. */
int rv_poll(struct rv_group_qp *g, struct ibv_wc *wc);

void rv_close(struct rv_group_qp *g);

/* The QPN, and the region's VA and RKey, that a member registers with the leader. */
uint32_t rv_qpn(const struct rv_group_qp *g);
uint64_t rv_va(const struct rv_group_qp *g);
uint32_t rv_rkey(const struct rv_group_qp *g);

/*
 * UD multicast on the same verbs (the broadcast-select paper's transport):
 * one UD QP with a completion channel, attached to an IPv4 multicast group. On
 * Soft-RoCE (Linux 6.1) ibv_attach_mcast alone does not make the kernel accept the
 * group's packets: rxe joins no IP group and programs the IPv6-style MAC, so
 * rv_ud_join also joins the group on the interface at IP level (a UDP socket with
 * IP_ADD_MEMBERSHIP, held open), which programs 01:00:5e:xx and sends the IGMP
 * report a snooping switch (`rocast switch`) learns the member from.
 *   - QP: IBV_QPT_UD, INIT (P_Key index 0, Q_Key) -> RTR -> RTS;
 *   - group GID ::ffff:a.b.c.d (RoCEv2), lid 0; the group AH: is_global, that dgid,
 *     the port's IPv4 RoCEv2 GID index, hop limit 64; remote QPN 0xFFFFFF;
 *   - each receive buffer has 40 bytes of GRH in front of the payload (the IPv4
 *     header in its last 20).
 */
#define RV_UD_GRH 40
#define RV_MULTICAST_QPN 0xFFFFFFu

struct rv_ud {
    struct ibv_context *ctx;
    struct ibv_pd *pd;
    struct ibv_comp_channel *chan;
    struct ibv_cq *cq;
    struct ibv_qp *qp;
    struct ibv_mr *mr;
    uint8_t *buf;          /* recv_slots receive slots, then send_slots send slots */
    size_t slot;           /* bytes per slot: RV_UD_GRH + MTU */
    unsigned recv_slots, send_slots;
    unsigned send_free;    /* send slots not in flight */
    unsigned send_next;    /* next send slot to use (a ring: completions come in order) */
    uint8_t port;
    int gid_index;
    uint32_t qkey;
    int join_fd;           /* the IP-level membership's socket, or -1 */
    struct in_addr local;
    struct in_addr group;  /* the attached group (rv_ud_close detaches it) */
    int attached;
};

/* Opens `dev_name` (NULL: the first), a UD QP with Q_Key `qkey`, `recv_slots` receive
 * buffers posted and `send_slots` send buffers of `mtu` payload bytes each. 0 or -errno. */
int rv_ud_open(struct rv_ud *u, const char *dev_name, uint8_t port, int gid_index, size_t mtu,
               unsigned recv_slots, unsigned send_slots, uint32_t qkey, struct in_addr local);
/* Joins IPv4 multicast `group` (network order) at IP level on the interface holding
 * u->local and attaches the QP to it. 0 or -errno. */
int rv_ud_join(struct rv_ud *u, struct in_addr group);
/* The address handle to IPv4 address `ip`'s GID: a group (sends to QPN 0xFFFFFF) or
 * a host (unicast to its QP). NULL on error. */
struct ibv_ah *rv_ud_ah(struct rv_ud *u, struct in_addr ip);
/* Sends `len` bytes (copied into a send slot; waits for a free slot, handing receive
 * completions that arrive meanwhile to `on_recv`) to `ah`/`qpn`. 0 or -errno. */
typedef void (*rv_ud_recv_fn)(void *ctx, const struct ibv_wc *wc, const uint8_t *grh,
                              const uint8_t *payload, size_t len);
int rv_ud_send(struct rv_ud *u, struct ibv_ah *ah, uint32_t qpn, const uint8_t *p, size_t len,
               rv_ud_recv_fn on_recv, void *ctx);
/* Waits up to `timeout_ms` for completions and handles them all: receives go to
 * `on_recv` (then the buffer is posted again), sends free their slots. Returns the
 * number of receives handled, or -errno. */
int rv_ud_poll(struct rv_ud *u, int timeout_ms, rv_ud_recv_fn on_recv, void *ctx);
/* The IPv4 source address of a received packet, from its GRH (network order). */
struct in_addr rv_ud_grh_src(const uint8_t *grh);
void rv_ud_close(struct rv_ud *u);

/* CRC-32 (IEEE), as rocast reports what members hold. */
uint32_t rv_crc32(const uint8_t *p, size_t n);
/* The running form: rv_crc32_update(0, p, n) == rv_crc32(p, n). */
uint32_t rv_crc32_update(uint32_t crc, const uint8_t *p, size_t n);
/* 32 bits from the kernel's CSPRNG (getrandom): 0 or -errno. */
int rv_random_u32(uint32_t *v);
/* A start PSN (24 bits) the same way. */
int rv_random_psn(uint32_t *psn);

#endif
