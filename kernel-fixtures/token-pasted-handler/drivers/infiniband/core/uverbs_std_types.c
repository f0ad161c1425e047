// SPDX-License-Identifier: MIT
/* Fixture: the shared handler of every *_DESTROY method. */
#include "uverbs.h"

int uverbs_destroy_def_handler(struct uverbs_attr_bundle *attrs)
{
	return 0;
}
