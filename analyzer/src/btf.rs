//! Pure-Rust reader for kernel BTF and module ELF files: "can this module function be traced
//! with fexit, and what does its BTF signature look like?"
//!
//! Two inputs:
//! * [`BaseBtf`]: the kernel's base BTF, from the `.BTF` section of `vmlinux` (or a raw BTF
//!   blob such as `/sys/kernel/btf/vmlinux`);
//! * [`ModuleBinary`]: one kernel module `.ko` (ELF relocatable) with a *split* `.BTF` section
//!   whose type ids and string offsets continue after the base's.
//!
//! A function is fexit-attachable ([`Attach::Fexit`]) when the module has (1) an ELF `STT_FUNC`
//! symbol with exactly that name, (2) a BTF `FUNC` of that name in the module's own split BTF and
//! (3) an ftrace site: an `__mcount_loc` entry whose target address lies inside the symbol.
//!
//! Counting conventions (see [`BinaryCounts`]; they reproduce the kernel-dispatch note's table):
//! * FUNC symbols: distinct names of defined `STT_FUNC` ELF symbols, excluding `__pfx_*` padding
//!   symbols and including compiler parts/clones (`.cold`, `.isra.N`, ...). A static function
//!   out-of-lined in several object files counts once (raw entries: `func_sym_entries`).
//! * ftrace sites: the entries of `__mcount_loc` (one relocation each in a `.ko`).
//! * BTF FUNCs: distinct names of `BTF_KIND_FUNC` records of the module's split BTF (base types
//!   excluded; raw records: `btf_func_records`).
//!
//! Signatures: `nargs` is the FUNC_PROTO `vlen` *minus* a trailing variadic marker (a last
//! parameter with type id 0 and no name); `variadic` records whether that marker was present.
//!
//! Parsing never panics on malformed input: every read is bounds-checked and problems are
//! reported as [`BtfError`] values naming the file and what was wrong.

use std::collections::{BTreeMap, HashMap};
use std::fmt;
use std::fs::File;
use std::path::Path;

use object::read::elf::{FileHeader, SectionHeader};
use object::{Object, ObjectSection, ObjectSymbol, RelocationTarget, SectionIndex, SymbolFlags};

/// BTF magic number as written by a little-endian producer.
const BTF_MAGIC: u16 = 0xeb9f;
/// Size of the fixed part of `struct btf_header`.
const BTF_HDR_MIN: usize = 24;
/// Size of `struct btf_type`.
const BTF_TYPE_LEN: usize = 12;
/// Limit on typedef/const/... chains while resolving a return type (guards against cycles).
const MAX_RESOLVE_DEPTH: usize = 64;

const ELF_STT_FUNC: u8 = 2;

// BTF kinds and INT encoding bits.
use manifest::btf_kind::*;

/// Errors of the BTF / ELF reader. `file` is the path (or a description such as `raw BTF`)
/// of the input concerned.
#[derive(Debug, thiserror::Error)]
pub enum BtfError {
    /// The file could not be opened or read.
    #[error("{file}: cannot read: {source}")]
    Io {
        file: String,
        #[source]
        source: std::io::Error,
    },
    /// The file is not an ELF object (nor, for a base, a raw BTF blob).
    #[error("{file}: not an ELF file ({detail})")]
    NotElf { file: String, detail: String },
    /// The file looks like ELF but its headers could not be read.
    #[error("{file}: malformed ELF: {detail}")]
    BadElf { file: String, detail: String },
    /// The ELF file has no `.BTF` section (kernel built without `CONFIG_DEBUG_INFO_BTF[_MODULES]`).
    #[error("{file}: no .BTF section")]
    NoBtfSection { file: String },
    /// The BTF blob does not start with 0xeB9F in either byte order.
    #[error("{file}: bad BTF magic {magic:#06x} (expected 0xeb9f)")]
    BadMagic { file: String, magic: u16 },
    /// The BTF header is too short or its sections lie outside the blob.
    #[error("{file}: bad BTF header: {detail}")]
    BadHeader { file: String, detail: String },
    /// A `btf_type` record (or its trailing data) runs past the end of the type section.
    #[error("{file}: truncated BTF type section at offset {offset} (type id {type_id}, kind {kind}): need {need} bytes, {have} left")]
    TruncatedType {
        file: String,
        offset: usize,
        type_id: u32,
        kind: u8,
        need: usize,
        have: usize,
    },
    /// A `btf_type` record has a kind this reader does not know (so its size is unknown).
    #[error("{file}: unknown BTF kind {kind} at type section offset {offset} (type id {type_id})")]
    UnknownKind {
        file: String,
        offset: usize,
        type_id: u32,
        kind: u8,
    },
    /// Split BTF of a module does not fit the base given (other byte order, dangling ids, ...).
    #[error("{file}: BTF does not match the base BTF: {detail} (is the vmlinux from the same kernel build?)")]
    BaseMismatch { file: String, detail: String },
    /// A BTF FUNC is malformed (its type is not a FUNC_PROTO, a type id is out of range, ...).
    #[error("{file}: malformed BTF for function `{function}`: {detail} (is the vmlinux from the same kernel build?)")]
    BadFunc {
        file: String,
        function: String,
        detail: String,
    },
}

/// How (and whether) a module function can be traced with fexit.
#[derive(Debug, Clone, PartialEq, Eq, serde::Serialize)]
pub enum Attach {
    /// Exact ELF FUNC symbol + BTF FUNC + ftrace (`__mcount_loc`) site: fexit works by name.
    Fexit,
    /// No symbol of that exact name, but a compiler clone exists (`name.isra.N`,
    /// `name.constprop.N`, `name.part.N`, combinations; `.cold` suffixes stripped). fexit by name
    /// fails. `symbol` is the first clone name in byte order.
    CloneOnly { symbol: String },
    /// Exact ELF FUNC symbol, but no BTF FUNC of that name in the module's BTF (checked before
    /// the ftrace site: a function lacking both is reported as `NoBtf`).
    NoBtf,
    /// Exact ELF FUNC symbol and BTF FUNC, but no `__mcount_loc` entry inside the function
    /// (`notrace`, or not instrumented).
    NoFtrace,
    /// No FUNC symbol of that name nor any clone: inlined everywhere, or not in this module.
    Inlined,
}

/// Return type category (shared with the source analyser, [`crate::model::RetKind`]):
/// after resolving typedef/const/volatile/restrict/type_tag, PTR -> `Ptr`; INT named
/// `_Bool`/`bool` or with the BTF_INT_BOOL bit -> `Bool`; type id 0 -> `Void`; INT, ENUM, ENUM64
/// and anything else (struct/union by value, float, ...) -> `Int`.
pub(crate) use crate::model::RetKind;

