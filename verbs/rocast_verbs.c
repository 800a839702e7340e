/* rocast-verbs: see rocast_verbs.h. */
#include "rocast_verbs.h"
#include "rocast_proto.h"
#include <sys/random.h>

#include <errno.h>
#include <poll.h>
#include <stdlib.h>
#include <string.h>
#include <sys/socket.h>
#include <unistd.h>

/* Opens device `dev_name` (NULL: the first one): its context, or NULL with *err set
 * to a negative errno. */
static struct ibv_context *rv_open_device(const char *dev_name, int *err)
{
    int n = 0;
    struct ibv_device **list = ibv_get_device_list(&n);
    if (!list) {
        *err = -errno;
        return NULL;
    }
    struct ibv_device *dev = NULL;
    for (int i = 0; i < n; i++) {
        if (!dev_name || strcmp(ibv_get_device_name(list[i]), dev_name) == 0) {
            dev = list[i];
            break;
        }
    }
    struct ibv_context *ctx = dev ? ibv_open_device(dev) : NULL;
    *err = dev ? -errno : -ENODEV;
    ibv_free_device_list(list);
    return ctx;
}

/* ::ffff:a.b.c.d, the RoCEv2 GID of IPv4 address `a`. */
static void rv_mapped_gid(union ibv_gid *g, struct in_addr a)
{
    memset(g->raw, 0, 16);
    g->raw[10] = 0xff;
    g->raw[11] = 0xff;
    memcpy(&g->raw[12], &a.s_addr, 4);
}

