// SPDX-License-Identifier: MIT
/* Fixture: the INVOKE_WRITE ioctl method re-enters the write table. */
#include "uverbs.h"

static int UVERBS_HANDLER(UVERBS_METHOD_INVOKE_WRITE)(
	struct uverbs_attr_bundle *attrs)
{
	const struct uverbs_api_write_method *method_elm;
	unsigned int cmd = 0;

	method_elm = uapi_get_method(attrs->ufile->device->uapi, cmd);
	if (!method_elm)
		return -95;
	if (method_elm->disabled)
		return -95;
	return method_elm->handler(attrs);
}

DECLARE_UVERBS_NAMED_METHOD(UVERBS_METHOD_INVOKE_WRITE,
			    UVERBS_ATTR_CONST_IN(UVERBS_ATTR_WRITE_CMD,
						 enum ib_uverbs_write_cmds,
						 UA_MANDATORY));
