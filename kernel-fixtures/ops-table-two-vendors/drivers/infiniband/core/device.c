// SPDX-License-Identifier: MIT
/* Fixture: drivers hand their ops tables to the core. */
#include <rdma/ib_verbs.h>

void ib_set_device_ops(struct ib_device *dev, const struct ib_device_ops *ops)
{
	if (ops->create_qp && !dev->ops.create_qp)
		dev->ops.create_qp = ops->create_qp;
	if (ops->alloc_pd && !dev->ops.alloc_pd)
		dev->ops.alloc_pd = ops->alloc_pd;
}
