/* Fixture: the core's local header names the module for UVERBS_HANDLER(). */
#ifndef FIXTURE_UVERBS_H
#define FIXTURE_UVERBS_H

#define UVERBS_MODULE_NAME ib_uverbs
#define UVERBS_HANDLER(id) ib_uverbs_handler_##id

struct uverbs_api_write_method {
	int (*handler)(struct uverbs_attr_bundle *attrs);
	unsigned char disabled;
	unsigned char is_ex;
};

#endif