/// Signature of a function as described by its BTF FUNC -> FUNC_PROTO.
#[derive(Debug, Clone, Copy, PartialEq, Eq, serde::Serialize)]
pub struct BtfSignature {
    /// Number of declared parameters (FUNC_PROTO vlen, not counting a trailing variadic marker).
    pub nargs: usize,
    /// Whether the prototype ends in `...` (last param with type id 0).
    pub variadic: bool,
    /// Return type category.
    pub ret: RetKind,
    /// Size in bytes of the resolved return type (0 for void or unsized types; the ELF pointer
    /// size for pointers).
    pub ret_size: u32,
    /// Whether the return value must be sign-extended: INT with BTF_INT_SIGNED, or a signed
    /// ENUM/ENUM64 (kind_flag set). Always false for Ptr, Bool and Void.
    pub ret_signed: bool,
}

/// Per-module counts (definitions in the module documentation). `func_syms`, `ftrace_sites`
/// and `btf_funcs` follow the convention of the kernel-dispatch note's table (distinct names).
#[derive(Debug, Clone, Copy, PartialEq, Eq, Default, serde::Serialize)]
pub struct BinaryCounts {
    /// Distinct names of defined `STT_FUNC` symbols, excluding `__pfx_*`, including `.cold`
    /// parts, clones and the `init_module`/`cleanup_module` aliases.
    pub func_syms: usize,
    /// Defined `STT_FUNC` symbol-table entries (no `__pfx_*`): larger than `func_syms` when a
    /// static function is out-of-lined in several object files (e.g. `_uverbs_copy_from`).
    pub func_sym_entries: usize,
    /// Entries in `__mcount_loc` (relocations of `.rela__mcount_loc`).
    pub ftrace_sites: usize,
    /// Distinct names of `BTF_KIND_FUNC` records in the module's split BTF.
    pub btf_funcs: usize,
    /// `BTF_KIND_FUNC` records in the module's split BTF (duplicated names counted each time).
    pub btf_func_records: usize,
    /// Distinct function names with at least one ftrace site inside one of their symbols
    /// (aliases such as `init_module` share their target's site, so this can exceed
    /// `ftrace_sites`).
    pub funcs_with_ftrace: usize,
    /// Distinct function names that are [`Attach::Fexit`].
    pub fexit_ok: usize,
}

// ---------------------------------------------------------------------------------------------
// Raw BTF parsing
// ---------------------------------------------------------------------------------------------

/// One parsed BTF blob (a base, or the split part of a module).
#[derive(Clone)]
struct Btf {
    big_endian: bool,
    /// Type section bytes.
    types: Vec<u8>,
    /// String section bytes (local offsets).
    strings: Vec<u8>,
    /// Offset in `types` of each record; index i has type id `first_id + i`.
    offsets: Vec<u32>,
    /// Type id of the first record (1 for a base).
    first_id: u32,
    /// String offset at which `strings` starts (0 for a base, base str_len for split BTF).
    str_base: u32,
}

/// A decoded `btf_type` header.
#[derive(Clone, Copy, Debug)]
struct TypeRec {
    name_off: u32,
    kind: u8,
    vlen: u16,
    kflag: bool,
    size_or_type: u32,
    /// Offset in the owning `Btf::types` of the kind-specific trailing data.
    extra: usize,
}

fn rd_u16(data: &[u8], off: usize, be: bool) -> Option<u16> {
    let b: [u8; 2] = data.get(off..off.checked_add(2)?)?.try_into().ok()?;
    Some(if be {
        u16::from_be_bytes(b)
    } else {
        u16::from_le_bytes(b)
    })
}

fn rd_u32(data: &[u8], off: usize, be: bool) -> Option<u32> {
    let b: [u8; 4] = data.get(off..off.checked_add(4)?)?.try_into().ok()?;
    Some(if be {
        u32::from_be_bytes(b)
    } else {
        u32::from_le_bytes(b)
    })
}

fn rd_u64(data: &[u8], off: usize, be: bool) -> Option<u64> {
    let b: [u8; 8] = data.get(off..off.checked_add(8)?)?.try_into().ok()?;
    Some(if be {
        u64::from_be_bytes(b)
    } else {
        u64::from_le_bytes(b)
    })
}

/// Size of the kind-specific data following a `btf_type`, or None for an unknown kind.
fn trailing_len(kind: u8, vlen: u16) -> Option<usize> {
    let vlen = vlen as usize;
    Some(match kind {
        KIND_INT => 4,
        KIND_PTR | KIND_FWD | KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT
        | KIND_FUNC | KIND_FLOAT | KIND_TYPE_TAG => 0,
        KIND_ARRAY => 12,
        KIND_STRUCT | KIND_UNION => vlen * 12,
        KIND_ENUM => vlen * 8,
        KIND_FUNC_PROTO => vlen * 8,
        KIND_VAR => 4,
        KIND_DATASEC => vlen * 12,
        KIND_DECL_TAG => 4,
        KIND_ENUM64 => vlen * 12,
        _ => return None,
    })
}

fn bad_header(file: &str, detail: String) -> BtfError {
    BtfError::BadHeader {
        file: file.to_string(),
        detail,
    }
}

/// Whether a BTF blob is big-endian, from its magic.
fn btf_byte_order(data: &[u8], file: &str) -> Result<bool, BtfError> {
    let magic_le = rd_u16(data, 0, false).ok_or_else(|| {
        bad_header(
            file,
            format!("blob is {} bytes, shorter than the magic", data.len()),
        )
    })?;
    if magic_le == BTF_MAGIC {
        Ok(false)
    } else if magic_le.swap_bytes() == BTF_MAGIC {
        Ok(true)
    } else {
        Err(BtfError::BadMagic {
            file: file.to_string(),
            magic: magic_le,
        })
    }
}

