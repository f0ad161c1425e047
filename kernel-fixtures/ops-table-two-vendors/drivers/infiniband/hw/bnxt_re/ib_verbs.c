// SPDX-License-Identifier: MIT
/* Fixture: the second vendor's verbs. */
int bnxt_re_create_qp(struct ib_qp *ib_qp, struct ib_qp_init_attr *qp_init_attr,
		      struct ib_udata *udata)
{
	return bnxt_qplib_create_qp(ib_qp);
}

int bnxt_qplib_create_qp(struct ib_qp *ib_qp)
{
	return ib_qp ? 0 : -5;
}

int bnxt_re_alloc_pd(struct ib_pd *ibpd, struct ib_udata *udata)
{
	return 0;
}
