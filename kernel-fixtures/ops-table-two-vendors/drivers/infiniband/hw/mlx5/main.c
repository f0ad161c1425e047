// SPDX-License-Identifier: MIT
/* Fixture: two designated-initializer ops tables in one vendor. */
#include <rdma/ib_verbs.h>

static int mlx5_ib_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return ibpd ? 0 : -12;
}

static const struct ib_device_ops mlx5_ib_dev_ops = {
	.owner = THIS_MODULE,
	.driver_id = RDMA_DRIVER_MLX5,

	.alloc_pd = mlx5_ib_alloc_pd,
	INIT_RDMA_OBJ_SIZE(ib_pd, mlx5_ib_pd, ibpd),
	.create_qp = mlx5_ib_create_qp,
	INIT_RDMA_OBJ_SIZE(ib_qp, mlx5_ib_qp, ibqp),
};

static const struct ib_device_ops mlx5_ib_dev_post_ops = {
	.post_send = mlx5_ib_post_send,
};

int mlx5_ib_stage_caps_init(struct mlx5_ib_dev *dev)
{
	ib_set_device_ops(&dev->ib_dev, &mlx5_ib_dev_ops);
	ib_set_device_ops(&dev->ib_dev, &mlx5_ib_dev_post_ops);
	return 0;
}
