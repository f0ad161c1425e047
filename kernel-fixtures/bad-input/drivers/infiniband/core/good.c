// SPDX-License-Identifier: MIT
/* Fixture: a well-formed file next to a broken one. */
long ib_uverbs_ioctl(struct file *filp, unsigned int cmd, unsigned long arg)
{
	return broken_neighbour(cmd) + after_the_damage(cmd);
}
