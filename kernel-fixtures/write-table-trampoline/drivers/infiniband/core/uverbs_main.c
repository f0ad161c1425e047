// SPDX-License-Identifier: MIT
/* Fixture: the write() entry dispatches through the write-method table. */
#include "uverbs.h"

const struct uverbs_api_write_method *
uapi_get_method(const struct uverbs_api *uapi, unsigned int command)
{
	return uapi ? uapi->write_methods[command] : 0;
}

static long ib_uverbs_write(struct file *filp, const char *buf, unsigned long count,
			    long long *pos)
{
	const struct uverbs_api_write_method *method_elm;
	struct uverbs_attr_bundle bundle;
	long ret;

	method_elm = uapi_get_method(filp->uapi, filp->cmd);
	if (!method_elm)
		return -95;
	ret = method_elm->handler(&bundle);
	return ret ? ret : count;
}
