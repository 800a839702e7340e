/*
 * rocast-verbs: the end-host side of rocast's in-network multicast on a real RNIC
 * (or the kernel's Soft-RoCE), over rdma-core's libibverbs (issue 9).
 *
 * A group member's RC QP is connected to the group's *virtual remote*: destination
 * GID = the McstID as an IPv4-mapped GID, destination QPN = 1, with starting PSNs
 * agreed with the leader (0). The switch bridges the group's packets to each
 * member's own connection (Cepheus §III-B), so nothing else about the QP is special:
 * the same code works unchanged on a ConnectX-class NIC. The verbs that matter:
 *   - ibv_create_qp (IBV_QPT_RC) and ibv_modify_qp INIT -> RTR -> RTS, with
 *     ah_attr.is_global = 1, grh.dgid = ::ffff:McstID, grh.sgid_index = the
 *     IPv4-mapped RoCEv2 GID of the port (index 1 on rxe), dest_qp_num = 1,
 *     rq_psn = sq_psn = 0;
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
int rv_connect_group(struct rv_group_qp *g, struct in_addr mcst, enum ibv_mtu mtu);

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

/* CRC-32 (IEEE), as rocast reports what members hold. */
uint32_t rv_crc32(const uint8_t *p, size_t n);

#endif
