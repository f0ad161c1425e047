// SPDX-License-Identifier: MIT
/* Fixture: firmware commands built with field macros and sent with a wrapper macro. */
#include <linux/mlx5/driver.h>

int mlx5_ib_alloc_pd(struct mlx5_ib_dev *dev, struct mlx5_ib_pd *pd)
{
	u32 out[4] = {};
	u32 in[4] = {};
	int err;

	MLX5_SET(alloc_pd_in, in, opcode, MLX5_CMD_OP_ALLOC_PD);
	MLX5_SET(alloc_pd_in, in, uid, pd->uid);
	err = mlx5_cmd_exec_inout(dev->mdev, alloc_pd, in, out);
	if (err)
		return err;
	return 0;
}
