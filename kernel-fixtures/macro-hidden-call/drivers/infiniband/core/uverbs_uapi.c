// SPDX-License-Identifier: MIT
/* Fixture: the type lookup uobj_get_type() expands to. */
const struct uverbs_api_object *uapi_get_object(struct uverbs_api *uapi,
						unsigned short object_id)
{
	return uapi ? uapi->objects[object_id] : NULL;
}
