// SPDX-License-Identifier: MIT
/* Fixture: core verbs dispatch to the driver through dev->ops. */
#include <rdma/ib_verbs.h>

struct ib_qp *ib_create_qp_user(struct ib_device *dev, struct ib_pd *pd,
				struct ib_qp_init_attr *attr,
				struct ib_udata *udata)
{
	struct ib_qp *qp;
	int ret;

	qp = rdma_zalloc_drv_obj(dev, ib_qp);
	if (!qp)
		return ERR_PTR(-12);
	ret = dev->ops.create_qp(qp, attr, udata);
	if (ret)
		return ERR_PTR(ret);
	return qp;
}

int ib_alloc_pd_user(struct ib_device *dev, struct ib_pd *pd, struct ib_udata *udata)
{
	return pd->device->ops.alloc_pd(pd, udata);
}

int ib_send_one(struct ib_qp *qp, const struct ib_send_wr *wr)
{
	return ib_post_send(qp, wr, NULL);
}