/// The type and string sections the header of a BTF blob points at, checked to lie within
/// the blob (and the strings within the global string offsets after `str_base`).
fn btf_sections<'d>(
    data: &'d [u8],
    file: &str,
    be: bool,
    str_base: u32,
) -> Result<(&'d [u8], &'d [u8]), BtfError> {
    if data.len() < BTF_HDR_MIN {
        return Err(bad_header(
            file,
            format!(
                "blob is {} bytes, shorter than the {BTF_HDR_MIN}-byte header",
                data.len()
            ),
        ));
    }
    let field = |off: usize| rd_u32(data, off, be).unwrap_or(0); // in bounds: len >= 24
    let hdr_len = field(4) as usize;
    let (type_off, type_len) = (field(8) as usize, field(12) as usize);
    let (str_off, str_len) = (field(16) as usize, field(20) as usize);
    if hdr_len < BTF_HDR_MIN {
        return Err(bad_header(
            file,
            format!("hdr_len {hdr_len} < {BTF_HDR_MIN}"),
        ));
    }
    let section = |name: &str, off: usize, len: usize| -> Result<&[u8], BtfError> {
        let start = hdr_len.checked_add(off);
        let end = start.and_then(|s| s.checked_add(len));
        match (start, end) {
            (Some(s), Some(e)) if e <= data.len() => Ok(&data[s..e]),
            _ => Err(bad_header(file, format!(
                "{name} section (hdr_len {hdr_len} + off {off}, len {len}) exceeds the {}-byte blob",
                data.len()
            ))),
        }
    };
    let types = section("type", type_off, type_len)?;
    let strings = section("string", str_off, str_len)?;
    if str_base.checked_add(str_len as u32).is_none() || str_len > u32::MAX as usize {
        return Err(bad_header(
            file,
            format!("string section length {str_len} too large"),
        ));
    }
    Ok((types, strings))
}

/// Walk the type records of a type section once: where each starts, checking that its kind
/// is known and its record lies within the section. Type ids count from `first_id`.
fn type_record_offsets(
    types: &[u8],
    file: &str,
    first_id: u32,
    be: bool,
) -> Result<Vec<u32>, BtfError> {
    let mut offsets = Vec::with_capacity(types.len() / 16);
    let mut off = 0usize;
    while off < types.len() {
        let type_id = first_id.saturating_add(offsets.len() as u32);
        let have = types.len() - off;
        let truncated = |kind: u8, need: usize| BtfError::TruncatedType {
            file: file.to_string(),
            offset: off,
            type_id,
            kind,
            need,
            have,
        };
        if have < BTF_TYPE_LEN {
            return Err(truncated(0, BTF_TYPE_LEN));
        }
        let info = rd_u32(types, off + 4, be).unwrap_or(0);
        let kind = ((info >> 24) & 0x1f) as u8;
        let vlen = (info & 0xffff) as u16;
        let trail = trailing_len(kind, vlen).ok_or_else(|| BtfError::UnknownKind {
            file: file.to_string(),
            offset: off,
            type_id,
            kind,
        })?;
        let need = BTF_TYPE_LEN + trail;
        if have < need {
            return Err(truncated(kind, need));
        }
        // `off` < types.len() <= u32::MAX (hdr fields are u32).
        offsets.push(off as u32);
        off += need;
    }
    Ok(offsets)
}

impl Btf {
    /// Parse a BTF blob. `first_id`/`str_base` are 1/0 for a base, and continue the base's for
    /// split BTF.
    fn parse(data: &[u8], file: &str, first_id: u32, str_base: u32) -> Result<Btf, BtfError> {
        let big_endian = btf_byte_order(data, file)?;
        let (types, strings) = btf_sections(data, file, big_endian, str_base)?;
        let offsets = type_record_offsets(types, file, first_id, big_endian)?;
        Ok(Btf {
            big_endian,
            types: types.to_vec(),
            strings: strings.to_vec(),
            offsets,
            first_id,
            str_base,
        })
    }

    /// One past the last type id described by this blob.
    fn end_id(&self) -> u32 {
        self.first_id.saturating_add(self.offsets.len() as u32)
    }

    /// One past the last string offset described by this blob.
    fn str_end(&self) -> u32 {
        self.str_base.saturating_add(self.strings.len() as u32)
    }

    /// Decode the record of a type id owned by this blob.
    fn rec(&self, id: u32) -> Option<TypeRec> {
        let idx = id.checked_sub(self.first_id)? as usize;
        let off = *self.offsets.get(idx)? as usize;
        let be = self.big_endian;
        let name_off = rd_u32(&self.types, off, be)?;
        let info = rd_u32(&self.types, off + 4, be)?;
        let size_or_type = rd_u32(&self.types, off + 8, be)?;
        Some(TypeRec {
            name_off,
            kind: ((info >> 24) & 0x1f) as u8,
            vlen: (info & 0xffff) as u16,
            kflag: info >> 31 != 0,
            size_or_type,
            extra: off + BTF_TYPE_LEN,
        })
    }

    /// The NUL-terminated string at a *global* offset owned by this blob.
    fn str_at(&self, off: u32) -> Option<&[u8]> {
        let local = off.checked_sub(self.str_base)? as usize;
        let tail = self.strings.get(local..)?;
        let end = tail.iter().position(|&b| b == 0).unwrap_or(tail.len());
        Some(&tail[..end])
    }

    fn u32_at(&self, off: usize) -> Option<u32> {
        rd_u32(&self.types, off, self.big_endian)
    }
}

/// A view resolving type ids and string offsets across a base and (optionally) a split blob.
#[derive(Clone, Copy)]
struct View<'a> {
    base: &'a Btf,
    split: Option<&'a Btf>,
    ptr_size: u32,
}

