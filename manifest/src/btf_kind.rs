//! BTF's type kinds and INT encoding bits (`include/uapi/linux/btf.h`): one copy for the
//! analyzer's reader of a kernel package's BTF and the collector's check of the running
//! kernel's.

pub const KIND_INT: u8 = 1;
pub const KIND_PTR: u8 = 2;
pub const KIND_ARRAY: u8 = 3;
pub const KIND_STRUCT: u8 = 4;
pub const KIND_UNION: u8 = 5;
pub const KIND_ENUM: u8 = 6;
pub const KIND_FWD: u8 = 7;
pub const KIND_TYPEDEF: u8 = 8;
pub const KIND_VOLATILE: u8 = 9;
pub const KIND_CONST: u8 = 10;
pub const KIND_RESTRICT: u8 = 11;
pub const KIND_FUNC: u8 = 12;
pub const KIND_FUNC_PROTO: u8 = 13;
pub const KIND_VAR: u8 = 14;
pub const KIND_DATASEC: u8 = 15;
pub const KIND_FLOAT: u8 = 16;
pub const KIND_DECL_TAG: u8 = 17;
pub const KIND_TYPE_TAG: u8 = 18;
pub const KIND_ENUM64: u8 = 19;

/// `BTF_INT_SIGNED` in an INT's encoding byte.
pub const INT_SIGNED: u32 = 1 << 0;
/// `BTF_INT_BOOL` in an INT's encoding byte.
pub const INT_BOOL: u32 = 1 << 2;
