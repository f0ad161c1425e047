// SPDX-License-Identifier: GPL-2.0
/*
 * A source-address table read by the index the caller passes, in the shape of the verbs
 * core's GID cache: the error is the initial value of the result, a `goto` skips the line
 * that replaces it when the entry at the caller's index is not there. Written for the test,
 * not kernel code.
 */

struct addr_entry {
	int state;
	struct addr_attr attr;
};

struct addr_table {
	int sz;
	struct addr_entry **slots;
};

static bool slot_in_use(const struct addr_entry *e)
{
	return e && e->state == 1;
}

const struct addr_attr *addr_table_get(struct addr_table *t, int index)
{
	const struct addr_attr *attr = ERR_PTR(-ENODATA);

	if (index < 0 || index >= t->sz)
		return ERR_PTR(-EINVAL);

	table_lock(t);
	if (!slot_in_use(t->slots[index]))
		goto unlock;

	hold_entry(t->slots[index]);
	attr = &t->slots[index]->attr;
unlock:
	table_unlock(t);
	return attr;
}

/* The entry at a slot the device chose itself: a lookup by no key of the caller's. */
const struct addr_attr *addr_table_default(struct addr_table *t)
{
	const struct addr_attr *attr = ERR_PTR(-ENODATA);

	if (!slot_in_use(t->slots[t->sz - 1]))
		goto out;
	attr = &t->slots[t->sz - 1]->attr;
out:
	return attr;
}
