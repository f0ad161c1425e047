/* Fixture: a kernel-consumer macro that forwards to a function. */
#ifndef FIXTURE_IB_VERBS_H
#define FIXTURE_IB_VERBS_H

#define ib_alloc_pd(device, flags)                                            \
	__ib_alloc_pd((device), (flags), KBUILD_MODNAME)

#endif