int rv_open(struct rv_group_qp *g, const char *dev_name, uint8_t port, int gid_index,
            size_t buf_len, int write)
{
    memset(g, 0, sizeof(*g));
    int err = 0;
    g->ctx = rv_open_device(dev_name, &err);
    if (!g->ctx)
        return err;
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

int rv_connect_group(struct rv_group_qp *g, struct in_addr mcst, enum ibv_mtu mtu, uint32_t psn)
{
    struct ibv_qp_attr a;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    a.path_mtu = mtu;
    a.dest_qp_num = ROCAST_VIRTUAL_QPN; /* the group's virtual remote (Cepheus §III-A) */
    a.rq_psn = psn & 0xffffff;
    a.max_dest_rd_atomic = 1;
    a.min_rnr_timer = 1;
    a.ah_attr.is_global = 1;
    a.ah_attr.port_num = g->port;
    a.ah_attr.grh.sgid_index = (uint8_t)g->gid_index;
    a.ah_attr.grh.hop_limit = 64;
    rv_mapped_gid(&a.ah_attr.grh.dgid, mcst);
    if (ibv_modify_qp(g->qp, &a, IBV_QP_STATE | IBV_QP_AV | IBV_QP_PATH_MTU |
                                      IBV_QP_DEST_QPN | IBV_QP_RQ_PSN |
                                      IBV_QP_MAX_DEST_RD_ATOMIC | IBV_QP_MIN_RNR_TIMER))
        return -errno;
    g->mtu = mtu;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = psn & 0xffffff;
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

uint32_t rv_crc32_update(uint32_t crc, const uint8_t *p, size_t n)
{
    uint32_t c = ~crc;
    for (size_t i = 0; i < n; i++) {
        c ^= p[i];
        for (int k = 0; k < 8; k++)
            c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
    }
    return ~c;
}

uint32_t rv_crc32(const uint8_t *p, size_t n) { return rv_crc32_update(0, p, n); }

int rv_random_u32(uint32_t *v)
{
    if (getrandom(v, sizeof(*v), 0) != (ssize_t)sizeof(*v))
        return -errno;
    return 0;
}

int rv_random_psn(uint32_t *psn)
{
    int e = rv_random_u32(psn);
    *psn &= 0xffffff;
    return e;
}

/* ---- UD multicast ------------------------------------------------------------------ */

static int rv_ud_post_recv(struct rv_ud *u, unsigned i)
{
    struct ibv_sge sge = {.addr = (uintptr_t)(u->buf + (size_t)i * u->slot),
                          .length = (uint32_t)u->slot, .lkey = u->mr->lkey};
    struct ibv_recv_wr wr = {.wr_id = i, .sg_list = &sge, .num_sge = 1}, *bad = NULL;
    return ibv_post_recv(u->qp, &wr, &bad) ? -errno : 0;
}

int rv_ud_open(struct rv_ud *u, const char *dev_name, uint8_t port, int gid_index, size_t mtu,
               unsigned recv_slots, unsigned send_slots, uint32_t qkey, struct in_addr local)
{
    memset(u, 0, sizeof(*u));
    u->join_fd = -1;
    if (!recv_slots || !send_slots || !mtu)
        return -EINVAL;
    int err = 0;
    u->ctx = rv_open_device(dev_name, &err);
    if (!u->ctx)
        return err;
    u->port = port;
    u->gid_index = gid_index;
    u->qkey = qkey;
    u->local = local;
    u->slot = RV_UD_GRH + mtu;
    u->recv_slots = recv_slots;
    u->send_slots = send_slots;
    u->send_free = send_slots;
    u->pd = ibv_alloc_pd(u->ctx);
    u->chan = u->pd ? ibv_create_comp_channel(u->ctx) : NULL;
    u->cq = u->chan ? ibv_create_cq(u->ctx, (int)(recv_slots + send_slots), NULL, u->chan, 0) : NULL;
    if (!u->cq)
        goto fail;
    u->buf = calloc(recv_slots + send_slots, u->slot);
    if (!u->buf)
        goto fail;
    u->mr = ibv_reg_mr(u->pd, u->buf, (size_t)(recv_slots + send_slots) * u->slot,
                       IBV_ACCESS_LOCAL_WRITE);
    if (!u->mr)
        goto fail;
    struct ibv_qp_init_attr qa = {
        .send_cq = u->cq,
        .recv_cq = u->cq,
        .qp_type = IBV_QPT_UD,
        .sq_sig_all = 1,
        .cap = {.max_send_wr = send_slots, .max_recv_wr = recv_slots, .max_send_sge = 1,
                .max_recv_sge = 1},
    };
    u->qp = ibv_create_qp(u->pd, &qa);
    if (!u->qp)
        goto fail;
    struct ibv_qp_attr a = {.qp_state = IBV_QPS_INIT, .pkey_index = 0, .port_num = port, .qkey = qkey};
    if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_PKEY_INDEX | IBV_QP_PORT | IBV_QP_QKEY))
        goto fail;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTR;
    if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE))
        goto fail;
    memset(&a, 0, sizeof(a));
    a.qp_state = IBV_QPS_RTS;
    a.sq_psn = 0;
    if (ibv_modify_qp(u->qp, &a, IBV_QP_STATE | IBV_QP_SQ_PSN))
        goto fail;
    for (unsigned i = 0; i < recv_slots; i++)
        if (rv_ud_post_recv(u, i))
            goto fail;
    if (ibv_req_notify_cq(u->cq, 0))
        goto fail;
    return 0;
fail:;
    int e = errno ? errno : EIO;
    rv_ud_close(u);
    return -e;
}

int rv_ud_join(struct rv_ud *u, struct in_addr group)
{
    if (u->join_fd < 0) {
        u->join_fd = socket(AF_INET, SOCK_DGRAM, 0);
        if (u->join_fd < 0)
            return -errno;
    }
    struct ip_mreq m = {.imr_multiaddr = group, .imr_interface = u->local};
    if (setsockopt(u->join_fd, IPPROTO_IP, IP_ADD_MEMBERSHIP, &m, sizeof(m)))
        return -errno;
    union ibv_gid g;
    rv_mapped_gid(&g, group);
    if (ibv_attach_mcast(u->qp, &g, 0))
        return -errno;
    u->group = group;
    u->attached = 1;
    return 0;
}

struct ibv_ah *rv_ud_ah(struct rv_ud *u, struct in_addr ip)
{
    struct ibv_ah_attr a;
    memset(&a, 0, sizeof(a));
    a.is_global = 1;
    a.port_num = u->port;
    a.grh.sgid_index = (uint8_t)u->gid_index;
    a.grh.hop_limit = 64;
    rv_mapped_gid(&a.grh.dgid, ip);
    return ibv_create_ah(u->pd, &a);
}

