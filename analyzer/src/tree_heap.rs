//! tree-sitter's memory. Every node of a parse is a small allocation and a tree is freed node by
//! node (a walk of the whole tree, a reference count per node): on the 6.12 tree that was 40 ms
//! of a cold load's 1.5 s of work. tree-sitter allocates from mimalloc ([`install`], by the
//! binary, first thing), and while a group of files is extracted from a heap of its own
//! ([`FileHeap`], through a [`HeapParser`]), which is then destroyed whole, page by page, with
//! its trees and its parser in it. A group, not one file: mimalloc's first page of a new heap
//! zeroes a 100 KB map of the arena's pages, and a parser is made per heap, which cost more than
//! the parse of many of the 6.12 tree's small headers.

use std::cell::Cell;
use std::ffi::c_void;
use std::sync::atomic::{AtomicBool, Ordering};

use libmimalloc_sys as mi;

/// Whether [`install`] ran: without it tree-sitter uses the C library's allocator and no
/// [`FileHeap`] is made (a library user, a unit test).
static INSTALLED: AtomicBool = AtomicBool::new(false);

thread_local! {
    /// The heap of the file this thread is extracting; null: mimalloc's own.
    static CURRENT: Cell<*mut mi::mi_heap_t> = const { Cell::new(std::ptr::null_mut()) };
}

fn current() -> *mut mi::mi_heap_t {
    CURRENT.with(Cell::get)
}

unsafe extern "C" fn ts_malloc(size: usize) -> *mut c_void {
    let heap = current();
    // SAFETY: mimalloc's allocation functions, on a heap made on this thread and not yet
    // destroyed (CURRENT is cleared before its destruction).
    unsafe {
        if heap.is_null() {
            mi::mi_malloc(size)
        } else {
            mi::mi_heap_malloc(heap, size)
        }
    }
}

unsafe extern "C" fn ts_calloc(count: usize, size: usize) -> *mut c_void {
    let heap = current();
    // SAFETY: as in ts_malloc.
    unsafe {
        if heap.is_null() {
            mi::mi_calloc(count, size)
        } else {
            mi::mi_heap_calloc(heap, count, size)
        }
    }
}

unsafe extern "C" fn ts_realloc(p: *mut c_void, size: usize) -> *mut c_void {
    let heap = current();
    // SAFETY: as in ts_malloc; `p` is tree-sitter's, from one of these functions.
    unsafe {
        if heap.is_null() {
            mi::mi_realloc(p, size)
        } else {
            mi::mi_heap_realloc(heap, p, size)
        }
    }
}

/// Make tree-sitter allocate from mimalloc (and from a [`FileHeap`] while one is entered).
///
/// # Safety
/// Call once, before anything allocates through tree-sitter (a parser, a tree, a cursor made
/// earlier would be freed by the wrong allocator).
pub unsafe fn install() {
    // SAFETY: the caller's promise; the functions have the C allocator signatures.
    unsafe {
        tree_sitter::set_allocator(
            Some(ts_malloc),
            Some(ts_calloc),
            Some(ts_realloc),
            Some(mi::mi_free),
        );
    }
    INSTALLED.store(true, Ordering::Release);
}

/// The heap one file's parser and tree live in, on this thread, destroyed whole when dropped.
/// Whatever tree-sitter allocated while it was entered must be gone by then or never touched
/// again: [`FileHeap::abandon`] takes the parser and the tree instead of their destructors.
pub(crate) struct FileHeap {
    heap: *mut mi::mi_heap_t,
}

impl FileHeap {
    /// A new heap, entered on this thread; `None` without [`install`], or when one is already
    /// entered here (no nesting: the inner one would free the outer one's memory).
    pub(crate) fn enter() -> Option<FileHeap> {
        if !INSTALLED.load(Ordering::Acquire) || !current().is_null() {
            return None;
        }
        // SAFETY: a fresh heap of this thread.
        let heap = unsafe { mi::mi_heap_new() };
        if heap.is_null() {
            return None;
        }
        CURRENT.with(|c| c.set(heap));
        Some(FileHeap { heap })
    }

    /// Leave `x` (a parser, a tree made in this heap) to the heap's destruction.
    pub(crate) fn abandon<T>(&self, x: T) {
        std::mem::forget(x);
    }
}

/// A parser whose every allocation, with every tree it makes, comes from a [`FileHeap`] of its
/// own, both made on the first [`HeapParser::get`] and destroyed together when this is dropped:
/// for the files one task parses one after the other on one thread. The trees are never freed
/// one by one, so a group is kept small (its files' trees stay until the group ends).
pub(crate) struct HeapParser {
    parser: Option<tree_sitter::Parser>,
    heap: Option<FileHeap>,
    tried: bool,
}

impl HeapParser {
    pub(crate) const fn new() -> Self {
        Self {
            parser: None,
            heap: None,
            tried: false,
        }
    }

    /// The group's parser (made by `new_parser`, in the heap) and its heap, made on the first
    /// call (a group whose files all come from the facts cache makes none); `None` when there
    /// can be no heap (no [`install`], or one is entered on this thread already): the caller
    /// parses with a parser of its own and drops each tree.
    pub(crate) fn get(
        &mut self,
        new_parser: fn() -> tree_sitter::Parser,
    ) -> Option<(&mut tree_sitter::Parser, &FileHeap)> {
        if !self.tried {
            self.tried = true;
            if let Some(heap) = FileHeap::enter() {
                self.parser = Some(new_parser());
                self.heap = Some(heap);
            }
        }
        match (&mut self.parser, &self.heap) {
            (Some(parser), Some(heap)) => Some((parser, heap)),
            _ => None,
        }
    }
}

impl Drop for HeapParser {
    fn drop(&mut self) {
        // The parser goes with its heap (its freed nodes and stacks are the heap's), then the heap.
        if let (Some(parser), Some(heap)) = (self.parser.take(), &self.heap) {
            heap.abandon(parser);
        }
        self.heap = None;
    }
}

impl Drop for FileHeap {
    fn drop(&mut self) {
        CURRENT.with(|c| c.set(std::ptr::null_mut()));
        // SAFETY: made by mi_heap_new on this thread (FileHeap is neither Send nor Sync: it
        // holds a raw pointer); nothing made in it is used after this point (the parser and the
        // tree were abandoned, every cursor dropped with the extraction that made it).
        unsafe { mi::mi_heap_destroy(self.heap) };
    }
}
