// SPDX-License-Identifier: MIT
/* Fixture: ioctl dispatch through a local function pointer loaded from the method table. */
#include "uverbs.h"

struct uverbs_api_ioctl_method {
	int (*handler)(struct uverbs_attr_bundle *attrs);
};

static int ib_uverbs_run_method(struct uverbs_attr_bundle *bundle,
				const struct uverbs_api_ioctl_method *method_elm)
{
	int (*handler)(struct uverbs_attr_bundle *attrs);

	handler = method_elm->handler;
	return handler(bundle);
}

long ib_uverbs_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	return ib_uverbs_run_method(filp->private_data, lookup_method(filp, cmd));
}