impl<'a> View<'a> {
    fn owner_of_id(&self, id: u32) -> &'a Btf {
        match self.split {
            Some(s) if id >= s.first_id => s,
            _ => self.base,
        }
    }

    fn rec(&self, id: u32) -> Option<(&'a Btf, TypeRec)> {
        let owner = self.owner_of_id(id);
        owner.rec(id).map(|r| (owner, r))
    }

    fn str_at(&self, off: u32) -> Option<&'a [u8]> {
        match self.split {
            Some(s) if off >= s.str_base => s.str_at(off),
            _ => self.base.str_at(off),
        }
    }

    /// Signature of the FUNC with type id `func_id`.
    fn signature(&self, func_id: u32) -> Result<BtfSignature, String> {
        let (_, func) = self
            .rec(func_id)
            .ok_or_else(|| format!("type id {func_id} out of range"))?;
        if func.kind != KIND_FUNC {
            return Err(format!("type id {func_id} is kind {}, not FUNC", func.kind));
        }
        let proto_id = func.size_or_type;
        let (owner, proto) = self
            .rec(proto_id)
            .ok_or_else(|| format!("FUNC_PROTO type id {proto_id} out of range"))?;
        if proto.kind != KIND_FUNC_PROTO {
            return Err(format!(
                "FUNC's type {proto_id} is kind {}, not FUNC_PROTO",
                proto.kind
            ));
        }
        let mut nargs = proto.vlen as usize;
        let mut variadic = false;
        if nargs > 0 {
            // btf_param { name_off, type }
            let last = proto.extra + (nargs - 1) * 8;
            let name_off = owner.u32_at(last).ok_or("truncated FUNC_PROTO params")?;
            let ty = owner
                .u32_at(last + 4)
                .ok_or("truncated FUNC_PROTO params")?;
            if ty == 0 && name_off == 0 {
                variadic = true;
                nargs -= 1;
            }
        }
        let (ret, ret_size, ret_signed) = self.ret_kind(proto.size_or_type)?;
        Ok(BtfSignature {
            nargs,
            variadic,
            ret,
            ret_size,
            ret_signed,
        })
    }

    /// Classify a return type id: (kind, size in bytes, signed).
    fn ret_kind(&self, mut id: u32) -> Result<(RetKind, u32, bool), String> {
        for _ in 0..MAX_RESOLVE_DEPTH {
            if id == 0 {
                return Ok((RetKind::Void, 0, false));
            }
            let (owner, t) = self
                .rec(id)
                .ok_or_else(|| format!("return type id {id} out of range"))?;
            match t.kind {
                KIND_TYPEDEF | KIND_VOLATILE | KIND_CONST | KIND_RESTRICT | KIND_TYPE_TAG => {
                    id = t.size_or_type;
                }
                KIND_PTR => return Ok((RetKind::Ptr, self.ptr_size, false)),
                KIND_INT => {
                    let enc = owner.u32_at(t.extra).ok_or("truncated INT")? >> 24;
                    let name = self.str_at(t.name_off).unwrap_or(b"");
                    if enc & INT_BOOL != 0 || name == b"_Bool" || name == b"bool" {
                        return Ok((RetKind::Bool, t.size_or_type, false));
                    }
                    return Ok((RetKind::Int, t.size_or_type, enc & INT_SIGNED != 0));
                }
                KIND_ENUM | KIND_ENUM64 => return Ok((RetKind::Int, t.size_or_type, t.kflag)),
                KIND_STRUCT | KIND_UNION | KIND_FLOAT => {
                    return Ok((RetKind::Int, t.size_or_type, false))
                }
                _ => return Ok((RetKind::Int, 0, false)),
            }
        }
        Err(format!(
            "return type chain longer than {MAX_RESOLVE_DEPTH} (cycle?)"
        ))
    }
}

// ---------------------------------------------------------------------------------------------
// Base BTF
// ---------------------------------------------------------------------------------------------

/// The kernel's base BTF (vmlinux `.BTF`): types and strings that module BTF builds on.
#[derive(Clone)]
pub struct BaseBtf {
    btf: Btf,
    ptr_size: u32,
    source: String,
}

impl fmt::Debug for BaseBtf {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.debug_struct("BaseBtf")
            .field("source", &self.source)
            .field("types", &self.type_count())
            .field("str_len", &self.str_len())
            .finish()
    }
}

impl BaseBtf {
    /// Read the `.BTF` section of a vmlinux ELF. Only the ELF headers, the section header table
    /// and the `.BTF` section are read from disk. A file that is already raw BTF (starts with the
    /// BTF magic, like `/sys/kernel/btf/vmlinux`) is accepted as well.
    pub fn from_vmlinux(path: &Path) -> Result<Self, BtfError> {
        let file_name = path.display().to_string();
        let io = |source| BtfError::Io {
            file: file_name.clone(),
            source,
        };
        let file = File::open(path).map_err(io)?;
        let cache = object::ReadCache::new(file);
        let head = object::ReadRef::read_bytes_at(&cache, 0, 4).unwrap_or(&[]);
        if head.len() >= 2 && (head[..2] == [0x9f, 0xeb] || head[..2] == [0xeb, 0x9f]) {
            drop(cache);
            let bytes = std::fs::read(path).map_err(io)?;
            return Self::parse_raw(&bytes, file_name.clone(), 8);
        }
        let kind = object::FileKind::parse(&cache).map_err(|e| BtfError::NotElf {
            file: file_name.clone(),
            detail: describe_magic(head, &e.to_string()),
        })?;
        let (data, ptr_size) = match kind {
            object::FileKind::Elf64 => (
                elf_section::<object::elf::FileHeader64<object::Endianness>>(
                    &cache, &file_name, b".BTF",
                )?,
                8,
            ),
            object::FileKind::Elf32 => (
                elf_section::<object::elf::FileHeader32<object::Endianness>>(
                    &cache, &file_name, b".BTF",
                )?,
                4,
            ),
            other => {
                return Err(BtfError::NotElf {
                    file: file_name,
                    detail: format!("detected {other:?}"),
                })
            }
        };
        Self::parse_raw(data, file_name.clone(), ptr_size)
    }

    /// Parse a raw BTF blob (e.g. the bytes of `/sys/kernel/btf/vmlinux`). Pointers are assumed
    /// to be 8 bytes.
    pub fn from_raw_btf(bytes: &[u8]) -> Result<Self, BtfError> {
        Self::parse_raw(bytes, "raw BTF".to_string(), 8)
    }

    fn parse_raw(bytes: &[u8], source: String, ptr_size: u32) -> Result<Self, BtfError> {
        let btf = Btf::parse(bytes, &source, 1, 0)?;
        Ok(BaseBtf {
            btf,
            ptr_size,
            source,
        })
    }

    /// Number of types, counting the implicit `void` (id 0): a module's split BTF starts at
    /// this type id.
    pub fn type_count(&self) -> u32 {
        self.btf.end_id()
    }

    /// Length of the base string section: split string offsets at or above it are the module's.
    pub fn str_len(&self) -> u32 {
        self.btf.str_end()
    }

    /// Where the base was read from.
    pub fn source(&self) -> &str {
        &self.source
    }

    fn view(&self) -> View<'_> {
        View {
            base: &self.btf,
            split: None,
            ptr_size: self.ptr_size,
        }
    }

    /// Signature of a vmlinux function by name (linear scan over all types; first FUNC of that
    /// name). `None` if there is no such FUNC or its BTF is malformed.
    pub fn btf_signature(&self, function: &str) -> Option<BtfSignature> {
        let view = self.view();
        let want = function.as_bytes();
        (self.btf.first_id..self.btf.end_id())
            .filter(|&id| {
                self.btf
                    .rec(id)
                    .is_some_and(|t| t.kind == KIND_FUNC && view.str_at(t.name_off) == Some(want))
            })
            .find_map(|id| view.signature(id).ok())
    }
}

