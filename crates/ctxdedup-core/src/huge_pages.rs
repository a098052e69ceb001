//! Transparent huge pages for the large working buffers of one call.
//!
//! A call on a large conversation writes hundreds of megabytes of fresh memory (line records,
//! the window index, the copied contents). With 4 KiB pages the kernel takes one page fault per
//! 4 KiB, and at 100k messages those faults were a quarter of the block pass. Advising the kernel
//! to back such a buffer with huge pages (`madvise(MADV_HUGEPAGE)`, honoured when
//! `/sys/kernel/mm/transparent_hugepage/enabled` is `always` or `madvise`) takes one fault per
//! 2 MiB instead. The advice changes no result: it is a hint, ignored where unsupported.

/// Buffers smaller than this are not advised (a few huge pages at most, and small calls should
/// not pay a system call).
pub const ADVISE_FROM_BYTES: usize = 8 << 20;

/// Asks the kernel to back the capacity of `buffer` with huge pages, if it is at least
/// [`ADVISE_FROM_BYTES`]. Call it right after the buffer is allocated or grown: pages already
/// touched keep their size. No effect outside Linux.
pub fn advise<T>(buffer: &Vec<T>) {
    let bytes = buffer.capacity().saturating_mul(std::mem::size_of::<T>());
    if bytes < ADVISE_FROM_BYTES {
        return;
    }
    #[cfg(target_os = "linux")]
    {
        const PAGE: usize = 4096;
        let start = buffer.as_ptr() as usize;
        // madvise takes page-aligned ranges: the whole pages inside the allocation.
        let first = start.next_multiple_of(PAGE);
        let end = (start + bytes) & !(PAGE - 1);
        if end > first {
            // SAFETY: `[first, end)` lies inside the allocation of `buffer` (its capacity), which
            // this process owns and which stays mapped during the call. `MADV_HUGEPAGE` only sets
            // a hint on the mapping: it moves no data, unmaps nothing and its failure (an old
            // kernel, huge pages disabled) changes nothing, so the result is ignored.
            unsafe {
                libc::madvise(first as *mut libc::c_void, end - first, libc::MADV_HUGEPAGE);
            }
        }
    }
}

#[cfg(test)]
mod tests {
    use super::advise;

    #[test]
    fn advised_buffers_keep_their_contents() {
        let mut v: Vec<u64> = (0..(3 << 20)).collect();
        advise(&v);
        v.reserve(5 << 20);
        advise(&v);
        v.extend(3 << 20..8 << 20);
        assert!(v.iter().enumerate().all(|(i, &x)| x == i as u64));
        let small = vec![1u8; 10];
        advise(&small);
        assert_eq!(small, [1; 10]);
    }
}
