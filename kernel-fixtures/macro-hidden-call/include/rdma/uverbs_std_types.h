/* Fixture: object lookups hidden behind two levels of function-like macros. */
#ifndef FIXTURE_UVERBS_STD_TYPES_H
#define FIXTURE_UVERBS_STD_TYPES_H

#define uobj_get_type(_attrs, _object)                                        \
	uapi_get_object((_attrs)->ufile->device->uapi, _object)

#define uobj_get_read(_type, _id, _attrs)                                     \
	rdma_lookup_get_uobject(uobj_get_type(_attrs, _type), (_attrs)->ufile, \
				_uobj_check_id(_id), UVERBS_LOOKUP_READ,        \
				_attrs)

#define _uobj_get_obj_read(_uobj)                                             \
	({                                                                    \
		struct ib_uobject *__uobj = (_uobj);                          \
		IS_ERR(__uobj) ? NULL : __uobj->object;                       \
	})

#define uobj_get_obj_read(_object, _type, _id, _attrs)                        \
	((struct ib_##_object *)_uobj_get_obj_read(                           \
		uobj_get_read(_type, _id, _attrs)))

static inline long _uobj_check_id(unsigned long long id)
{
	if ((long)id != id)
		return -22;
	return id;
}

#endif