/// Read one section of an ELF file through any `ReadRef` (a `ReadCache` for big files).
fn elf_section<'data, Elf: FileHeader<Endian = object::Endianness>>(
    data: impl object::ReadRef<'data>,
    file: &str,
    name: &[u8],
) -> Result<&'data [u8], BtfError> {
    let bad = |e: object::read::Error| BtfError::BadElf {
        file: file.to_string(),
        detail: e.to_string(),
    };
    let header = Elf::parse(data).map_err(bad)?;
    let endian = header.endian().map_err(bad)?;
    let sections = header.sections(endian, data).map_err(bad)?;
    let (_, section) =
        sections
            .section_by_name(endian, name)
            .ok_or_else(|| BtfError::NoBtfSection {
                file: file.to_string(),
            })?;
    section.data(endian, data).map_err(bad)
}

/// Human-readable guess of what a non-ELF file is.
fn describe_magic(head: &[u8], fallback: &str) -> String {
    if head.starts_with(&[0xfd, b'7', b'z', b'X']) {
        "xz-compressed; decompress it first (e.g. `xz -dk file.ko.xz`)".to_string()
    } else if head.starts_with(&[0x28, 0xb5, 0x2f, 0xfd]) {
        "zstd-compressed; decompress it first (e.g. `zstd -d file.ko.zst`)".to_string()
    } else if head.starts_with(&[0x1f, 0x8b]) {
        "gzip-compressed; decompress it first".to_string()
    } else if head.is_empty() {
        "empty file".to_string()
    } else {
        fallback.to_string()
    }
}

// ---------------------------------------------------------------------------------------------
// Module binary
// ---------------------------------------------------------------------------------------------

/// What is known about one function name's ELF symbols.
#[derive(Debug, Clone, Copy, Default)]
struct SymInfo {
    /// Number of defined STT_FUNC symbols with this name.
    count: usize,
    /// Whether any of them contains an ftrace site.
    has_ftrace: bool,
}
/// The FUNC records of a module's split BTF: signatures by name (first wins) and the number
/// of records.
fn split_btf_funcs(
    btf_data: &[u8],
    file: &str,
    base: &BaseBtf,
    ptr_size: u32,
) -> Result<(HashMap<String, BtfSignature>, usize), BtfError> {
    let split = Btf::parse(btf_data, file, base.type_count(), base.str_len())?;
    if split.big_endian != base.btf.big_endian {
        return Err(BtfError::BaseMismatch {
            file: file.to_string(),
            detail: "byte order differs from the base BTF".to_string(),
        });
    }
    let view = View {
        base: &base.btf,
        split: Some(&split),
        ptr_size,
    };
    let mut btf_funcs = HashMap::new();
    let mut n_btf_funcs = 0usize;
    for id in split.first_id..split.end_id() {
        let Some(t) = split.rec(id) else { continue };
        if t.kind != KIND_FUNC {
            continue;
        }
        n_btf_funcs += 1;
        let fname = view
            .str_at(t.name_off)
            .ok_or_else(|| BtfError::BaseMismatch {
                file: file.to_string(),
                detail: format!(
                    "FUNC type id {id} has name offset {} outside both string sections",
                    t.name_off
                ),
            })?;
        let fname = String::from_utf8_lossy(fname).into_owned();
        let sig = view.signature(id).map_err(|detail| BtfError::BadFunc {
            file: file.to_string(),
            function: fname.clone(),
            detail,
        })?;
        btf_funcs.entry(fname).or_insert(sig);
    }
    Ok((btf_funcs, n_btf_funcs))
}

/// Parse an ELF file, saying what the bytes are when they are not ELF.
fn open_elf<'d>(bytes: &'d [u8], file: &str) -> Result<object::File<'d>, BtfError> {
    let head = bytes.get(..4).unwrap_or(bytes);
    match object::FileKind::parse(bytes) {
        Ok(object::FileKind::Elf32 | object::FileKind::Elf64) => {}
        Ok(other) => {
            return Err(BtfError::NotElf {
                file: file.to_string(),
                detail: format!("detected {other:?}"),
            })
        }
        Err(e) => {
            return Err(BtfError::NotElf {
                file: file.to_string(),
                detail: describe_magic(head, &e.to_string()),
            })
        }
    }
    object::File::parse(bytes).map_err(|e| BtfError::BadElf {
        file: file.to_string(),
        detail: e.to_string(),
    })
}

/// The ftrace sites of an ELF object: the addresses `__mcount_loc` relocates, by section.
struct FtraceSites {
    /// Sorted addresses per section.
    by_section: HashMap<SectionIndex, Vec<u64>>,
    /// Every site, attributed to a section or not.
    count: usize,
}

impl FtraceSites {
    fn read(elf: &object::File, ptr_size: u32) -> Self {
        let mut sites = FtraceSites {
            by_section: HashMap::new(),
            count: 0,
        };
        let Some(mcount) = elf.section_by_name("__mcount_loc") else {
            return sites;
        };
        let big_endian = !elf.is_little_endian();
        let mdata = mcount.data().unwrap_or(&[]);
        let mut any_reloc = false;
        for (offset, reloc) in mcount.relocations() {
            any_reloc = true;
            sites.count += 1;
            let RelocationTarget::Symbol(sym_idx) = reloc.target() else {
                continue;
            };
            let Ok(sym) = elf.symbol_by_index(sym_idx) else {
                continue;
            };
            let Some(sec) = sym.section_index() else {
                continue;
            };
            let addend = if reloc.has_implicit_addend() {
                let off = usize::try_from(offset).unwrap_or(usize::MAX);
                let implicit = match reloc.size() {
                    64 => rd_u64(mdata, off, big_endian),
                    32 => rd_u32(mdata, off, big_endian).map(|v| v as i32 as i64 as u64),
                    _ => None,
                };
                implicit.unwrap_or(0) as i64
            } else {
                reloc.addend()
            };
            let addr = sym.address().wrapping_add(addend as u64);
            sites.by_section.entry(sec).or_default().push(addr);
        }
        if !any_reloc {
            // Linked images (not relocatable): entries are plain addresses, unattributable
            // to sections here; count them only.
            sites.count = mdata.len() / ptr_size as usize;
        }
        for v in sites.by_section.values_mut() {
            v.sort_unstable();
        }
        sites
    }

    /// Whether a site lies in `[start, end)` of section `sec`.
    fn within(&self, sec: SectionIndex, start: u64, end: u64) -> bool {
        self.by_section.get(&sec).is_some_and(|v| {
            let i = v.partition_point(|&a| a < start);
            v.get(i).is_some_and(|&a| a < end)
        })
    }
}

