// SPDX-License-Identifier: MIT
/* Fixture: vendor verb defined in another file than its ops table. */
static int mlx5_create_qp_common(struct ib_qp *ibqp)
{
	return ibqp ? 0 : -22;
}

int mlx5_ib_create_qp(struct ib_qp *ibqp, struct ib_qp_init_attr *attr,
		      struct ib_udata *udata)
{
	return mlx5_create_qp_common(ibqp);
}

int mlx5_ib_post_send(struct ib_qp *ibqp, const struct ib_send_wr *wr,
		      const struct ib_send_wr **bad_wr)
{
	return 0;
}
