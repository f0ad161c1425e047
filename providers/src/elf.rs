//! Finding a static function of a stripped shared library: its bytes in the static archive,
//! the archive's relocations as wildcards, one match in the library's code.

use object::read::archive::ArchiveFile;
use object::{Object, ObjectSection, ObjectSymbol, SectionKind, SymbolKind, SymbolSection};

/// The one function of a provider's completion path that runs only for error completions,
/// and where its completion (the 64-byte CQE) is.
#[derive(Debug, Clone, Copy, PartialEq, Eq)]
pub struct ErrorPath {
    /// The vendor, as the sets name it.
    pub provider: &'static str,
    /// The shared library's file name up to its version (`libmlx5.so.1.24.44.0`).
    pub library_prefix: &'static str,
    /// The static archive in the development package.
    pub archive: &'static str,
    pub symbol: &'static str,
    /// Which argument (1-based) points at the CQE.
    pub cqe_arg: u8,
}

/// libmlx5: `static void dump_cqe(struct mlx5_context *mctx, void *buf)` in providers/mlx5/cq.c,
/// called by the inlined error branch of every poll variant for an error completion other
/// than a flush, a retry exceeded or an ODP fault; the same signature from rdma-core 33 to 65.
pub const MLX5_ERROR_PATH: ErrorPath = ErrorPath {
    provider: "mlx5",
    library_prefix: "libmlx5.so.1.",
    archive: "libmlx5.a",
    symbol: "dump_cqe",
    cqe_arg: 2,
};

/// Where the error-path function is in one build of the library.
#[derive(Debug, Clone, PartialEq, Eq)]
pub struct Resolved {
    pub build_id: String,
    /// File offset of the function's first byte (what a uprobe attaches at).
    pub offset: u64,
    /// The archive member the bytes came from, the bytes compared, how many were wildcards.
    pub member: String,
    pub bytes: usize,
    pub wildcards: usize,
    /// Direct calls (`call rel32`) in the library's code that land on the function: the
    /// inlined error branches of the poll variants; a match no call reaches is refused.
    pub callers: usize,
}

#[derive(Debug, thiserror::Error, PartialEq, Eq)]
pub enum ResolveError {
    #[error("not an ELF file: {0}")]
    NotElf(String),
    #[error("no GNU build-id note: an offset is kept per build-id")]
    NoBuildId,
    #[error("not an ar archive: {0}")]
    NotArchive(String),
    #[error("the archive has no function `{0}` (a local text symbol with a size)")]
    SymbolMissing(String),
    #[error("the archive defines `{symbol}` in {members} members; expected one")]
    SymbolAmbiguous { symbol: String, members: usize },
    #[error("build-id {build_id}: the {bytes} bytes of `{symbol}` occur nowhere in the library's code (another build than the archive's)")]
    NoMatch {
        build_id: String,
        symbol: String,
        bytes: usize,
    },
    #[error("build-id {build_id}: `{symbol}` matched at file offset {offset:#x}, but no call in the library's code reaches it")]
    NoCaller {
        build_id: String,
        symbol: String,
        offset: u64,
    },
    #[error("build-id {build_id}: the bytes of `{symbol}` occur {count} times in the library's code; expected once")]
    Ambiguous {
        build_id: String,
        symbol: String,
        count: usize,
    },
}

/// The GNU build-id of an ELF file, lowercase hex.
pub fn build_id(elf: &[u8]) -> Result<String, ResolveError> {
    build_id_of(&parse_elf(elf)?)
}

fn parse_elf(elf: &[u8]) -> Result<object::File<'_>, ResolveError> {
    object::File::parse(elf).map_err(|e| ResolveError::NotElf(e.to_string()))
}

fn build_id_of(file: &object::File<'_>) -> Result<String, ResolveError> {
    match file.build_id() {
        Ok(Some(id)) if !id.is_empty() => Ok(hex(id)),
        _ => Err(ResolveError::NoBuildId),
    }
}

/// The file offset of `path.symbol` in `library`, found through the same function in
/// `archive` (both of one rdma-core build).
pub fn resolve(library: &[u8], archive: &[u8], path: &ErrorPath) -> Result<Resolved, ResolveError> {
    // the library parsed once: its build-id, the match and the calls that reach it
    let file = parse_elf(library)?;
    let build_id = build_id_of(&file)?;
    let (member, pattern) = function_pattern(archive, path.symbol)?;
    let offsets = occurrences(&file, library, &pattern);
    match offsets.as_slice() {
        [offset] => match callers(&file, library, *offset) {
            0 => Err(ResolveError::NoCaller {
                build_id,
                symbol: path.symbol.to_string(),
                offset: *offset,
            }),
            callers => Ok(Resolved {
                build_id,
                offset: *offset,
                member,
                bytes: pattern.len(),
                wildcards: pattern.iter().filter(|b| b.is_none()).count(),
                callers,
            }),
        },
        [] => Err(ResolveError::NoMatch {
            build_id,
            symbol: path.symbol.to_string(),
            bytes: pattern.len(),
        }),
        many => Err(ResolveError::Ambiguous {
            build_id,
            symbol: path.symbol.to_string(),
            count: many.len(),
        }),
    }
}

/// One byte of a function as the archive has it: `None` where a relocation will write the
/// linked address (different in the shared library).
type Pattern = Vec<Option<u8>>;

