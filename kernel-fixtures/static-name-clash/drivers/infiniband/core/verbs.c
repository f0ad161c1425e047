// SPDX-License-Identifier: MIT
/* Fixture: ib_core's static create_qp, same name, different module. */
static struct ib_qp *create_qp(struct ib_device *dev, struct ib_pd *pd,
			       struct ib_qp_init_attr *attr,
			       struct ib_udata *udata)
{
	return dev ? dev->qp : NULL;
}

struct ib_qp *ib_create_qp_user(struct ib_device *dev, struct ib_pd *pd,
				struct ib_qp_init_attr *attr,
				struct ib_udata *udata)
{
	struct ib_qp *qp;

	qp = create_qp(dev, pd, attr, udata);
	return qp;
}
