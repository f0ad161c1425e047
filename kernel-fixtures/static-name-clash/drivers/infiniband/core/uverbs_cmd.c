// SPDX-License-Identifier: MIT
/* Fixture: uverbs' own static create_qp. */
static int create_qp(struct uverbs_attr_bundle *attrs,
		     struct ib_uverbs_ex_create_qp *cmd)
{
	struct ib_qp *qp;

	qp = ib_create_qp_user(attrs->device, attrs->pd, &attrs->init_attr,
			       &attrs->driver_udata);
	return qp ? 0 : -12;
}

int ib_uverbs_create_qp(struct uverbs_attr_bundle *attrs)
{
	struct ib_uverbs_ex_create_qp cmd;

	return create_qp(attrs, &cmd);
}
