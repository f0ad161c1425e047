// SPDX-License-Identifier: MIT
/* Fixture: the real LSM-checked version, only built with CONFIG_SECURITY_INFINIBAND. */
#include "core_priv.h"

static int check_qp_port_pkey_settings(struct ib_qp *qp, struct ib_qp_attr *qp_attr)
{
	return qp_attr ? 0 : -22;
}

int ib_security_modify_qp(struct ib_qp *qp,
			  struct ib_qp_attr *qp_attr,
			  int qp_attr_mask,
			  struct ib_udata *udata)
{
	struct ib_qp *real_qp = qp->real_qp;
	int ret;

	ret = check_qp_port_pkey_settings(real_qp, qp_attr);
	if (ret)
		return ret;
	ret = real_qp->device->ops.modify_qp(real_qp,
					     qp_attr,
					     qp_attr_mask,
					     udata);
	return ret;
}
