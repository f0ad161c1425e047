/* Fixture: write commands live in the uapi tree as .func_write entries. */
#ifndef FIXTURE_UVERBS_IOCTL_H
#define FIXTURE_UVERBS_IOCTL_H

struct uverbs_attr_bundle;

#define DECLARE_UVERBS_WRITE(_command_num, _func, _cmd_desc, ...)            \
	{                                                                    \
		.kind = UAPI_DEF_WRITE,                                      \
		.scope = UAPI_SCOPE_OBJECT,                                  \
		.write = { .command_num = _command_num },                    \
		.func_write = _func,                                         \
		_cmd_desc,                                                   \
	}

#define DECLARE_UVERBS_WRITE_EX(_command_num, _func, _cmd_desc, ...)         \
	{                                                                    \
		.kind = UAPI_DEF_WRITE,                                      \
		.scope = UAPI_SCOPE_OBJECT,                                  \
		.write = { .is_ex = 1, .command_num = _command_num },        \
		.func_write = _func,                                         \
		_cmd_desc,                                                   \
	}

#define DECLARE_UVERBS_OBJECT(_object_id, ...)                               \
	{                                                                    \
		.kind = UAPI_DEF_OBJECT_START,                               \
		.object_start = { .object_id = _object_id },                 \
	},                                                                   \
	##__VA_ARGS__

#endif
