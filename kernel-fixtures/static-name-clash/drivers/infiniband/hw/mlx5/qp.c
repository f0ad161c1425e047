// SPDX-License-Identifier: MIT
/* Fixture: the driver's static create_qp, a third definition of the name. */
static int create_qp(struct mlx5_ib_dev *dev, struct ib_pd *pd,
		     struct mlx5_ib_qp *qp, struct mlx5_create_qp_params *params)
{
	return dev ? 0 : -22;
}

int mlx5_ib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		      struct ib_udata *udata)
{
	struct mlx5_create_qp_params params = {};

	return create_qp(to_mdev(ibqp->device), ibqp->pd, to_mqp(ibqp), &params);
}
