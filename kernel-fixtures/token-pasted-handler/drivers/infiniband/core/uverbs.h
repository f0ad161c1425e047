/* Fixture: the core's local header names the module for UVERBS_HANDLER(). */
#ifndef FIXTURE_UVERBS_H
#define FIXTURE_UVERBS_H

#define UVERBS_MODULE_NAME ib_uverbs
#include <rdma/uverbs_named_ioctl.h>

struct uverbs_attr_bundle;

int uverbs_destroy_def_handler(struct uverbs_attr_bundle *attrs);

#endif
