/* Fixture: firmware command wrappers and field accessors. */
#ifndef FIXTURE_MLX5_DRIVER_H
#define FIXTURE_MLX5_DRIVER_H

#define __mlx5_bit_off(typ, fld) (offsetof(struct mlx5_ifc_##typ##_bits, fld))
#define __mlx5_dw_off(typ, fld) (__mlx5_bit_off(typ, fld) / 32)
#define __mlx5_dw_bit_off(typ, fld) (32 - __mlx5_bit_sz(typ, fld) - (__mlx5_bit_off(typ, fld) & 0x1f))
#define __mlx5_bit_sz(typ, fld) sizeof(((struct mlx5_ifc_##typ##_bits *)0)->fld)
#define __mlx5_mask(typ, fld) ((u32)((1ull << __mlx5_bit_sz(typ, fld)) - 1))
#define __mlx5_dw_mask(typ, fld) (__mlx5_mask(typ, fld) << __mlx5_dw_bit_off(typ, fld))
#define MLX5_ST_SZ_BYTES(typ) (sizeof(struct mlx5_ifc_##typ##_bits) / 8)

#define MLX5_SET(typ, p, fld, v)                                              \
	do {                                                                  \
		u32 _v = v;                                                   \
		BUILD_BUG_ON(__mlx5_bit_sz(typ, fld) > 32);                   \
		*((__be32 *)(p) + __mlx5_dw_off(typ, fld)) =                  \
			cpu_to_be32((be32_to_cpu(*((__be32 *)(p) +            \
				__mlx5_dw_off(typ, fld))) &                   \
				(~__mlx5_dw_mask(typ, fld))) |                \
				(((_v) & __mlx5_mask(typ, fld))               \
				 << __mlx5_dw_bit_off(typ, fld)));            \
	} while (0)

#define mlx5_cmd_exec_inout(dev, ifc_cmd, in, out)                            \
	({                                                                    \
		mlx5_cmd_exec(dev, in, MLX5_ST_SZ_BYTES(ifc_cmd##_in), out,   \
			      MLX5_ST_SZ_BYTES(ifc_cmd##_out));               \
	})

#endif