/// The defined function symbols of an ELF object by name (no `__pfx_*` padding symbols),
/// whether any of a name's symbols holds an ftrace site, and the number of symbols.
fn function_symbols(elf: &object::File, sites: &FtraceSites) -> (BTreeMap<String, SymInfo>, usize) {
    let mut symbols: BTreeMap<String, SymInfo> = BTreeMap::new();
    let mut n_sym_entries = 0usize;
    for sym in elf.symbols() {
        let SymbolFlags::Elf { st_info, .. } = sym.flags() else {
            continue;
        };
        if st_info & 0xf != ELF_STT_FUNC {
            continue;
        }
        let Some(sec) = sym.section_index() else {
            continue;
        };
        let Ok(sname) = sym.name() else { continue };
        if sname.is_empty() || sname.starts_with("__pfx_") {
            continue;
        }
        n_sym_entries += 1;
        let start = sym.address();
        let end = start.saturating_add(sym.size().max(1));
        let e = symbols.entry(sname.to_string()).or_default();
        e.count += 1;
        e.has_ftrace |= sites.within(sec, start, end);
    }
    (symbols, n_sym_entries)
}

/// One kernel module `.ko`: its function symbols, ftrace sites and BTF FUNC signatures.
/// Self-contained after [`ModuleBinary::load`] (it does not borrow the base).
#[derive(Debug, Clone)]
pub struct ModuleBinary {
    /// Module name: the file name without `.ko`.
    pub name: String,
    /// Defined STT_FUNC symbols (no `__pfx_*`), by name.
    symbols: BTreeMap<String, SymInfo>,
    /// BTF FUNCs of the module's split BTF, by name (first one wins on duplicates).
    btf_funcs: HashMap<String, BtfSignature>,
    /// Whether the module has a `.BTF` section at all: kernels before 5.11 (5.10) and
    /// out-of-tree builds (DKMS, vendor OFED) ship modules without one, whose functions are
    /// then `NoBtf` (a kprobe can still reach them; fexit cannot).
    has_btf: bool,
    counts: BinaryCounts,
}

impl ModuleBinary {
    /// Load a module `.ko` (uncompressed ELF relocatable) against the kernel's base BTF.
    pub fn load(path: &Path, base: &BaseBtf) -> Result<Self, BtfError> {
        let file = path.display().to_string();
        let bytes = std::fs::read(path).map_err(|source| BtfError::Io {
            file: file.clone(),
            source,
        })?;
        let name = path
            .file_name()
            .map(|n| n.to_string_lossy().into_owned())
            .unwrap_or_default();
        let name = name.strip_suffix(".ko").unwrap_or(&name).to_string();
        Self::parse(&bytes, &file, name, base)
    }

    /// Like [`ModuleBinary::load`], on bytes already in memory; `file` names them in errors.
    pub fn parse(bytes: &[u8], file: &str, name: String, base: &BaseBtf) -> Result<Self, BtfError> {
        let elf = open_elf(bytes, file)?;
        let ptr_size = if elf.is_64() { 8 } else { 4 };
        let (btf_funcs, n_btf_funcs, has_btf) = match elf.section_by_name(".BTF") {
            Some(btf_section) => {
                let btf_data = btf_section.data().map_err(|e| BtfError::BadElf {
                    file: file.to_string(),
                    detail: format!(".BTF: {e}"),
                })?;
                let (funcs, n) = split_btf_funcs(btf_data, file, base, ptr_size)?;
                (funcs, n, true)
            }
            // A kernel module (it has `.modinfo`) built without BTF: its symbols and ftrace
            // sites still say what exists; any other ELF without .BTF is not a module.
            None if elf.section_by_name(".modinfo").is_some() => (HashMap::new(), 0, false),
            None => {
                return Err(BtfError::NoBtfSection {
                    file: file.to_string(),
                })
            }
        };
        let sites = FtraceSites::read(&elf, ptr_size);
        let (symbols, n_sym_entries) = function_symbols(&elf, &sites);
        let mut m = ModuleBinary {
            name,
            counts: BinaryCounts {
                func_syms: symbols.len(),
                func_sym_entries: n_sym_entries,
                ftrace_sites: sites.count,
                btf_funcs: btf_funcs.len(),
                btf_func_records: n_btf_funcs,
                funcs_with_ftrace: symbols.values().filter(|s| s.has_ftrace).count(),
                fexit_ok: 0,
            },
            symbols,
            btf_funcs,
            has_btf,
        };
        m.counts.fexit_ok = m
            .symbols
            .keys()
            .filter(|n| m.attach(n) == Attach::Fexit)
            .count();
        Ok(m)
    }

    /// A module known only by its split BTF, as a running kernel exposes it in
    /// `/sys/kernel/btf/<module>` (no symbols, no `__mcount_loc`): every BTF FUNC is taken as
    /// a traceable symbol. Clones and `notrace` functions cannot be told apart there, so the
    /// verdicts are `fexit` (a BTF FUNC) or `inlined` (none).
    pub fn from_raw_split(
        bytes: &[u8],
        file: &str,
        name: String,
        base: &BaseBtf,
    ) -> Result<Self, BtfError> {
        let ptr_size = 8;
        let (btf_funcs, n_btf_funcs) = split_btf_funcs(bytes, file, base, ptr_size)?;
        let symbols: BTreeMap<String, SymInfo> = btf_funcs
            .keys()
            .map(|f| {
                (
                    f.clone(),
                    SymInfo {
                        count: 1,
                        has_ftrace: true,
                    },
                )
            })
            .collect();
        let n = symbols.len();
        Ok(ModuleBinary {
            name,
            counts: BinaryCounts {
                func_syms: n,
                func_sym_entries: n,
                ftrace_sites: n,
                btf_funcs: btf_funcs.len(),
                btf_func_records: n_btf_funcs,
                funcs_with_ftrace: n,
                fexit_ok: n,
            },
            symbols,
            btf_funcs,
            has_btf: true,
        })
    }

    /// Whether the module has a `.BTF` section (false: 5.10's modules, out-of-tree builds).
    pub fn has_btf(&self) -> bool {
        self.has_btf
    }

    /// Whether (and how) `function` can be traced with fexit in this module.
    pub fn attach(&self, function: &str) -> Attach {
        if let Some(info) = self.symbols.get(function) {
            if !self.btf_funcs.contains_key(function) {
                return Attach::NoBtf;
            }
            if !info.has_ftrace {
                return Attach::NoFtrace;
            }
            return Attach::Fexit;
        }
        match self.clones(function).into_iter().next() {
            Some(symbol) => Attach::CloneOnly { symbol },
            None => Attach::Inlined,
        }
    }