fn function_pattern(archive: &[u8], symbol: &str) -> Result<(String, Pattern), ResolveError> {
    let ar = ArchiveFile::parse(archive).map_err(|e| ResolveError::NotArchive(e.to_string()))?;
    let mut found = Vec::new();
    for member in ar.members() {
        let member = member.map_err(|e| ResolveError::NotArchive(e.to_string()))?;
        let Ok(data) = member.data(archive) else {
            continue;
        };
        // Members that are not objects (a symbol index) are no place for a function.
        let Ok(obj) = object::File::parse(data) else {
            continue;
        };
        if let Some(pattern) = symbol_pattern(&obj, symbol) {
            found.push((String::from_utf8_lossy(member.name()).into_owned(), pattern));
        }
    }
    match found.len() {
        0 => Err(ResolveError::SymbolMissing(symbol.to_string())),
        1 => Ok(found.remove(0)),
        members => Err(ResolveError::SymbolAmbiguous {
            symbol: symbol.to_string(),
            members,
        }),
    }
}

fn symbol_pattern(obj: &object::File<'_>, symbol: &str) -> Option<Pattern> {
    let sym = obj
        .symbols()
        .find(|s| s.name() == Ok(symbol) && s.kind() == SymbolKind::Text && s.size() > 0)?;
    let SymbolSection::Section(index) = sym.section() else {
        return None;
    };
    let section = obj.section_by_index(index).ok()?;
    let data = section.data().ok()?;
    // In a relocatable object a symbol's address is its offset in its section.
    let start = usize::try_from(sym.address()).ok()?;
    let end = start.checked_add(usize::try_from(sym.size()).ok()?)?;
    let mut pattern: Pattern = data.get(start..end)?.iter().copied().map(Some).collect();
    for (offset, reloc) in section.relocations() {
        let width = match reloc.size() {
            0 => 8,
            bits => usize::from(bits / 8),
        };
        let Ok(offset) = usize::try_from(offset) else {
            continue;
        };
        for at in offset..offset + width {
            if (start..end).contains(&at) {
                pattern[at - start] = None;
            }
        }
    }
    Some(pattern)
}

/// Every file offset in the library's code sections where the pattern matches.
fn occurrences(file: &object::File<'_>, library: &[u8], pattern: &Pattern) -> Vec<u64> {
    let mut offsets = Vec::new();
    for section in file.sections().filter(|s| s.kind() == SectionKind::Text) {
        let Some((file_offset, size)) = section.file_range() else {
            continue;
        };
        let (Ok(from), Ok(len)) = (usize::try_from(file_offset), usize::try_from(size)) else {
            continue;
        };
        let Some(code) = library.get(from..from.saturating_add(len)) else {
            continue;
        };
        if code.len() < pattern.len() {
            continue;
        }
        for at in 0..=code.len() - pattern.len() {
            let window = &code[at..at + pattern.len()];
            if window
                .iter()
                .zip(pattern)
                .all(|(b, p)| p.is_none_or(|p| p == *b))
            {
                offsets.push(file_offset + at as u64);
            }
        }
    }
    offsets
}

/// How many `call rel32` (0xe8) in the code sections target the function at file offset
/// `target` (addresses compared as the loader maps them).
fn callers(file: &object::File<'_>, library: &[u8], target: u64) -> usize {
    let code: Vec<_> = file
        .sections()
        .filter(|s| s.kind() == SectionKind::Text)
        .filter_map(|s| Some((s.address(), s.file_range()?)))
        .collect();
    // The function's address: its file offset moved by its section's load bias.
    let Some(target_addr) = code
        .iter()
        .find(|(_, (off, size))| (*off..off + size).contains(&target))
        .map(|(addr, (off, _))| addr + (target - off))
    else {
        return 0;
    };
    let mut count = 0;
    for (addr, (off, size)) in &code {
        let (Ok(from), Ok(len)) = (usize::try_from(*off), usize::try_from(*size)) else {
            continue;
        };
        let Some(bytes) = library.get(from..from.saturating_add(len)) else {
            continue;
        };
        for (at, window) in bytes.windows(5).enumerate() {
            if window[0] != 0xe8 {
                continue;
            }
            let rel = i32::from_le_bytes([window[1], window[2], window[3], window[4]]);
            let next = addr + at as u64 + 5;
            if next.wrapping_add_signed(i64::from(rel)) == target_addr {
                count += 1;
            }
        }
    }
    count
}

fn hex(bytes: &[u8]) -> String {
    bytes.iter().map(|b| format!("{b:02x}")).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_wildcard_matches_any_byte_and_a_fixed_byte_only_itself() {
        let pattern: Pattern = vec![Some(0x55), None, Some(0xc3)];
        let window_ok = [0x55u8, 0x99, 0xc3];
        let window_bad = [0x55u8, 0x99, 0xc2];
        let matches = |w: &[u8]| {
            w.iter()
                .zip(&pattern)
                .all(|(b, p)| p.is_none_or(|p| p == *b))
        };
        assert!(matches(&window_ok));
        assert!(!matches(&window_bad));
    }

    #[test]
    fn garbage_is_named_not_panicked_on() {
        assert!(matches!(
            build_id(b"not an elf"),
            Err(ResolveError::NotElf(_))
        ));
        assert!(matches!(
            function_pattern(b"not an archive", "dump_cqe"),
            Err(ResolveError::NotArchive(_))
        ));
    }
}
