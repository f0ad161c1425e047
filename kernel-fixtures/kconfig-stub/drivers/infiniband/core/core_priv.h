/* Fixture: a Kconfig-selected prototype or static inline stub. */
#ifndef FIXTURE_CORE_PRIV_H
#define FIXTURE_CORE_PRIV_H

struct ib_qp;
struct ib_qp_attr;
struct ib_udata;

#if IS_ENABLED(CONFIG_SECURITY_INFINIBAND)
int ib_security_modify_qp(struct ib_qp *qp,
			  struct ib_qp_attr *qp_attr,
			  int qp_attr_mask,
			  struct ib_udata *udata);
#else
static inline int ib_security_modify_qp(struct ib_qp *qp,
					struct ib_qp_attr *qp_attr,
					int qp_attr_mask,
					struct ib_udata *udata)
{
	return qp->device->ops.modify_qp(qp->real_qp,
					 qp_attr,
					 qp_attr_mask,
					 udata);
}
#endif

#endif
