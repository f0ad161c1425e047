/* A kernel module built without BTF, as 5.10's (module BTF came in 5.11) and out-of-tree
 * builds (DKMS, vendor OFED) ship them: compiled by tests/fixtures.rs with
 * `-pg -mfentry -mrecord-mcount` (the ftrace sites a kernel build records in __mcount_loc)
 * and no -g, so the object has symbols and ftrace sites but no .BTF. Not kernel code. */
static const char modinfo_license[] __attribute__((used, section(".modinfo"))) = "license=GPL";

int nobtf_create_qp(int n)
{
	return n < 0 ? -22 : n;
}

__attribute__((no_instrument_function)) int nobtf_notrace(int n)
{
	return n + 1;
}
