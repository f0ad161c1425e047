// SPDX-License-Identifier: MIT
/* Fixture: the core modify path calls the (possibly stubbed) security hook. */
#include "core_priv.h"

static int _ib_modify_qp(struct ib_qp *qp, struct ib_qp_attr *attr,
			 int attr_mask, struct ib_udata *udata)
{
	int ret;

	ret = ib_security_modify_qp(qp, attr, attr_mask, udata);
	return ret;
}

int ib_modify_qp_with_udata(struct ib_qp *ib_qp, struct ib_qp_attr *attr,
			    int attr_mask, struct ib_udata *udata)
{
	return _ib_modify_qp(ib_qp->real_qp, attr, attr_mask, udata);
}
