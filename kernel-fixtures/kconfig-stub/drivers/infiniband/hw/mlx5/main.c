// SPDX-License-Identifier: MIT
/* Fixture: the driver's modify_qp. */
static int mlx5_ib_modify_qp(struct ib_qp *ibqp, struct ib_qp_attr *attr,
			     int attr_mask, struct ib_udata *udata)
{
	return ibqp ? 0 : -22;
}

static const struct ib_device_ops mlx5_ib_dev_ops = {
	.owner = THIS_MODULE,
	.modify_qp = mlx5_ib_modify_qp,
};
