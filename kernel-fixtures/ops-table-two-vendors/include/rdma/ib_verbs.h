/* Fixture: the device ops vtable and the object-size initializer macro. */
#ifndef FIXTURE_IB_VERBS_H
#define FIXTURE_IB_VERBS_H

struct ib_device_ops {
	struct module *owner;
	unsigned int driver_id;
	int (*alloc_pd)(struct ib_pd *pd, struct ib_udata *udata);
	int (*create_qp)(struct ib_qp *qp, struct ib_qp_init_attr *attr,
			 struct ib_udata *udata);
	int (*post_send)(struct ib_qp *qp, const struct ib_send_wr *wr,
			 const struct ib_send_wr **bad_wr);
	int (*modify_qp)(struct ib_qp *qp, struct ib_qp_attr *attr, int mask,
			 struct ib_udata *udata);
	int (*destroy_qp)(struct ib_qp *qp, struct ib_udata *udata);
	int (*create_cq)(struct ib_cq *cq, const struct ib_cq_init_attr *attr,
			 struct ib_udata *udata);
	struct ib_mr *(*reg_user_mr)(struct ib_pd *pd, u64 start, u64 length,
				     u64 virt_addr, int access, struct ib_udata *udata);
	int (*counter_bind_qp)(struct rdma_counter *counter, struct ib_qp *qp);
	unsigned long size_ib_pd;
	unsigned long size_ib_qp;
};

#define INIT_RDMA_OBJ_SIZE(ib_struct, drv_struct, member)                     \
	.size_##ib_struct =                                                   \
		(sizeof(struct drv_struct) +                                  \
		 BUILD_BUG_ON_ZERO(offsetof(struct drv_struct, member)) +     \
		 BUILD_BUG_ON_ZERO(                                           \
			 !__same_type(((struct drv_struct *)NULL)->member,    \
				      struct ib_struct)))

static inline int ib_post_send(struct ib_qp *qp, const struct ib_send_wr *send_wr,
			       const struct ib_send_wr **bad_send_wr)
{
	const struct ib_send_wr *dummy;

	return qp->device->ops.post_send(qp, send_wr, bad_send_wr ? : &dummy);
}

#endif
