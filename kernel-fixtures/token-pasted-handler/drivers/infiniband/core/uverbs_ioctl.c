// SPDX-License-Identifier: MIT
/* Fixture: ioctl dispatch through a local function pointer loaded from the method table. */
#include "uverbs.h"

struct uverbs_api_ioctl_method {
	int (*handler)(struct uverbs_attr_bundle *attrs);
	unsigned int flags;
};

static int bundle_prepare(struct uverbs_attr_bundle *bundle)
{
	return bundle ? 0 : -22;
}

static int ib_uverbs_run_method(struct uverbs_attr_bundle *bundle,
				const struct uverbs_api_ioctl_method *method_elm)
{
	int (*handler)(struct uverbs_attr_bundle *attrs);
	int ret;

	ret = bundle_prepare(bundle);
	if (ret)
		return ret;
	handler = srcu_dereference(method_elm->handler, &bundle->srcu);
	if (!handler)
		return -5;
	ret = handler(bundle);
	return ret;
}

static long ib_uverbs_cmd_verbs(struct uverbs_attr_bundle *bundle, unsigned int cmd)
{
	const struct uverbs_api_ioctl_method *method_elm;

	method_elm = lookup_method(bundle, cmd);
	if (!method_elm)
		return -95;
	return ib_uverbs_run_method(bundle, method_elm);
}

long ib_uverbs_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	struct uverbs_attr_bundle *bundle = filp->private_data;

	return ib_uverbs_cmd_verbs(bundle, cmd);
}
