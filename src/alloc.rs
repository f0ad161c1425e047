//! The process's allocator: the C library's until [`use_mimalloc`] switches what is allocated
//! after it to mimalloc; every block is freed and resized by the allocator that made it.
//!
//! Why two: the commands that read a kernel tree allocate a string or a vector per function,
//! parameter and call of every file on every thread, and glibc's malloc (arenas, locks, free
//! lists) was about a twentieth of a cold `graph`'s per-file work besides the parse; tree-sitter
//! already allocates from mimalloc (`pipeline::use_mimalloc_for_trees`). The collector, always
//! on every host, keeps the C library's: mimalloc as its allocator tripled its RSS (10.6 ->
//! 29.3 MB). The switch is one way and made once, in `main`, before the command runs; what was
//! allocated before it (the arguments) stays the C library's to free.

use std::alloc::{GlobalAlloc, Layout, System};
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use libmimalloc_sys as mi;

/// Whether new blocks come from mimalloc.
static MIMALLOC: AtomicBool = AtomicBool::new(false);

/// New blocks from mimalloc from now on (blocks already made keep their allocator), and no
/// transparent huge pages for the process.
pub(crate) fn use_mimalloc() {
    // mimalloc asks for huge pages on the memory it reserves: a run of a second then faults in
    // 2 MiB at a time, which the kernel zeroes whole (a cold 6.12 `graph`: 0.02-0.20 s of system
    // time, 91-106 MB peak RSS; without them 0.03-0.07 s and 60-66 MB, under the C library's 72).
    // A refusal (an old kernel) leaves them on, which costs time, never a result.
    // SAFETY: prctl with integer arguments only.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
    MIMALLOC.store(true, Ordering::Release);
}

/// The global allocator (see the module's doc).
pub(crate) struct Switching;

/// mimalloc's natural alignment: below it (and not above the size) `mi_malloc` suffices.
const MI_MAX_ALIGN: usize = 16;

impl Switching {
    /// Whether `p` is mimalloc's: its segment map knows every region it reserved, and a block
    /// of the C library's lies in none of them. Before the switch nothing is asked: every
    /// block is the C library's, and the collector pays nothing.
    fn owned_by_mimalloc(p: *mut u8) -> bool {
        // SAFETY: a lookup of an address in mimalloc's maps; `p` is not dereferenced.
        MIMALLOC.load(Ordering::Acquire) && unsafe { mi::mi_is_in_heap_region(p as *const c_void) }
    }
}

/// A mimalloc block for `layout`, zeroed or not: `mi_malloc` where its natural alignment
/// suffices, the aligned call otherwise.
fn mi_alloc(layout: Layout, zeroed: bool) -> *mut u8 {
    let (size, align) = (layout.size(), layout.align());
    let natural = align <= MI_MAX_ALIGN && align <= size;
    // SAFETY: mimalloc's allocation functions with the layout's size and alignment.
    let block = unsafe {
        match (natural, zeroed) {
            (true, false) => mi::mi_malloc(size),
            (true, true) => mi::mi_zalloc(size),
            (false, false) => mi::mi_malloc_aligned(size, align),
            (false, true) => mi::mi_zalloc_aligned(size, align),
        }
    };
    block as *mut u8
}

// SAFETY: every block is made by exactly one of two allocators that each fulfil `GlobalAlloc`'s
// contract (size, alignment, zeroing) and is freed or resized by that same one: mimalloc's
// ownership test is exact, and the flag only ever goes from false to true.
unsafe impl GlobalAlloc for Switching {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        if !MIMALLOC.load(Ordering::Relaxed) {
            // SAFETY: the caller's layout, passed on.
            return unsafe { System.alloc(layout) };
        }
        mi_alloc(layout, false)
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        if !MIMALLOC.load(Ordering::Relaxed) {
            // SAFETY: as in alloc.
            return unsafe { System.alloc_zeroed(layout) };
        }
        mi_alloc(layout, true)
    }

    unsafe fn dealloc(&self, p: *mut u8, layout: Layout) {
        if Self::owned_by_mimalloc(p) {
            // SAFETY: a block of mimalloc's, freed once (the caller's promise).
            unsafe { mi::mi_free(p as *mut c_void) }
        } else {
            // SAFETY: a block of the C library's, with the layout it was made with.
            unsafe { System.dealloc(p, layout) }
        }
    }

    unsafe fn realloc(&self, p: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        if Self::owned_by_mimalloc(p) {
            // SAFETY: a block of mimalloc's, resized keeping its alignment.
            unsafe { mi::mi_realloc_aligned(p as *mut c_void, new_size, layout.align()) as *mut u8 }
        } else {
            // SAFETY: a block of the C library's stays the C library's.
            unsafe { System.realloc(p, layout, new_size) }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_keep_their_allocator_across_the_switch() {
        let a = Switching;
        let small = Layout::from_size_align(24, 8).expect("a layout");
        let wide = Layout::from_size_align(100, 64).expect("a layout");
        // The test binary runs with this allocator too: whether the switch already happened in
        // another test or not, each block must round-trip through the allocator that owns it.
        // SAFETY: blocks made here, written within their size, freed once with their layout.
        unsafe {
            let before = a.alloc(small);
            assert!(!before.is_null());
            before.write_bytes(7, 24);
            use_mimalloc();
            let after = a.alloc(small);
            assert!(
                mi::mi_is_in_heap_region(after as *const c_void),
                "a block after the switch is mimalloc's"
            );
            let aligned = a.alloc(wide);
            assert_eq!(aligned as usize % 64, 0);
            let zeroed = a.alloc_zeroed(wide);
            assert!(std::slice::from_raw_parts(zeroed, 100)
                .iter()
                .all(|&b| b == 0));
            // a block made before the switch grows where it was made, its bytes kept
            let grown = a.realloc(before, small, 4096);
            assert!(std::slice::from_raw_parts(grown, 24)
                .iter()
                .all(|&b| b == 7));
            let grown_layout = Layout::from_size_align(4096, 8).expect("a layout");
            let moved = a.realloc(aligned, wide, 8192);
            assert_eq!(moved as usize % 64, 0, "a resize keeps the alignment");
            a.dealloc(grown, grown_layout);
            a.dealloc(after, small);
            a.dealloc(moved, Layout::from_size_align(8192, 64).expect("a layout"));
            a.dealloc(zeroed, wide);
        }
    }
}
