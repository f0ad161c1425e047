// SPDX-License-Identifier: MIT
/* Fixture: the function uobj_get_obj_read() ends up calling. */
struct ib_uobject *rdma_lookup_get_uobject(const struct uverbs_api_object *obj,
					   struct ib_uverbs_file *ufile, long id,
					   int mode, struct uverbs_attr_bundle *attrs)
{
	return obj ? ufile->uobj : NULL;
}