    /// Compiler clones of `function` (`function.isra.N`, `.constprop.N`, `.part.N` and
    /// combinations), with any `.cold[.N]` part stripped, deduplicated, sorted. May be non-empty
    /// even when the exact symbol exists (then fexit on the plain name misses calls to clones).
    pub fn clones(&self, function: &str) -> Vec<String> {
        let prefix = format!("{function}.");
        let mut out: Vec<String> = self
            .symbols
            .range(prefix.clone()..)
            .take_while(|(k, _)| k.starts_with(&prefix))
            .filter_map(|(k, _)| clone_base(&k[prefix.len()..]).map(|s| format!("{prefix}{s}")))
            .collect();
        out.sort();
        out.dedup();
        out
    }

    /// BTF signature of `function` if the module's BTF has a FUNC of that name.
    pub fn btf_signature(&self, function: &str) -> Option<BtfSignature> {
        self.btf_funcs.get(function).copied()
    }

    /// Module counts (see [`BinaryCounts`]).
    pub fn counts(&self) -> BinaryCounts {
        self.counts
    }

    /// Names of all defined FUNC symbols (no `__pfx_*`; clones and `.cold` parts included), sorted.
    pub fn function_names(&self) -> impl Iterator<Item = &str> {
        self.symbols.keys().map(String::as_str)
    }

    /// Names of all BTF FUNCs of the module (unordered).
    pub fn btf_function_names(&self) -> impl Iterator<Item = &str> {
        self.btf_funcs.keys().map(String::as_str)
    }

    /// Number of defined FUNC symbols named exactly `function` (more than 1: static functions
    /// of the same name in several object files of the module).
    pub fn symbol_count(&self, function: &str) -> usize {
        self.symbols.get(function).map_or(0, |s| s.count)
    }
}

/// Given the part of a symbol name after `function.`, return the clone suffix with any `.cold`
/// part removed, if it is made only of `isra`/`constprop`/`part`/`cold` tokens (each optionally
/// followed by a number) and contains at least one of `isra`/`constprop`/`part`.
fn clone_base(suffix: &str) -> Option<&str> {
    let mut saw_clone = false;
    let mut keep_end = None; // byte length of the suffix before the first `cold`
    let mut pos = 0usize;
    let mut prev_word = false;
    for tok in suffix.split('.') {
        let is_num = !tok.is_empty() && tok.bytes().all(|b| b.is_ascii_digit());
        match tok {
            "isra" | "constprop" | "part" => {
                if keep_end.is_none() {
                    saw_clone = true;
                }
                prev_word = true;
            }
            "cold" => {
                if keep_end.is_none() {
                    keep_end = Some(pos.saturating_sub(1));
                }
                prev_word = true;
            }
            _ if is_num && prev_word => prev_word = false,
            _ => return None,
        }
        pos += tok.len() + 1;
    }
    if !saw_clone {
        return None;
    }
    match keep_end {
        Some(end) => suffix.get(..end),
        None => Some(suffix),
    }
}

// ---------------------------------------------------------------------------------------------
// Tests on synthetic BTF blobs
// ---------------------------------------------------------------------------------------------

#[cfg(test)]
mod tests {
    use super::*;

    /// Minimal BTF writer for tests.
    struct Builder {
        types: Vec<u8>,
        strings: Vec<u8>,
        str_base: u32,
        next_id: u32,
    }

    impl Builder {
        fn new(first_id: u32, str_base: u32) -> Self {
            // Base string sections start with the empty string; split ones need not.
            let strings = if str_base == 0 { vec![0] } else { vec![] };
            Builder {
                types: vec![],
                strings,
                str_base,
                next_id: first_id,
            }
        }
        fn s(&mut self, s: &str) -> u32 {
            let off = self.str_base + self.strings.len() as u32;
            self.strings.extend_from_slice(s.as_bytes());
            self.strings.push(0);
            off
        }
        fn ty(
            &mut self,
            name: u32,
            kind: u8,
            vlen: u16,
            kflag: bool,
            st: u32,
            extra: &[u32],
        ) -> u32 {
            let info = ((kind as u32) << 24) | vlen as u32 | if kflag { 1 << 31 } else { 0 };
            for w in [name, info, st].iter().chain(extra) {
                self.types.extend_from_slice(&w.to_le_bytes());
            }
            let id = self.next_id;
            self.next_id += 1;
            id
        }
        fn blob(&self) -> Vec<u8> {
            let mut out = vec![];
            out.extend_from_slice(&BTF_MAGIC.to_le_bytes());
            out.push(1);
            out.push(0);
            for w in [
                24u32,
                0,
                self.types.len() as u32,
                self.types.len() as u32,
                self.strings.len() as u32,
            ] {
                out.extend_from_slice(&w.to_le_bytes());
            }
            out.extend_from_slice(&self.types);
            out.extend_from_slice(&self.strings);
            out
        }
    }

    /// Base: 1 int, 2 _Bool, 3 char*, 4 typedef s32=int, 5 const s32, 6 proto(int,...)->const s32,
    /// 7 FUNC printk, 8 signed enum(4), 9 unsigned long.
    fn base() -> (Builder, Vec<u8>) {
        let mut b = Builder::new(1, 0);
        let n_int = b.s("int");
        let int = b.ty(n_int, KIND_INT, 0, false, 4, &[(INT_SIGNED << 24) | 32]);
        let n_bool = b.s("_Bool");
        b.ty(n_bool, KIND_INT, 0, false, 1, &[8]);
        b.ty(0, KIND_PTR, 0, false, 1, &[]);
        let n_s32 = b.s("s32");
        let s32 = b.ty(n_s32, KIND_TYPEDEF, 0, false, int, &[]);
        let cs32 = b.ty(0, KIND_CONST, 0, false, s32, &[]);
        let n_fmt = b.s("fmt");
        let proto = b.ty(0, KIND_FUNC_PROTO, 2, false, cs32, &[n_fmt, 3, 0, 0]);
        let n_printk = b.s("printk");
        b.ty(n_printk, KIND_FUNC, 0, false, proto, &[]);
        let n_e = b.s("e");
        let n_a = b.s("A");
        b.ty(n_e, KIND_ENUM, 1, true, 4, &[n_a, (-1i32) as u32]);
        let n_ul = b.s("long unsigned int");
        b.ty(n_ul, KIND_INT, 0, false, 8, &[64]);
        let blob = b.blob();
        (b, blob)
    }

    #[test]
    fn base_parse_and_signature() {
        let (_, blob) = base();
        let base = BaseBtf::from_raw_btf(&blob).unwrap();
        assert_eq!(base.type_count(), 10);
        let sig = base.btf_signature("printk").unwrap();
        assert_eq!(
            sig,
            BtfSignature {
                nargs: 1,
                variadic: true,
                ret: RetKind::Int,
                ret_size: 4,
                ret_signed: true
            }
        );
        assert!(base.btf_signature("nope").is_none());
    }

