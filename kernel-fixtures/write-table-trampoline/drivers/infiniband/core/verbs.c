// SPDX-License-Identifier: MIT
/* Fixture: a core verb the write handlers call. */
int ib_dealloc_pd_user(struct ib_pd *pd, struct ib_udata *udata)
{
	return pd ? 0 : -22;
}
