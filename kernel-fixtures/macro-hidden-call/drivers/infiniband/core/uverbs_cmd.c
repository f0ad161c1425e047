// SPDX-License-Identifier: MIT
/* Fixture: a write handler that looks up its QP through the macro chain. */
#include <rdma/uverbs_std_types.h>
#include <rdma/ib_verbs.h>

int ib_uverbs_query_qp(struct uverbs_attr_bundle *attrs)
{
	struct ib_qp *qp;
	struct ib_pd *pd;

	qp = uobj_get_obj_read(qp, UVERBS_OBJECT_QP, attrs->cmd.qp_handle, attrs);
	if (!qp)
		return -22;
	pd = ib_alloc_pd(qp->device, 0);
	return pd ? 0 : -12;
}