static void rv_ud_complete(struct rv_ud *u, const struct ibv_wc *wc, rv_ud_recv_fn on_recv, void *ctx,
                           int *received)
{
    /* By work request id (receive slots first): a failed completion's opcode is
     * undefined. */
    if (wc->wr_id < u->recv_slots) {
        unsigned i = (unsigned)wc->wr_id;
        const uint8_t *b = u->buf + (size_t)i * u->slot;
        if (wc->status == IBV_WC_SUCCESS && wc->byte_len >= RV_UD_GRH && on_recv) {
            on_recv(ctx, wc, b, b + RV_UD_GRH, wc->byte_len - RV_UD_GRH);
            (*received)++;
        }
        rv_ud_post_recv(u, i);
    } else {
        u->send_free++;
    }
}

int rv_ud_poll(struct rv_ud *u, int timeout_ms, rv_ud_recv_fn on_recv, void *ctx)
{
    int received = 0;
    struct ibv_wc wc[32];
    int n = ibv_poll_cq(u->cq, 32, wc);
    if (n == 0 && timeout_ms != 0) {
        struct pollfd p = {.fd = u->chan->fd, .events = POLLIN};
        if (poll(&p, 1, timeout_ms) > 0) {
            struct ibv_cq *cq;
            void *cq_ctx;
            if (ibv_get_cq_event(u->chan, &cq, &cq_ctx) == 0) {
                ibv_ack_cq_events(cq, 1);
                ibv_req_notify_cq(u->cq, 0);
            }
        }
        n = ibv_poll_cq(u->cq, 32, wc);
    }
    while (n > 0) {
        for (int i = 0; i < n; i++)
            rv_ud_complete(u, &wc[i], on_recv, ctx, &received);
        n = ibv_poll_cq(u->cq, 32, wc);
    }
    return n < 0 ? -EIO : received;
}

int rv_ud_send(struct rv_ud *u, struct ibv_ah *ah, uint32_t qpn, const uint8_t *p, size_t len,
               rv_ud_recv_fn on_recv, void *ctx)
{
    if (len > u->slot - RV_UD_GRH)
        return -EMSGSIZE;
    while (u->send_free == 0) {
        int r = rv_ud_poll(u, 100, on_recv, ctx);
        if (r < 0)
            return r;
    }
    unsigned i = u->recv_slots + u->send_next;
    u->send_next = (u->send_next + 1) % u->send_slots;
    uint8_t *b = u->buf + (size_t)i * u->slot;
    memcpy(b, p, len);
    struct ibv_sge sge = {.addr = (uintptr_t)b, .length = (uint32_t)len, .lkey = u->mr->lkey};
    struct ibv_send_wr wr, *bad = NULL;
    memset(&wr, 0, sizeof(wr));
    wr.wr_id = i;
    wr.sg_list = &sge;
    wr.num_sge = 1;
    wr.opcode = IBV_WR_SEND;
    wr.send_flags = IBV_SEND_SIGNALED;
    wr.wr.ud.ah = ah;
    wr.wr.ud.remote_qpn = qpn;
    wr.wr.ud.remote_qkey = u->qkey;
    if (ibv_post_send(u->qp, &wr, &bad))
        return -errno;
    u->send_free--;
    return 0;
}

struct in_addr rv_ud_grh_src(const uint8_t *grh)
{
    /* RoCEv2 over IPv4: the GRH area holds the IPv4 header in its last 20 bytes. */
    struct in_addr a;
    memcpy(&a.s_addr, grh + 20 + 12, 4);
    return a;
}

void rv_ud_close(struct rv_ud *u)
{
    if (u->qp && u->attached) {
        /* An attached QP cannot be destroyed (EBUSY). */
        union ibv_gid g;
        rv_mapped_gid(&g, u->group);
        ibv_detach_mcast(u->qp, &g, 0);
    }
    if (u->qp)
        ibv_destroy_qp(u->qp);
    if (u->mr)
        ibv_dereg_mr(u->mr);
    if (u->cq)
        ibv_destroy_cq(u->cq);
    if (u->chan)
        ibv_destroy_comp_channel(u->chan);
    if (u->pd)
        ibv_dealloc_pd(u->pd);
    if (u->ctx)
        ibv_close_device(u->ctx);
    if (u->join_fd >= 0)
        close(u->join_fd);
    free(u->buf);
    memset(u, 0, sizeof(*u));
    u->join_fd = -1;
}
