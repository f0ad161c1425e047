/* Fixture: the token-pasting naming scheme of uverbs ioctl method handlers. */
#ifndef FIXTURE_UVERBS_NAMED_IOCTL_H
#define FIXTURE_UVERBS_NAMED_IOCTL_H

#ifndef UVERBS_MODULE_NAME
#error "Please #define UVERBS_MODULE_NAME before including rdma/uverbs_named_ioctl.h"
#endif

#define _UVERBS_PASTE(x, y) x##y
#define _UVERBS_NAME(x, y) _UVERBS_PASTE(x, y)
#define UVERBS_HANDLER(id) _UVERBS_NAME(UVERBS_MODULE_NAME, _handler_##id)
#define UVERBS_METHOD(id) _UVERBS_NAME(UVERBS_MODULE_NAME, _method_##id)

#define DECLARE_UVERBS_NAMED_METHOD(_method_id, ...)                          \
	static const struct uverbs_method_def UVERBS_METHOD(_method_id) = {  \
		.id = _method_id,                                             \
		.handler = UVERBS_HANDLER(_method_id),                        \
	}

#define DECLARE_UVERBS_NAMED_METHOD_DESTROY(_method_id, ...)                  \
	static const struct uverbs_method_def UVERBS_METHOD(_method_id) = {  \
		.id = _method_id,                                             \
		.handler = uverbs_destroy_def_handler,                        \
	}

#endif
