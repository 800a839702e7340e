/* rocast-verbs: see rocast_verbs.h. */
#include "rocast_verbs.h"

#include <errno.h>
#include <stdlib.h>
#include <string.h>

int rv_open(struct rv_group_qp *g, const char *dev_name, uint8_t port, int gid_index,
            size_t buf_len, int write)
{
    memset(g, 0, sizeof(*g));
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list)
        return -errno;
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n; i++) {
        if (!dev_name || strcmp(ibv_get_device_name(list[i]), dev_name) == 0) {
            dev = list[i];
            break;
        }
    }
    if (!dev) {
        ibv_free_device_list(list);
        return -ENODEV;
    }
    g->ctx = ibv_open_device(dev);
    ibv_free_device_list(list);
    if (!g->ctx)
        return -errno;
    g->port = port;
    g->gid_index = gid_index;
    g->pd = ibv_alloc_pd(g->ctx);
    g->cq = g->pd ? ibv_create_cq(g->ctx, 4096, NULL, NULL, 0) : NULL;
    if (!g->pd || !g->cq)
        goto fail;
    g->buf_len = buf_len ? buf_len : 1;
    g->buf = calloc(1, g->buf_len);
    if (!g->buf)
        goto fail;
    int access = IBV_ACCESS_LOCAL_WRITE | (write ? IBV_ACCESS_REMOTE_WRITE : 0);
    g->mr = ibv_reg_mr(g->pd, g->buf, g->buf_len, access);
    if (!g->mr)
        goto fail;
    struct ibv_qp_init_attr qa = {
        .send_cq = g->cq,
        .recv_cq = g->cq,
        .qp_type = IBV_QPT_RC,
        .cap = {.max_send_wr = 1024, .max_recv_wr = 4096, .max_send_sge = 1, .max_recv_sge = 1},
    };
    g->qp = ibv_create_qp(g->pd, &qa);
    if (!g->qp)
        goto fail;
    struct ibv_qp_attr a = {
        .qp_state = IBV_QPS_INIT,
        .pkey_index = 0,
        .port_num = port,
        .qp_access_flags = IBV_ACCESS_REMOTE_WRITE | IBV_ACCESS_LOCAL_WRITE,
    };
    if (ibv_modify_qp(g->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT |
                                      IBV_QP_ACCESS_FLAGS))
        goto fail;
    return 0;
fail:;
    int e = errno ? errno : EIO;
    rv_close(g);
    return -e;
}

int rv_connect_group(struct rv_group_qp *g, struct in_addr mcst, enum ibv_mtu mtu)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = 1; /* the group's virtual remote (Cepheus §III-A) */
    a.rq_psn = 0;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = g->port;
    a.ah_attr.grh.sgid_index = (uint8_t)g->gid_index;
    a.ah_attr.grh.hop_limit = 64;
    /* ::ffff:a.b.c.d */
    memset(a.ah_attr.grh.dgid.raw, 0, 16);
    a.ah_attr.grh.dgid.raw[10] = 0xff;
    a.ah_attr.grh.dgid.raw[11] = 0xff;
    memcpy(&a.ah_attr.grh.dgid.raw[12], &mcst.s_addr, 4);
    if (ibv_modify_qp(g->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -errno;
    g->mtu = mtu;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    a.timeout = 16; /* 4.096 us x 2^16 = 268 ms: TCG guests and a busy host answer late */
    a.retry_cnt = 7;
    a.rnr_retry = 7;
    a.max_rd_atomic = 1;
    if (ibv_modify_qp(g->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN | IBV_QP_TIMEOUT |
                                      IBV_QP_RETRY_CNT | IBV_QP_RNR_RETRY |
                                      IBV_QP_MAX_QP_RD_ATOMIC))
        return -errno;
    return 0;
}

int rv_post_recv(struct rv_group_qp *g, uint64_t wr_id, size_t offset, size_t len)
{
    if (offset > g->buf_len || len > g->buf_len - offset)
        return -EINVAL;
    struct ibv_sge sge = {
        .addr = (uintptr_t)(g->buf + offset), .length = (uint32_t)len, .lkey = g->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = wr_id, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    return ibv_post_recv(g->qp, &wr, &bad) ? -errno : 0;
}

int rv_post_send(struct rv_group_qp *g, uint64_t wr_id, size_t offset, size_t len,
                 int write, uint64_t remote_va)
{
    if (offset > g->buf_len || len > g->buf_len - offset)
        return -EINVAL;
    struct ibv_sge sge = {
        .addr = (uintptr_t)(g->buf + offset), .length = (uint32_t)len, .lkey = g->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = wr_id;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.send_flags = IBV_SEND_SIGNALED;
    if (write) {
        wr.opcode = IBV_WR_RDMA_WRITE;
        wr.wr.rdma.remote_addr = remote_va;
        wr.wr.rdma.rkey = 0; /* the switch puts each member's RKey in */
    } else {
        wr.opcode = IBV_WR_SEND;
    }
    return ibv_post_send(g->qp, &wr, &bad) ? -errno : 0;
}

int rv_poll(struct rv_group_qp *g, struct ibv_wc *wc)
{
    int n = ibv_poll_cq(g->cq, 1, wc);
    return n < 0 ? -1 : n;
}

void rv_close(struct rv_group_qp *g)
{
    if (g->qp)
        ibv_destroy_qp(g->qp);
    if (g->mr)
        ibv_dereg_mr(g->mr);
    if (g->cq)
        ibv_destroy_cq(g->cq);
    if (g->pd)
        ibv_dealloc_pd(g->pd);
    if (g->ctx)
        ibv_close_device(g->ctx);
    free(g->buf);
    memset(g, 0, sizeof(*g));
}

uint32_t rv_qpn(const struct rv_group_qp *g) { return g->qp->qp_num; }
uint64_t rv_va(const struct rv_group_qp *g) { return (uintptr_t)g->buf; }
uint32_t rv_rkey(const struct rv_group_qp *g) { return g->mr->rkey; }

uint32_t rv_crc32(const uint8_t *p, size_t n)
{
    uint32_t c = 0xffffffffu;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}
