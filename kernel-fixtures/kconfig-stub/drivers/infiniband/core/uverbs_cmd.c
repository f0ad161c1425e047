// SPDX-License-Identifier: MIT
/* Fixture: the write command that modifies a QP. */
static int modify_qp(struct uverbs_attr_bundle *attrs, struct ib_uverbs_ex_modify_qp *cmd)
{
	struct ib_qp_attr attr;

	return ib_modify_qp_with_udata(attrs->qp, &attr, cmd->base.attr_mask,
				       &attrs->driver_udata);
}

int ib_uverbs_modify_qp(struct uverbs_attr_bundle *attrs)
{
	struct ib_uverbs_ex_modify_qp cmd;

	return modify_qp(attrs, &cmd);
}