    #[test]
    fn split_ids_and_strings_continue_after_base() {
        let (_, blob) = base();
        let base = BaseBtf::from_raw_btf(&blob).unwrap();
        let mut m = Builder::new(base.type_count(), base.str_len());
        // 10: ptr to base char* ; 11: proto(void) -> _Bool ; 12 FUNC f_bool
        let p = m.ty(0, KIND_PTR, 0, false, 3, &[]);
        assert_eq!(p, 10);
        let proto_bool = m.ty(0, KIND_FUNC_PROTO, 0, false, 2, &[]);
        let n = m.s("f_bool");
        m.ty(n, KIND_FUNC, 0, false, proto_bool, &[]);
        // proto(a: ptr, b: enum e) -> ptr ; FUNC f_ptr
        let na = m.s("a");
        let nb = m.s("b");
        let proto_ptr = m.ty(0, KIND_FUNC_PROTO, 2, false, p, &[na, p, nb, 8]);
        let n = m.s("f_ptr");
        m.ty(n, KIND_FUNC, 0, false, proto_ptr, &[]);
        // proto() -> void ; FUNC f_void ; proto -> enum e (signed) ; proto -> unsigned long
        let pv = m.ty(0, KIND_FUNC_PROTO, 0, false, 0, &[]);
        let n = m.s("f_void");
        m.ty(n, KIND_FUNC, 0, false, pv, &[]);
        let pe = m.ty(0, KIND_FUNC_PROTO, 0, false, 8, &[]);
        let n = m.s("f_enum");
        m.ty(n, KIND_FUNC, 0, false, pe, &[]);
        let pu = m.ty(0, KIND_FUNC_PROTO, 0, false, 9, &[]);
        let n = m.s("f_ulong");
        m.ty(n, KIND_FUNC, 0, false, pu, &[]);
        let blob = m.blob();
        let split = Btf::parse(&blob, "t", base.type_count(), base.str_len()).unwrap();
        let view = View {
            base: &base.btf,
            split: Some(&split),
            ptr_size: 8,
        };
        let find = |name: &str| {
            (split.first_id..split.end_id())
                .find(|&id| {
                    let t = split.rec(id).unwrap();
                    t.kind == KIND_FUNC && view.str_at(t.name_off) == Some(name.as_bytes())
                })
                .map(|id| view.signature(id).unwrap())
                .unwrap()
        };
        assert_eq!(find("f_bool").ret, RetKind::Bool);
        assert_eq!(find("f_bool").nargs, 0);
        let fp = find("f_ptr");
        assert_eq!(
            (fp.nargs, fp.ret, fp.ret_size, fp.variadic),
            (2, RetKind::Ptr, 8, false)
        );
        assert_eq!(find("f_void").ret, RetKind::Void);
        let fe = find("f_enum");
        assert_eq!(
            (fe.ret, fe.ret_size, fe.ret_signed),
            (RetKind::Int, 4, true)
        );
        let fu = find("f_ulong");
        assert_eq!(
            (fu.ret, fu.ret_size, fu.ret_signed),
            (RetKind::Int, 8, false)
        );
        // base strings are still reachable through the split view
        assert_eq!(view.str_at(1), Some(&b"int"[..]));
    }

    #[test]
    fn malformed_blobs_error_without_panicking() {
        let (_, blob) = base();
        for len in 0..blob.len() {
            let _ = BaseBtf::from_raw_btf(&blob[..len]);
        }
        // Every single-byte corruption must not panic either.
        for i in 0..blob.len() {
            for v in [0u8, 0xff, 0x13, 0x80] {
                let mut b = blob.clone();
                b[i] = v;
                if let Ok(base) = BaseBtf::from_raw_btf(&b) {
                    let _ = base.btf_signature("printk");
                }
            }
        }
        assert!(matches!(
            BaseBtf::from_raw_btf(b"hello world, this is not btf"),
            Err(BtfError::BadMagic { .. })
        ));
        // Truncate the type section length so the last record is cut: header says types are
        // shorter than they are.
        let mut b = blob.clone();
        let tlen = u32::from_le_bytes(b[12..16].try_into().unwrap());
        b[12..16].copy_from_slice(&(tlen - 4).to_le_bytes());
        match BaseBtf::from_raw_btf(&b) {
            Err(BtfError::TruncatedType { offset, .. }) => assert!(offset > 0),
            other => panic!("expected TruncatedType, got {other:?}"),
        }
        // Unknown kind.
        let mut b = blob.clone();
        b[24 + 7] = 30; // kind byte of the first record's info (LE: byte 3)
        assert!(matches!(
            BaseBtf::from_raw_btf(&b),
            Err(BtfError::UnknownKind { offset: 0, .. })
        ));
    }

    #[test]
    fn big_endian_blob() {
        // One INT "int" in big-endian.
        let mut out = vec![0xeb, 0x9f, 1, 0];
        let types: Vec<u32> = vec![1, (KIND_INT as u32) << 24, 4, (INT_SIGNED << 24) | 32];
        let strings = b"\0int\0";
        for w in [24u32, 0, 16, 16, strings.len() as u32] {
            out.extend_from_slice(&w.to_be_bytes());
        }
        for w in types {
            out.extend_from_slice(&w.to_be_bytes());
        }
        out.extend_from_slice(strings);
        let base = BaseBtf::from_raw_btf(&out).unwrap();
        assert_eq!(base.type_count(), 2);
        assert!(base.btf.big_endian);
        assert_eq!(base.view().ret_kind(1).unwrap(), (RetKind::Int, 4, true));
    }

    #[test]
    fn clone_suffixes() {
        assert_eq!(clone_base("isra.0"), Some("isra.0"));
        assert_eq!(clone_base("constprop.3"), Some("constprop.3"));
        assert_eq!(clone_base("part.0"), Some("part.0"));
        assert_eq!(clone_base("isra.0.cold"), Some("isra.0"));
        assert_eq!(clone_base("constprop.0.isra.0"), Some("constprop.0.isra.0"));
        assert_eq!(clone_base("cold"), None);
        assert_eq!(clone_base("cold.1"), None);
        assert_eq!(clone_base("isra"), Some("isra"));
        assert_eq!(clone_base("0"), None);
        assert_eq!(clone_base("llvm.123"), None);
        assert_eq!(clone_base("part.0.cold.2"), Some("part.0"));
    }
}
