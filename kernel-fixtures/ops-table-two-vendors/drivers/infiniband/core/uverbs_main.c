// SPDX-License-Identifier: MIT
/* Fixture: the uverbs entry reaches the core verbs. */
#include <rdma/ib_verbs.h>

long ib_uverbs_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct ib_device *dev = filp->private_data;
	struct ib_qp *qp;
	int ret;

	ret = ib_alloc_pd_user(dev, filp->pd, NULL);
	if (ret)
		return ret;
	qp = ib_create_qp_user(dev, filp->pd, filp->attr, NULL);
	return ib_send_one(qp, filp->wr);
}
