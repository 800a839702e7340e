//! The process's allocator: the system's, with large blocks marked for transparent
//! huge pages.
//!
//! The simulator's big arrays (a partition's ports and switch queues, the packet slab,
//! the event queue's chunks: hundreds of MB on a 65,536-host fabric) are touched at
//! random, one cold line per event. With 4 KiB pages nearly every such touch also
//! misses the TLB; with 2 MiB pages a page-table walk covers 512 times as much.
//! Debian leaves THP to `madvise` (`/sys/kernel/mm/transparent_hugepage/enabled`), so
//! a block of [`MIN_ADVISED`] bytes or more is advised `MADV_HUGEPAGE` when it is
//! allocated or grown. Nothing else changes: the same bytes, freed the same way; where
//! THP is off the advice is ignored, and a refused `madvise` only leaves 4 KiB pages.
//! `docs/perf/scaling.md` has the effect on wall time and peak memory.

use std::alloc::{GlobalAlloc, Layout, System};

/// Blocks from this size are advised (smaller ones are mostly short-lived buffers,
/// and a huge page is 2 MiB).
const MIN_ADVISED: usize = 8 << 20;
const HUGE_PAGE: usize = 2 << 20;

pub struct HugePageAdvisingAllocator;

/// Advises the whole 2 MiB pages inside `[p, p + len)`.
fn advise(p: *mut u8, len: usize) {
    if p.is_null() || len < MIN_ADVISED {
        return;
    }
    let start = (p as usize).next_multiple_of(HUGE_PAGE);
    let end = (p as usize + len) & !(HUGE_PAGE - 1);
    if end > start {
        // SAFETY: the range lies inside a block the allocator just handed out; the
        // advice changes how the kernel backs it, never its contents.
        unsafe {
            libc::madvise(start as *mut libc::c_void, end - start, libc::MADV_HUGEPAGE);
        }
    }
}

// SAFETY: every call is forwarded to `System` with its arguments unchanged; `advise`
// only adds a hint on the returned block.
unsafe impl GlobalAlloc for HugePageAdvisingAllocator {
    unsafe fn alloc(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn alloc_zeroed(&self, layout: Layout) -> *mut u8 {
        let p = unsafe { System.alloc_zeroed(layout) };
        advise(p, layout.size());
        p
    }

    unsafe fn dealloc(&self, ptr: *mut u8, layout: Layout) {
        unsafe { System.dealloc(ptr, layout) }
    }

    unsafe fn realloc(&self, ptr: *mut u8, layout: Layout, new_size: usize) -> *mut u8 {
        let p = unsafe { System.realloc(ptr, layout, new_size) };
        advise(p, new_size);
        p
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn blocks_of_every_size_round_trip() {
        let a = HugePageAdvisingAllocator;
        for size in [
            1usize,
            4096,
            MIN_ADVISED - 1,
            MIN_ADVISED,
            3 * MIN_ADVISED + 17,
        ] {
            let layout = Layout::from_size_align(size, 8).unwrap();
            unsafe {
                let p = a.alloc_zeroed(layout);
                assert!(!p.is_null());
                assert!(std::slice::from_raw_parts(p, size).iter().all(|&b| b == 0));
                p.write_bytes(0xa5, size);
                let q = a.realloc(p, layout, size * 2);
                assert!(!q.is_null());
                assert!(std::slice::from_raw_parts(q, size)
                    .iter()
                    .all(|&b| b == 0xa5));
                a.dealloc(q, Layout::from_size_align(size * 2, 8).unwrap());
            }
        }
    }
}
