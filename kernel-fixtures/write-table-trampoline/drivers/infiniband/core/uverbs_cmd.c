// SPDX-License-Identifier: MIT
/* Fixture: legacy write commands and their table. */
#include <rdma/uverbs_ioctl.h>
#include "uverbs.h"

static int ib_uverbs_alloc_pd(struct uverbs_attr_bundle *attrs)
{
	return attrs ? 0 : -12;
}

static int ib_uverbs_dealloc_pd(struct uverbs_attr_bundle *attrs)
{
	return ib_dealloc_pd_user(attrs->pd, &attrs->driver_udata);
}

static int ib_uverbs_ex_query_device(struct uverbs_attr_bundle *attrs)
{
	return attrs ? 0 : -14;
}

const struct uapi_definition uverbs_def_write_intf[] = {
	DECLARE_UVERBS_OBJECT(
		UVERBS_OBJECT_PD,
		DECLARE_UVERBS_WRITE(IB_USER_VERBS_CMD_ALLOC_PD,
				     ib_uverbs_alloc_pd,
				     UAPI_DEF_WRITE_UDATA_IO(
					     struct ib_uverbs_alloc_pd,
					     struct ib_uverbs_alloc_pd_resp),
				     UAPI_DEF_METHOD_NEEDS_FN(alloc_pd)),
		DECLARE_UVERBS_WRITE(IB_USER_VERBS_CMD_DEALLOC_PD,
				     ib_uverbs_dealloc_pd,
				     UAPI_DEF_WRITE_I(struct ib_uverbs_dealloc_pd),
				     UAPI_DEF_METHOD_NEEDS_FN(dealloc_pd))),
	DECLARE_UVERBS_OBJECT(
		UVERBS_OBJECT_DEVICE,
		DECLARE_UVERBS_WRITE_EX(IB_USER_VERBS_EX_CMD_QUERY_DEVICE,
					ib_uverbs_ex_query_device,
					UAPI_DEF_WRITE_UDATA_IO(
						struct ib_uverbs_ex_query_device,
						struct ib_uverbs_ex_query_device_resp))),
	{},
};
