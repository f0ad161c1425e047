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
