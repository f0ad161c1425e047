// SPDX-License-Identifier: GPL-2.0
/* The caller of the table lookup: its error passed on through IS_ERR/PTR_ERR. */

static int fill_source_addr(struct addr_table *t, struct route *r)
{
	const struct addr_attr *attr;

	if (r->attr)
		return 0;
	attr = addr_table_get(t, r->src_index);
	if (IS_ERR(attr))
		return PTR_ERR(attr);
	r->attr = attr;
	return 0;
}

int modify_route(struct addr_table *t, struct route *r)
{
	return fill_source_addr(t, r);
}
