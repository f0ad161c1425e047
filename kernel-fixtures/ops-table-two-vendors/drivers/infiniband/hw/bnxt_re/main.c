// SPDX-License-Identifier: MIT
/* Fixture: the second vendor's single ops table. */
#include <rdma/ib_verbs.h>

static const struct ib_device_ops bnxt_re_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_BNXT_RE,
	.alloc_pd = bnxt_re_alloc_pd,
	.create_qp = bnxt_re_create_qp,
	INIT_RDMA_OBJ_SIZE(ib_pd, bnxt_re_pd, ib_pd),
	INIT_RDMA_OBJ_SIZE(ib_qp, bnxt_re_qp, ib_qp),
};

static int bnxt_re_register_ib(struct bnxt_re_dev *rdev)
{
	ib_set_device_ops(&rdev->ibdev, &bnxt_re_dev_ops);
	return 0;
}
